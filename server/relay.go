package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

// The relay is how the shim serves a client connection when it can open a
// connection of its own to the backend: one backend connection per client
// connection, HTTP/2 frames passed between the two without terminating gRPC.
// Stream ids are the client's on both sides; DATA, WINDOW_UPDATE, PING,
// SETTINGS, RST_STREAM and GOAWAY frames pass unchanged, so flow control,
// keepalive and cancellation stay end to end. Header blocks are decoded and
// encoded again on each side (HPACK state is per connection), which lets the
// shim keep some streams to itself: the methods it intercepts (hooks, the
// health service) never reach the backend connection; the shim answers them
// on the client connection, making its own backend calls through
// Options.Backend.
//
// Flow control with streams of the shim's own on the client connection:
//   - request DATA of such a stream is credited to the client as it is read
//     (stream and connection), as a server would;
//   - response DATA the shim writes takes room in the client's connection
//     window that the backend believes it has. The relay tracks the client's
//     real connection window exactly (it sees every DATA frame and every
//     WINDOW_UPDATE) and holds backend DATA while the window is short; the
//     bytes the shim sent are kept back from the client's next connection
//     WINDOW_UPDATEs (debt), after which the backend's view and the client's
//     agree again.

// relayPreface is the HTTP/2 client connection preface.
var relayPreface = []byte(http2.ClientPreface)

// relayBufSize sizes the buffered reader and writer of each side.
const relayBufSize = 64 << 10

// maxTableSize bounds the HPACK dynamic tables the relay keeps for a peer.
const maxTableSize = 64 << 10

// initialWindow is HTTP/2's initial flow-control window.
const initialWindow = 65535

var zeroPad [255]byte

// relayConn relays one client connection to its own backend connection.
type relayConn struct {
	s       *Server
	client  net.Conn
	backend net.Conn
	ctx     context.Context
	cancel  context.CancelFunc

	// client -> backend: owned by clientLoop
	fromClient *http2.Framer
	clientBuf  *bufio.Reader
	toBackendW *bufio.Writer
	toBackend  *http2.Framer
	encB       *hpack.Encoder
	encBBuf    bytes.Buffer
	backendTbl chan uint32             // backend's SETTINGS_HEADER_TABLE_SIZE, for encB
	local      map[uint32]*localStream // the shim's own streams, until forgotten (forgetFinished)
	dropped    map[uint32]bool         // streams rejected before the backend saw them (clientLoop)
	lastID     atomic.Uint32           // highest stream id the client opened
	lastLocal  atomic.Uint32           // highest stream id of the shim's own streams
	draining   atomic.Bool             // GOAWAY sent: no new streams
	nlocal     atomic.Int32            // local streams not finished

	callsMu sync.Mutex
	calls   map[uint32]relayedCall // relayed streams

	// backend -> client
	fromBackend *http2.Framer
	backendBuf  *bufio.Reader

	mu        sync.Mutex // guards what follows: the client writer and its state
	cond      *sync.Cond // window grown, stream ended or connection closed
	toClientW *bufio.Writer
	toClient  *http2.Framer
	encC      *hpack.Encoder
	encCBuf   bytes.Buffer
	connWin   int64 // the client's connection receive window, as it really is
	debt      int64 // bytes of the shim's own DATA not yet kept back from the client's credits
	initWin   int64 // the client's SETTINGS_INITIAL_WINDOW_SIZE
	pingOut   bool  // a client ping passed to the backend, not answered yet
	pingSafe  bool  // backend HEADERS or DATA passed since its last ping answer
	closed    bool
	drained   chan struct{} // closed when draining and no stream is left
	drainOnce sync.Once
	closeOnce sync.Once
}

// relayedCall is a stream passed to the backend, for metrics.
type relayedCall struct {
	method string
	start  time.Time
}

