package preflight

import (
	"context"
	"errors"
	"fmt"

	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criVersion asks the CRI at endpoint its Version.
func criVersion(ctx context.Context, endpoint string) Answer {
	conn, err := dialGRPC(endpoint)
	if err != nil {
		return Answer{Err: err}
	}
	defer conn.Close()
	r, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return Answer{Err: errors.New(status.Convert(err).Message())}
	}
	return Answer{Name: r.RuntimeName, Version: r.RuntimeVersion}
}

// containerdVersion asks containerd's version service at address.
func containerdVersion(ctx context.Context, address string) Answer {
	conn, err := dialGRPC(address)
	if err != nil {
		return Answer{Err: err}
	}
	defer conn.Close()
	r, err := versionapi.NewVersionClient(conn).Version(ctx, &emptypb.Empty{})
	if err != nil {
		return Answer{Err: errors.New(status.Convert(err).Message())}
	}
	return Answer{Version: r.Version}
}

// dialGRPC makes a client of a unix socket ("unix:///path" or "/path").
func dialGRPC(endpoint string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+socketPath(endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	return conn, nil
}
