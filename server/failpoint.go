//go:build !failpoints

package server

// failpoint marks a step of a TARGET create at which the crash tests stop
// the shim. It does nothing unless the binary is built with the tag
// failpoints (failpoint_on.go), as the integration tests' second binary is.
func failpoint(string) {}
