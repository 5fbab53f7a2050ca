package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// localHandler answers one stream the shim keeps to itself on a relayed
// connection.
type localHandler func(ls *localStream) error

// localHandlers are the methods the shim answers itself on a relayed
// connection (Server.local): the intercepted CRI methods (hooks) and the
// health service.
func (s *Server) localHandlers() map[string]localHandler {
	m := map[string]localHandler{
		"/grpc.health.v1.Health/Check": s.healthCheck,
		"/grpc.health.v1.Health/Watch": s.healthWatch,
	}
	for method, h := range s.hooks {
		m[method] = s.hookHandler(method, h)
	}
	return m
}

// hookHandler runs a hook for a local stream: the same code, errors and
// metrics as on the grpc path (unaryHandler).
func (s *Server) hookHandler(method string, h hook) localHandler {
	return func(ls *localStream) error {
		return s.instrument(method, func() error {
			req, err := ls.message()
			if err != nil {
				return err
			}
			out, err := s.proxy.unary(ls.ctx, method, frameOf(req), h, ls)
			if err != nil {
				return err
			}
			return ls.send(out.bytes())
		})
	}
}

func (s *Server) healthCheck(ls *localStream) error {
	req := new(healthpb.HealthCheckRequest)
	if err := ls.decode(req); err != nil {
		return err
	}
	resp, err := s.health.Check(ls.ctx, req)
	if err != nil {
		return err
	}
	return ls.SendMsg(resp)
}

func (s *Server) healthWatch(ls *localStream) error {
	req := new(healthpb.HealthCheckRequest)
	if err := ls.decode(req); err != nil {
		return err
	}
	return s.health.Watch(req, healthWatchStream{ls})
}

type healthWatchStream struct{ *localStream }

func (w healthWatchStream) Send(m *healthpb.HealthCheckResponse) error { return w.SendMsg(m) }

// localStream is one stream the shim answers on a relayed connection. The
// request is read whole (clientLoop), then the handler runs in its own
// goroutine and writes the answer on the client connection.
type localStream struct {
	c        *relayConn
	sid      uint32
	method   string
	h        localHandler
	ctx      context.Context
	cancel   context.CancelFunc
	req      []byte
	tooBig   bool
	started  sync.Once
	finished atomic.Bool // answered or reset

	// guarded by c.mu
	sendWin    int64 // the client's window for this stream
	header     metadata.MD
	trailer    metadata.MD
	headerSent bool
	done       bool
}

// newLocalStream is called with c.mu held.
func newLocalStream(c *relayConn, sid uint32, method string, fields []hpack.HeaderField, h localHandler) *localStream {
	ls := &localStream{c: c, sid: sid, method: method, h: h, sendWin: c.initWin}
	md := metadata.MD{}
	ctx := c.ctx
	var timeout time.Duration
	for _, hf := range fields {
		switch {
		case strings.HasPrefix(hf.Name, ":") && hf.Name != ":authority":
		case hf.Name == "grpc-timeout":
			timeout, _ = parseTimeout(hf.Value)
		case hf.Name == "content-type", hf.Name == "te", strings.HasPrefix(hf.Name, "grpc-"):
		case strings.HasSuffix(hf.Name, "-bin"):
			if v, err := decodeBin(hf.Value); err == nil {
				md.Append(hf.Name, v)
			}
		default:
			md.Append(hf.Name, hf.Value)
		}
	}
	if timeout > 0 {
		ls.ctx, ls.cancel = context.WithTimeout(ctx, timeout)
	} else {
		ls.ctx, ls.cancel = context.WithCancel(ctx)
	}
	ls.ctx = metadata.NewIncomingContext(ls.ctx, md)
	return ls
}

// take appends request DATA (clientLoop only, before dispatch).
func (ls *localStream) take(b []byte) {
	if ls.tooBig || len(ls.req)+len(b) > MaxMsgSize+5 {
		ls.tooBig, ls.req = true, nil
		return
	}
	ls.req = append(ls.req, b...)
}

// dispatch runs the handler once the request is complete.
func (ls *localStream) dispatch() {
	ls.started.Do(func() { go ls.run() })
}

func (ls *localStream) run() {
	defer ls.cancel()
	err := ls.h(ls)
	c := ls.c
	c.mu.Lock()
	ls.finishLocked(err)
	c.mu.Unlock()
	ls.end()
}

// end counts the stream out, once.
func (ls *localStream) end() {
	if !ls.finished.Swap(true) {
		ls.c.nlocal.Add(-1)
		ls.c.checkDrained()
	}
}

// reset is the client's RST_STREAM (c.mu held). A stream reset before
// its request was complete never runs.
func (ls *localStream) reset() {
	ls.done = true
	ls.cancel()
	ls.started.Do(ls.end)
}

// message is the request's one gRPC message.
func (ls *localStream) message() ([]byte, error) {
	b := ls.req
	switch {
	case ls.tooBig:
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d)", MaxMsgSize)
	case len(b) < 5:
		return nil, status.Errorf(codes.Internal, "grpc: request of %s without a message", ls.method)
	case b[0] != 0:
		return nil, status.Errorf(codes.Unimplemented, "grpc: compressed requests are not supported by cri-nstarget")
	case int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5:
		return nil, status.Errorf(codes.Internal, "grpc: request of %s is not one whole message", ls.method)
	}
	return b[5:], nil
}

func (ls *localStream) decode(m proto.Message) error {
	b, err := ls.message()
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the request: %v", err)
	}
	return nil
}