func newRelayConn(s *Server, client, backend net.Conn) *relayConn {
	c := &relayConn{
		s: s, client: client, backend: backend,
		clientBuf:  bufio.NewReaderSize(client, relayBufSize),
		backendBuf: bufio.NewReaderSize(backend, relayBufSize),
		toBackendW: bufio.NewWriterSize(backend, relayBufSize),
		toClientW:  bufio.NewWriterSize(client, relayBufSize),
		backendTbl: make(chan uint32, 1),
		connWin:    initialWindow,
		pingSafe:   true,
		initWin:    initialWindow,
		local:      map[uint32]*localStream{},
		dropped:    map[uint32]bool{},
		calls:      map[uint32]relayedCall{},
		drained:    make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.cond = sync.NewCond(&c.mu)
	c.fromClient = newReadFramer(c.clientBuf)
	c.fromBackend = newReadFramer(c.backendBuf)
	c.toBackend = http2.NewFramer(c.toBackendW, nil)
	c.toClient = http2.NewFramer(c.toClientW, nil)
	c.encB = hpack.NewEncoder(&c.encBBuf)
	c.encC = hpack.NewEncoder(&c.encCBuf)
	return c
}

func newReadFramer(r io.Reader) *http2.Framer {
	fr := http2.NewFramer(nil, r)
	fr.ReadMetaHeaders = hpack.NewDecoder(maxTableSize, nil)
	fr.MaxHeaderListSize = MaxMsgSize
	fr.SetReuseFrames()
	return fr
}

// serve relays until either side closes or breaks the connection.
func (c *relayConn) serve() {
	done := make(chan struct{})
	go func() { c.backendLoop(); c.close(); close(done) }()
	c.clientLoop()
	c.close()
	<-done
	c.callsMu.Lock()
	for sid, call := range c.calls {
		c.s.observeRelayed(call, codes.Unavailable)
		delete(c.calls, sid)
	}
	c.callsMu.Unlock()
}

// close ends both connections; local streams see their context cancelled.
func (c *relayConn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.client.Close()
		c.backend.Close()
		c.mu.Lock()
		c.closed = true
		c.cond.Broadcast()
		c.mu.Unlock()
		c.drainOnce.Do(func() { close(c.drained) })
	})
}

// clientLoop reads the client's frames and passes them to the backend,
// keeping the streams of methods the shim answers itself.
func (c *relayConn) clientLoop() {
	preface := make([]byte, len(relayPreface))
	if _, err := io.ReadFull(c.clientBuf, preface); err != nil || !bytes.Equal(preface, relayPreface) {
		return
	}
	if _, err := c.toBackendW.Write(preface); err != nil {
		return
	}
	for {
		f, err := c.fromClient.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				if err := c.rejectStream(se.StreamID, se.Code); err != nil {
					return
				}
				continue
			}
			return
		}
		if err := c.fromClientFrame(f); err != nil {
			return
		}
		if c.clientBuf.Buffered() == 0 {
			if err := c.toBackendW.Flush(); err != nil {
				return
			}
		}
	}
}

