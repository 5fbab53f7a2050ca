package server

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestToStatus(t *testing.T) {
	backend := status.Error(codes.ResourceExhausted, "backend said so")
	for _, tc := range []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{invalidf("bad %s", "id"), codes.InvalidArgument, "bad id"},
		{notFoundf("gone"), codes.NotFound, "gone"},
		{preconditionf("other pod"), codes.FailedPrecondition, "other pod"},
		{backend, codes.ResourceExhausted, "backend said so"},
		{context.DeadlineExceeded, codes.DeadlineExceeded, "context deadline exceeded"},
		{errors.New("boom"), codes.Internal, "boom"},
	} {
		st := status.Convert(toStatus(tc.err))
		if st.Code() != tc.code || st.Message() != tc.msg {
			t.Errorf("toStatus(%v) = %v %q, want %v %q", tc.err, st.Code(), st.Message(), tc.code, tc.msg)
		}
	}
	if toStatus(backend) != backend {
		t.Error("backend status was rebuilt, not passed through")
	}
	if toStatus(nil) != nil {
		t.Error("nil error became a status")
	}
}
