package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// reconnect is how the shim reconnects to containerd: the peer is on the same
// node, so after a containerd restart calls must work again within about a
// second, not after grpc's default backoff of up to two minutes. Calls made
// while it is down fail at once with Unavailable (no wait-for-ready).
var reconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 2 * time.Second,
}

// dial connects to a local unix-socket endpoint ("unix:///path" or "/path").
func dial(endpoint string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	target := endpoint
	if strings.HasPrefix(endpoint, "/") { // a bare path, as config allows
		target = "unix://" + endpoint
	}
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(reconnect),
	}, opts...)
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	return conn, nil
}

// sameSocket reports whether two endpoints ("unix:///path" or "/path") name
// the same socket path.
func sameSocket(a, b string) bool {
	path := func(e string) string {
		p, _ := strings.CutPrefix(e, "unix://")
		return filepath.Clean(p)
	}
	return path(a) == path(b)
}