func (c *relayConn) fromClientFrame(f http2.Frame) error {
	sid := f.Header().StreamID
	if c.dropped[sid] {
		return c.droppedFrame(f)
	}
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return c.clientHeaders(f)
	case *http2.DataFrame:
		if ls := c.local[sid]; ls != nil {
			c.localData(ls, f)
			return nil
		}
		return c.toBackend.WriteDataPadded(sid, f.StreamEnded(), f.Data(), padOf(f))
	case *http2.WindowUpdateFrame:
		return c.clientWindowUpdate(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return c.toBackend.WriteSettingsAck()
		}
		var ss []http2.Setting
		c.mu.Lock()
		err := f.ForeachSetting(func(st http2.Setting) error {
			ss = append(ss, st)
			switch st.ID {
			case http2.SettingHeaderTableSize:
				c.encC.SetMaxDynamicTableSizeLimit(min(st.Val, maxTableSize))
			case http2.SettingInitialWindowSize:
				delta := int64(st.Val) - c.initWin
				c.initWin = int64(st.Val)
				for _, ls := range c.local {
					ls.sendWin += delta
				}
				c.cond.Broadcast()
			}
			return nil
		})
		c.mu.Unlock()
		if err != nil {
			return err
		}
		return c.toBackend.WriteSettings(ss...)
	case *http2.PingFrame:
		if f.IsAck() { // the answer to a backend's ping
			return c.toBackend.WritePing(true, f.Data)
		}
		// A ping goes to the backend when the client has had backend
		// HEADERS or DATA since the backend answered its last ping: the
		// backend wrote them after it took that ping, so it takes this one
		// as due (a gRPC server counts pings without writes in between as
		// strikes), and the client's BDP estimate measures the real path, as
		// directly. Otherwise the ping follows the shim's own answers only;
		// passed on it would be a strike, and containerd ends such
		// connections with ENHANCE_YOUR_CALM "too_many_pings". The relay
		// answers those itself: while the backend connection lives, that is
		// the same liveness.
		c.mu.Lock()
		if c.pingSafe && !c.pingOut {
			c.pingSafe, c.pingOut = false, true
			c.mu.Unlock()
			return c.toBackend.WritePing(false, f.Data)
		}
		defer c.mu.Unlock()
		if c.closed {
			return net.ErrClosed
		}
		if err := c.toClient.WritePing(true, f.Data); err != nil {
			return err
		}
		return c.toClientW.Flush()
	case *http2.RSTStreamFrame:
		if c.resetLocal(sid) {
			return nil
		}
		c.callsMu.Lock()
		call, relayed := c.calls[sid]
		delete(c.calls, sid)
		c.callsMu.Unlock()
		if relayed {
			c.s.observeRelayed(call, codes.Canceled)
			c.checkDrained()
		}
		return c.toBackend.WriteRSTStream(sid, f.ErrCode)
	case *http2.GoAwayFrame:
		return c.toBackend.WriteGoAway(f.LastStreamID, f.ErrCode, f.DebugData())
	case *http2.PriorityFrame:
		if c.local[sid] != nil {
			return nil
		}
		return c.toBackend.WritePriority(sid, f.PriorityParam)
	case *http2.UnknownFrame:
		return c.toBackend.WriteRawFrame(f.Type, f.Flags, sid, f.Payload())
	default:
		// PUSH_PROMISE (a client may not send it), PRIORITY_UPDATE: not
		// passed on.
		return nil
	}
}

// clientHeaders starts a stream: a method the shim answers becomes a local
// stream; any other is passed to the backend with its header block encoded
// for the backend connection.
func (c *relayConn) clientHeaders(f *http2.MetaHeadersFrame) error {
	sid := f.StreamID
	method := f.PseudoValue("path")
	if c.local[sid] != nil { // trailers of a local stream: requests have none
		return c.rejectStream(sid, http2.ErrCodeProtocol)
	}
	if sid > c.lastID.Load() { // a new stream
		if c.draining.Load() {
			return c.rejectStream(sid, http2.ErrCodeRefusedStream)
		}
		c.lastID.Store(sid)
		if h := c.s.local[method]; h != nil {
			c.forgetFinished()
			c.mu.Lock()
			ls := newLocalStream(c, sid, method, f.Fields, h)
			c.mu.Unlock()
			c.local[sid] = ls
			c.lastLocal.Store(sid)
			c.nlocal.Add(1)
			if f.StreamEnded() {
				ls.dispatch()
			}
			return nil
		}
		c.callsMu.Lock()
		c.calls[sid] = relayedCall{method: method, start: time.Now()}
		c.callsMu.Unlock()
	}
	select {
	case v := <-c.backendTbl:
		c.encB.SetMaxDynamicTableSizeLimit(v)
	default:
	}
	c.encBBuf.Reset()
	for _, hf := range f.Fields {
		if err := c.encB.WriteField(hf); err != nil {
			return err
		}
	}
	return writeHeaderBlock(c.toBackend, sid, c.encBBuf.Bytes(), f.StreamEnded())
}

// resetLocal ends the shim's own stream sid, if it is one.
func (c *relayConn) resetLocal(sid uint32) bool {
	ls := c.local[sid]
	if ls == nil {
		return false
	}
	delete(c.local, sid)
	c.mu.Lock()
	ls.reset()
	c.mu.Unlock()
	return true
}

