//go:build !linux

package preflight

import "errors"

var errNotLinux = errors.New("not Linux")

func kernelRelease() (string, error) { return "", errNotLinux }
func pidfdSelf() error               { return errNotLinux }
func cgroup2(string) (bool, error)   { return false, errNotLinux }