// SetHeader and SetTrailer take the metadata the backend answered with
// (proxy.unary), or a handler's own.
func (ls *localStream) SetHeader(md metadata.MD) error {
	ls.c.mu.Lock()
	defer ls.c.mu.Unlock()
	if ls.headerSent {
		return status.Error(codes.Internal, "header already sent")
	}
	ls.header = metadata.Join(ls.header, md)
	return nil
}

func (ls *localStream) SendHeader(md metadata.MD) error {
	if err := ls.SetHeader(md); err != nil {
		return err
	}
	ls.c.mu.Lock()
	defer ls.c.mu.Unlock()
	return ls.sendHeaderLocked()
}

func (ls *localStream) SetTrailer(md metadata.MD) {
	ls.c.mu.Lock()
	defer ls.c.mu.Unlock()
	ls.trailer = metadata.Join(ls.trailer, md)
}

func (ls *localStream) Context() context.Context { return ls.ctx }

func (ls *localStream) SendMsg(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "cannot encode %T", m)
	}
	b, err := proto.Marshal(pm)
	if err != nil {
		return status.Errorf(codes.Internal, "encode the answer: %v", err)
	}
	return ls.send(b)
}

func (ls *localStream) RecvMsg(any) error {
	return status.Error(codes.Internal, "no further request messages")
}

var _ grpc.ServerStream = (*localStream)(nil)

func (ls *localStream) sendHeaderLocked() error {
	c := ls.c
	if ls.headerSent {
		return nil
	}
	if ls.done || c.closed {
		return status.Error(codes.Canceled, "stream ended")
	}
	ls.headerSent = true
	fields := append([]hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "application/grpc"}}, mdFields(ls.header)...)
	return c.writeClientHeadersLocked(ls.sid, fields, false)
}

// send writes one message within the client's flow-control windows.
func (ls *localStream) send(msg []byte) error {
	c := ls.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ls.sendHeaderLocked(); err != nil {
		return err
	}
	b := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:5], uint32(len(msg)))
	copy(b[5:], msg)
	for len(b) > 0 {
		for (c.connWin <= 0 || ls.sendWin <= 0) && !c.closed && !ls.done {
			c.toClientW.Flush()
			c.cond.Wait()
		}
		if c.closed || ls.done {
			return status.Error(codes.Canceled, "stream ended")
		}
		n := int64(min(len(b), 16384))
		n = min(n, c.connWin, ls.sendWin)
		if err := c.toClient.WriteData(ls.sid, false, b[:n]); err != nil {
			return err
		}
		c.connWin -= n
		ls.sendWin -= n
		c.debt += n
		b = b[n:]
	}
	return c.toClientW.Flush()
}

// finishLocked ends the stream with err's status and the trailer.
func (ls *localStream) finishLocked(err error) {
	c := ls.c
	if ls.done || c.closed {
		return
	}
	ls.done = true
	var fields []hpack.HeaderField
	if !ls.headerSent {
		fields = append(fields, hpack.HeaderField{Name: ":status", Value: "200"}, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	}
	st := status.Convert(toStatus(err))
	fields = append(fields, hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(st.Code()))})
	if msg := st.Message(); msg != "" {
		fields = append(fields, hpack.HeaderField{Name: "grpc-message", Value: encodeGrpcMessage(msg)})
	}
	if p := st.Proto(); len(p.GetDetails()) > 0 {
		if b, err := proto.Marshal(p); err == nil {
			fields = append(fields, hpack.HeaderField{Name: "grpc-status-details-bin", Value: base64.RawStdEncoding.EncodeToString(b)})
		}
	}
	fields = append(fields, mdFields(ls.trailer)...)
	if c.writeClientHeadersLocked(ls.sid, fields, true) == nil {
		c.toClientW.Flush()
	}
}

// mdFields encodes metadata as header fields (binary values in base64).
func mdFields(md metadata.MD) []hpack.HeaderField {
	var fs []hpack.HeaderField
	for k, vs := range md {
		if isReservedHeader(k) {
			continue
		}
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			fs = append(fs, hpack.HeaderField{Name: k, Value: v})
		}
	}
	return fs
}

func isReservedHeader(k string) bool {
	switch k {
	case "content-type", "user-agent", "te", "grpc-status", "grpc-message", "grpc-status-details-bin",
		"grpc-encoding", "grpc-accept-encoding", "grpc-timeout", "grpc-message-type":
		return true
	}
	return k == "" || k[0] == ':'
}

func decodeBin(v string) (string, error) {
	if len(v)%4 == 0 {
		b, err := base64.StdEncoding.DecodeString(v)
		return string(b), err
	}
	b, err := base64.RawStdEncoding.DecodeString(v)
	return string(b), err
}

// parseTimeout reads grpc-timeout ("100m", "5S").
func parseTimeout(v string) (time.Duration, error) {
	if len(v) < 2 {
		return 0, fmt.Errorf("bad grpc-timeout %q", v)
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad grpc-timeout %q", v)
	}
	unit := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second, 'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}[v[len(v)-1]]
	if unit == 0 {
		return 0, fmt.Errorf("bad grpc-timeout unit in %q", v)
	}
	if n > int64(1<<62)/int64(unit) {
		return 1 << 62, nil
	}
	return time.Duration(n) * unit, nil
}

// encodeGrpcMessage percent-encodes a status message as gRPC over HTTP/2
// wants it.
func encodeGrpcMessage(msg string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		ch := msg[i]
		if ch >= ' ' && ch <= '~' && ch != '%' {
			b.WriteByte(ch)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[ch>>4])
		b.WriteByte(hex[ch&15])
	}
	return b.String()
}