// forgetFinished drops finished local streams from local.
func (c *relayConn) forgetFinished() {
	for sid, ls := range c.local {
		if ls.finished.Load() {
			delete(c.local, sid)
		}
	}
}

// clientWindowUpdate passes the client's credits on; connection credits
// first pay back the shim's own DATA, stream credits of local streams stay
// here.
func (c *relayConn) clientWindowUpdate(f *http2.WindowUpdateFrame) error {
	inc := int64(f.Increment)
	c.mu.Lock()
	if f.StreamID == 0 {
		c.connWin += inc
		pay := min(inc, c.debt)
		c.debt -= pay
		inc -= pay
		c.cond.Broadcast()
	} else if ls := c.local[f.StreamID]; ls != nil {
		ls.sendWin += inc
		c.cond.Broadcast()
		inc = 0
	}
	c.mu.Unlock()
	if inc == 0 {
		return nil
	}
	return c.toBackend.WriteWindowUpdate(f.StreamID, uint32(inc))
}

// localData takes request DATA of a local stream and credits it at once.
func (c *relayConn) localData(ls *localStream, f *http2.DataFrame) {
	n := f.Header().Length
	ls.take(f.Data())
	c.mu.Lock()
	if n > 0 && !c.closed {
		c.toClient.WriteWindowUpdate(0, n)
		if !f.StreamEnded() {
			c.toClient.WriteWindowUpdate(f.StreamID, n)
		}
		c.toClientW.Flush()
	}
	c.mu.Unlock()
	if f.StreamEnded() {
		ls.dispatch()
	}
}

// rejectStream ends a stream the client opened or sent a bad header block
// on: reset towards the client; a new stream never reaches the backend (its
// later frames are dropped here: the backend would take frames on a stream
// it never saw as a connection error), a relayed one is reset there too.
func (c *relayConn) rejectStream(sid uint32, code http2.ErrCode) error {
	c.resetClientStream(sid, code)
	if c.resetLocal(sid) {
		return nil
	}
	if sid > c.lastID.Load() {
		c.lastID.Store(sid)
		c.dropped[sid] = true
		return nil
	}
	c.callsMu.Lock()
	call, relayed := c.calls[sid]
	delete(c.calls, sid)
	c.callsMu.Unlock()
	if !relayed {
		return nil
	}
	c.s.observeRelayed(call, codes.Internal)
	c.checkDrained()
	return c.toBackend.WriteRSTStream(sid, http2.ErrCodeCancel)
}

// droppedFrame takes a frame of a stream rejected before the backend saw
// it: DATA is credited back to the client (it used the connection window),
// the stream is forgotten when the client ends or resets it.
func (c *relayConn) droppedFrame(f http2.Frame) error {
	sid := f.Header().StreamID
	switch f := f.(type) {
	case *http2.DataFrame:
		if n := f.Header().Length; n > 0 {
			c.mu.Lock()
			if !c.closed {
				c.toClient.WriteWindowUpdate(0, n)
				c.toClientW.Flush()
			}
			c.mu.Unlock()
		}
		if f.StreamEnded() {
			delete(c.dropped, sid)
		}
	case *http2.MetaHeadersFrame:
		if f.StreamEnded() {
			delete(c.dropped, sid)
		}
	case *http2.RSTStreamFrame:
		delete(c.dropped, sid)
	}
	return nil
}

// resetClientStream ends one stream towards the client.
func (c *relayConn) resetClientStream(sid uint32, code http2.ErrCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.toClient.WriteRSTStream(sid, code)
		c.toClientW.Flush()
	}
}

