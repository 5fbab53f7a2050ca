package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// codedError carries the gRPC code the shim chose for an error of its own.
// It is turned into a status once, by toStatus.
type codedError struct {
	code codes.Code
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func coded(code codes.Code, format string, args ...any) error {
	return &codedError{code: code, err: fmt.Errorf(format, args...)}
}

func invalidf(format string, args ...any) error {
	return coded(codes.InvalidArgument, format, args...)
}

func notFoundf(format string, args ...any) error { return coded(codes.NotFound, format, args...) }

func preconditionf(format string, args ...any) error {
	return coded(codes.FailedPrecondition, format, args...)
}

// toStatus is the one place errors become gRPC statuses: the shim's own coded
// errors get their code and message; a status from the backend, returned
// unwrapped, passes through unchanged; context errors keep their meaning;
// anything else is Internal.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var ce *codedError
	if errors.As(err, &ce) {
		return status.Error(ce.code, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// answered tells whether err is the backend's own answer to a call (after
// which a failed create has made nothing: containerd cleans up after itself),
// rather than a call cut short, cancelled, timed out or with the connection
// lost, after which the backend may have made the container all the same.
func answered(err error) bool {
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable:
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// codeOf picks the code for a failure to reach the target or its
// container (containerd's API): Unavailable when containerd did not answer,
// FailedPrecondition otherwise.
func codeOf(err error) codes.Code {
	if status.Code(err) == codes.Unavailable || errors.Is(err, context.DeadlineExceeded) {
		return codes.Unavailable
	}
	return codes.FailedPrecondition
}
