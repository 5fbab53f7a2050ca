package server

import (
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/status"
)

// observe logs one finished call: errors of the methods the shim intercepts
// at warning level (they are the shim's own decisions, or failures around
// them), everything else at debug level.
func (s *Server) observe(method string, start time.Time, err error) {
	entry := s.log.WithFields(logrus.Fields{"method": method, "duration": time.Since(start).String()})
	if err == nil {
		entry.Debug("call")
		return
	}
	st := status.Convert(err)
	entry = entry.WithFields(logrus.Fields{"code": st.Code().String(), "error": st.Message()})
	if _, intercepted := s.hooks[method]; intercepted {
		entry.Warn("call failed")
		return
	}
	entry.Debug("call failed")
}