// backendLoop reads the backend's frames and passes them to the client.
func (c *relayConn) backendLoop() {
	for {
		f, err := c.fromBackend.ReadFrame()
		if err != nil {
			return
		}
		c.mu.Lock()
		err = c.fromBackendFrameLocked(f)
		if err == nil && c.backendBuf.Buffered() == 0 {
			err = c.toClientW.Flush()
		}
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (c *relayConn) fromBackendFrameLocked(f http2.Frame) error {
	sid := f.Header().StreamID
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		c.pingSafe = c.pingSafe || !c.pingOut
		if err := c.writeClientHeadersLocked(sid, f.Fields, f.StreamEnded()); err != nil {
			return err
		}
		if f.StreamEnded() {
			c.endRelayedLocked(sid, grpcCode(f.Fields))
		}
		return nil
	case *http2.DataFrame:
		c.pingSafe = c.pingSafe || !c.pingOut
		if err := c.forwardDataLocked(f); err != nil {
			return err
		}
		if f.StreamEnded() {
			c.endRelayedLocked(sid, codes.Unknown) // a gRPC server ends with trailers
		}
		return nil
	case *http2.WindowUpdateFrame:
		return c.toClient.WriteWindowUpdate(sid, f.Increment)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return c.toClient.WriteSettingsAck()
		}
		var ss []http2.Setting
		f.ForeachSetting(func(st http2.Setting) error {
			ss = append(ss, st)
			if st.ID == http2.SettingHeaderTableSize {
				select {
				case <-c.backendTbl:
				default:
				}
				c.backendTbl <- min(st.Val, maxTableSize)
			}
			return nil
		})
		return c.toClient.WriteSettings(ss...)
	case *http2.PingFrame:
		if f.IsAck() {
			c.pingOut = false
		}
		return c.toClient.WritePing(f.IsAck(), f.Data)
	case *http2.RSTStreamFrame:
		c.endRelayedLocked(sid, rstCode(f.ErrCode))
		return c.toClient.WriteRSTStream(sid, f.ErrCode)
	case *http2.GoAwayFrame:
		return c.backendGoAwayLocked(f)
	case *http2.UnknownFrame:
		return c.toClient.WriteRawFrame(f.Type, f.Flags, sid, f.Payload())
	default:
		return nil // PUSH_PROMISE (gRPC servers send none), PRIORITY
	}
}

// forwardDataLocked passes a backend DATA frame to the client within the
// client's real connection window. The backend's view of that window is
// larger only while the shim's own DATA is not paid back yet; then the frame
// goes as soon as, and as far as, the window allows (a padded frame waits
// to go whole), just as the backend itself would send it.
func (c *relayConn) forwardDataLocked(f *http2.DataFrame) error {
	sid, data, pad := f.StreamID, f.Data(), padOf(f)
	n := int64(f.Header().Length)
	for c.connWin < n && !c.closed {
		if pad == nil && c.connWin > 0 && len(data) > 0 {
			part := data[:c.connWin]
			if err := c.toClient.WriteData(sid, false, part); err != nil {
				return err
			}
			c.connWin -= int64(len(part))
			data, n = data[len(part):], n-int64(len(part))
			continue
		}
		c.toClientW.Flush()
		c.cond.Wait()
	}
	if c.closed {
		return net.ErrClosed
	}
	c.connWin -= n
	return c.toClient.WriteDataPadded(sid, f.StreamEnded(), data, pad)
}

// backendGoAwayLocked passes the backend's GOAWAY on. Its last stream id
// speaks for the backend's streams only: streams the shim answers itself go
// on (the id is raised to cover them, so that the client waits for their
// answers instead of retrying them elsewhere, which would repeat a
// CreateContainer), and relayed streams above the backend's id are refused
// to the client now (REFUSED_STREAM: not processed, safe to retry).
func (c *relayConn) backendGoAwayLocked(f *http2.GoAwayFrame) error {
	last := max(f.LastStreamID, c.lastLocal.Load())
	var refused []uint32
	c.callsMu.Lock()
	for sid, call := range c.calls {
		if sid > f.LastStreamID {
			delete(c.calls, sid)
			c.s.observeRelayed(call, codes.Unavailable)
			refused = append(refused, sid)
		}
	}
	c.callsMu.Unlock()
	for _, sid := range refused {
		if err := c.toClient.WriteRSTStream(sid, http2.ErrCodeRefusedStream); err != nil {
			return err
		}
	}
	return c.toClient.WriteGoAway(last, f.ErrCode, f.DebugData())
}

