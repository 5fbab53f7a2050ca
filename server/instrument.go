package server

import (
	"runtime/debug"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Metrics receives what the shim measures; package metrics implements it for
// Prometheus. Options.Metrics nil means none. Label values are bounded:
// methods are cri-api's, reasons a fixed set (reasonKind).
type Metrics interface {
	// Call records one finished CRI call: its full method name
	// ("/runtime.v1.RuntimeService/Version"), status code and duration.
	// It is on every call's path: it must be cheap.
	Call(method string, code codes.Code, d time.Duration)
	// Targeting records one targeting decision for one namespace ("pid",
	// "ipc", "network") at stage "create" or "start": result "targeted",
	// "fallback" or "refused", and why ("none" when targeted).
	Targeting(namespace, stage, result, reason string)
}

// instrument is the boundary every call passes: it turns errors into a gRPC
// status once, contains panics, and observes the call once.
func (s *Server) instrument(method string, call func() error) (err error) {
	start := time.Now()
	defer func() {
		// grpc does not recover handler panics: one bad request must not take
		// down the runtime path of every pod on the node.
		if r := recover(); r != nil {
			s.log.WithFields(logrus.Fields{"method": method, "panic": r, "stack": string(debug.Stack())}).Error("handler panicked")
			err = status.Errorf(codes.Internal, "cri-nstarget: internal error in %s", method)
		}
		s.observe(method, start, err)
	}()
	return toStatus(call())
}

// observe logs one finished call: errors of the methods the shim intercepts
// at warning level (they are the shim's own decisions, or failures around
// them), everything else at debug level.
func (s *Server) observe(method string, start time.Time, err error) {
	d := time.Since(start)
	if s.metrics != nil {
		s.metrics.Call(method, status.Code(err), d)
	}
	_, intercepted := s.hooks[method]
	if !s.log.Logger.IsLevelEnabled(logrus.DebugLevel) && (err == nil || !intercepted) {
		return // the common case: no log entry built
	}
	entry := s.log.WithFields(logrus.Fields{"method": method, "duration": d.String()})
	if err == nil {
		entry.Debug("call")
		return
	}
	st := status.Convert(err)
	entry = entry.WithFields(logrus.Fields{"code": st.Code().String(), "error": st.Message()})
	if intercepted {
		entry.Warn("call failed")
		return
	}
	entry.Debug("call failed")
}
