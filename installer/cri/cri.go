// Package cri is what the installer asks of CRI sockets, over grpc-go: the
// shim's grpc.health.v1 service, the runtime's Version, the containers
// still to start (CREATED), and a smoke test (a sandbox and a container
// created, run to exit 0 and removed). Each call dials the socket and
// closes it.
package cri

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Client is stateless; Timeout bounds each call (default 5s).
type Client struct {
	Timeout time.Duration
}

func (c Client) call(ctx context.Context, socket string, f func(context.Context, *grpc.ClientConn) error) error {
	t := c.Timeout
	if t == 0 {
		t = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	return f(ctx, conn)
}

// Serving is nil when the socket's health service says SERVING.
func (c Client) Serving(ctx context.Context, socket string) error {
	return c.call(ctx, socket, func(ctx context.Context, conn *grpc.ClientConn) error {
		r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if r.Status != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health: %s", r.Status)
		}
		return nil
	})
}

// Runtime is the runtime's name and version.
func (c Client) Runtime(ctx context.Context, socket string) (name, version string, err error) {
	err = c.call(ctx, socket, func(ctx context.Context, conn *grpc.ClientConn) error {
		r, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
		if err != nil {
			return err
		}
		name, version = r.RuntimeName, r.RuntimeVersion
		return nil
	})
	return name, version, err
}

// ImageOf is the image (its id, as the runtime resolved it) of a running
// container of the pod whose uid is podUID: the installer's own, which is
// on the node since the installer runs from it.
func (c Client) ImageOf(ctx context.Context, socket, podUID string) (string, error) {
	var image string
	err := c.call(ctx, socket, func(ctx context.Context, conn *grpc.ClientConn) error {
		r, err := runtimeapi.NewRuntimeServiceClient(conn).ListContainers(ctx, &runtimeapi.ListContainersRequest{
			Filter: &runtimeapi.ContainerFilter{
				State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
				LabelSelector: map[string]string{"io.kubernetes.pod.uid": podUID},
			},
		})
		if err != nil {
			return err
		}
		for _, ctr := range r.Containers {
			if image = ctr.ImageRef; image == "" && ctr.Image != nil {
				image = ctr.Image.Image
			}
			if image != "" {
				return nil
			}
		}
		return fmt.Errorf("no running container of pod %s", podUID)
	})
	return image, err
}

// Created lists the containers in state CREATED.
func (c Client) Created(ctx context.Context, socket string) (map[string]bool, error) {
	out := map[string]bool{}
	err := c.call(ctx, socket, func(ctx context.Context, conn *grpc.ClientConn) error {
		r, err := runtimeapi.NewRuntimeServiceClient(conn).ListContainers(ctx, &runtimeapi.ListContainersRequest{
			Filter: &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_CREATED}},
		})
		if err != nil {
			return err
		}
		for _, ctr := range r.Containers {
			out[ctr.Id] = true
		}
		return nil
	})
	return out, err
}