// endRelayedLocked observes a relayed stream's end.
func (c *relayConn) endRelayedLocked(sid uint32, code codes.Code) {
	c.callsMu.Lock()
	call, ok := c.calls[sid]
	delete(c.calls, sid)
	c.callsMu.Unlock()
	if ok {
		c.s.observeRelayed(call, code)
		c.checkDrained()
	}
}

// writeClientHeadersLocked encodes a header block for the client connection.
func (c *relayConn) writeClientHeadersLocked(sid uint32, fields []hpack.HeaderField, end bool) error {
	c.encCBuf.Reset()
	for _, hf := range fields {
		if err := c.encC.WriteField(hf); err != nil {
			return err
		}
	}
	return writeHeaderBlock(c.toClient, sid, c.encCBuf.Bytes(), end)
}

// drain sends GOAWAY to the client: streams it has opened finish, new ones
// are refused. drained is closed once none is left, or the connection is.
func (c *relayConn) drain() <-chan struct{} {
	c.mu.Lock()
	if !c.draining.Swap(true) && !c.closed {
		// clientLoop refuses streams above lastID from now on
		c.toClient.WriteGoAway(c.lastID.Load(), http2.ErrCodeNo, nil)
		c.toClientW.Flush()
	}
	c.mu.Unlock()
	c.checkDrained()
	return c.drained
}

// checkDrained closes drained when draining and no stream is left. It takes
// callsMu: callers must not hold it.
func (c *relayConn) checkDrained() {
	if !c.draining.Load() || c.nlocal.Load() > 0 {
		return
	}
	c.callsMu.Lock()
	n := len(c.calls)
	c.callsMu.Unlock()
	if n == 0 {
		c.drainOnce.Do(func() { close(c.drained) })
	}
}

// writeHeaderBlock writes a header block as HEADERS and CONTINUATION frames
// no larger than HTTP/2's smallest maximum frame size.
func writeHeaderBlock(fw *http2.Framer, sid uint32, block []byte, end bool) error {
	const max = 16384
	first := block
	if len(first) > max {
		first = block[:max]
	}
	rest := block[len(first):]
	if err := fw.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: first, EndStream: end, EndHeaders: len(rest) == 0}); err != nil {
		return err
	}
	for len(rest) > 0 {
		n := min(len(rest), max)
		if err := fw.WriteContinuation(sid, n == len(rest), rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// padOf is padding of the same length as f's, so that a DATA frame passed on
// takes the same room in the flow-control windows.
func padOf(f *http2.DataFrame) []byte {
	if !f.Header().Flags.Has(http2.FlagDataPadded) {
		return nil
	}
	n := int(f.Header().Length) - len(f.Data()) - 1
	if n <= 0 {
		return zeroPad[:0]
	}
	return zeroPad[:n]
}

// grpcCode is the grpc-status of a trailer block (Unknown when missing).
func grpcCode(fields []hpack.HeaderField) codes.Code {
	for _, hf := range fields {
		if hf.Name == "grpc-status" {
			if n, err := strconv.ParseUint(hf.Value, 10, 32); err == nil {
				return codes.Code(n)
			}
		}
	}
	return codes.Unknown
}

// rstCode is the gRPC code a client sees for a stream reset with code.
func rstCode(code http2.ErrCode) codes.Code {
	switch code {
	case http2.ErrCodeCancel:
		return codes.Canceled
	case http2.ErrCodeRefusedStream:
		return codes.Unavailable
	case http2.ErrCodeEnhanceYourCalm:
		return codes.ResourceExhausted
	}
	return codes.Internal
}

// observeRelayed records one relayed call's end: the shim only passed it
// on, so it is logged at debug level only.
func (s *Server) observeRelayed(call relayedCall, code codes.Code) {
	if s.metrics != nil {
		s.metrics.Call(call.method, code, time.Since(call.start))
	}
	if s.log.Logger.IsLevelEnabled(logrus.DebugLevel) {
		s.log.WithFields(logrus.Fields{"method": call.method, "duration": time.Since(call.start).String(), "code": code.String()}).Debug("call relayed")
	}
}
