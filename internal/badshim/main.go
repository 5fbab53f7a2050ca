// Command badshim is the node test's shim that is healthy by its health
// service but through which a node cannot work (e2e/node, make node-tools):
// the cluster install's image ships it as cri-nstarget, so the installer
// starts it with the real shim's unit (Type=notify, --config), finds its
// grpc.health.v1 SERVING, and restarts the kubelet onto it.
//
// It forwards every CRI call to containerd unchanged (the kubelet needs
// Version and ImageFsInfo to start at all), but for those its mode fails:
//
//	notready  Status and RunPodSandbox: the kubelet runs, and reports its
//	          node NotReady (the container runtime is down); no sandbox
//	          can be made through it
//	nocreate  CreateContainer: the node is Ready through it, but no
//	          container can be created (a pod whose container died is not
//	          started again)
//
// The mode is built in (-ldflags "-X main.mode=notready"): the installer
// runs the binary as cri-nstarget with the unit's arguments only, and two
// modes must be two binaries (a binary rolled back on a node is not tried
// there again). -mode overrides it.
//
// Forwarding decodes each message as the type its method declares in the
// protobuf registry (cri-api's generated code registers runtime.v1), so
// that grpc-go's own codec carries it both ways; unary and streaming
// methods alike.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/coreos/go-systemd/v22/daemon"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// mode is the built-in mode (see the package comment).
var mode string

// failing are the methods each mode fails.
var failing = map[string][]string{
	"notready": {runtimeapi.RuntimeService_Status_FullMethodName, runtimeapi.RuntimeService_RunPodSandbox_FullMethodName},
	"nocreate": {runtimeapi.RuntimeService_CreateContainer_FullMethodName},
}

func main() {
	fs := flag.NewFlagSet("badshim", flag.ContinueOnError)
	fs.String("config", "", "accepted and ignored (the real shim's unit passes it)")
	m := fs.String("mode", mode, "notready or nocreate")
	listen := fs.String("listen", "/run/cri-nstarget/cri.sock", "the CRI socket to serve")
	backend := fs.String("backend", "/run/containerd/containerd.sock", "containerd's socket")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *m, *listen, *backend); err != nil {
		fmt.Fprintln(os.Stderr, "badshim:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, m, listen, backend string) error {
	srv, closeBackend, err := newServer(m, backend)
	if err != nil {
		return err
	}
	defer closeBackend()
	_ = os.Remove(listen)
	lis, err := net.Listen("unix", listen)
	if err != nil {
		return err
	}
	defer os.Remove(listen)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	fmt.Fprintf(os.Stderr, "badshim: mode %s: serving %s, forwarding to %s but for %s\n", m, listen, backend, strings.Join(failing[m], ", "))
	_, _ = daemon.SdNotify(false, daemon.SdNotifyReady)
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
		srv.Stop()
		return nil
	}
}

// newServer is the health service, SERVING, beside a forwarder of every
// other method to backend but mode's.
func newServer(m, backend string) (*grpc.Server, func(), error) {
	fail, ok := failing[m]
	if !ok {
		return nil, nil, fmt.Errorf("mode %q: want notready or nocreate", m)
	}
	conn, err := grpc.NewClient("unix://"+backend, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	f := &forwarder{backend: conn, mode: m, fail: map[string]bool{}}
	for _, name := range fail {
		f.fail[name] = true
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(f.handle))
	healthpb.RegisterHealthServer(srv, health.NewServer()) // "" is SERVING
	return srv, func() { conn.Close() }, nil
}

// forwarder forwards calls to backend, and fails those in fail.
type forwarder struct {
	backend *grpc.ClientConn
	mode    string
	fail    map[string]bool
}

func (f *forwarder) handle(_ any, in grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(in)
	if f.fail[method] {
		return status.Errorf(codes.Unavailable, "badshim (%s): %s fails here, by design (the node test)", f.mode, method)
	}
	req, resp, err := messages(method)
	if err != nil {
		return status.Error(codes.Unimplemented, err.Error())
	}
	ctx, cancel := context.WithCancel(in.Context())
	defer cancel()
	md, _ := metadata.FromIncomingContext(ctx)
	out, err := f.backend.NewStream(metadata.NewOutgoingContext(ctx, md.Copy()),
		&grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
	go func() {
		for {
			m := req.New().Interface()
			if err := in.RecvMsg(m); err != nil {
				_ = out.CloseSend()
				return
			}
			if err := out.SendMsg(m); err != nil {
				return
			}
		}
	}()
	for {
		m := resp.New().Interface()
		if err := out.RecvMsg(m); errors.Is(err, io.EOF) {
			in.SetTrailer(out.Trailer())
			return nil
		} else if err != nil {
			in.SetTrailer(out.Trailer())
			return err // the backend's status, unchanged
		}
		if err := in.SendMsg(m); err != nil {
			return err
		}
	}
}

// messages are the request and response types of method
// ("/package.Service/Method"), from the protobuf registry.
func messages(method string) (req, resp protoreflect.MessageType, err error) {
	service, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil, nil, fmt.Errorf("method %q: want /service/method", method)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return nil, nil, fmt.Errorf("service %s: %w", service, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok || sd.Methods().ByName(protoreflect.Name(name)) == nil {
		return nil, nil, fmt.Errorf("unknown method %s", method)
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if req, err = protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName()); err != nil {
		return nil, nil, err
	}
	if resp, err = protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName()); err != nil {
		return nil, nil, err
	}
	return req, resp, nil
}
