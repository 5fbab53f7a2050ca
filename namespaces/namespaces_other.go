//go:build !linux

package namespaces

import "errors"

var errUnsupported = errors.New("namespaces: only supported on Linux")

// Stat is not supported off Linux.
func Stat(string) (ID, error) { return ID{}, errUnsupported }

// Same is not supported off Linux.
func Same(string, string) (bool, error) { return false, errUnsupported }

// Open is not supported off Linux.
func Open(int, []Kind) ([]*Handle, error) { return nil, errUnsupported }

// OpenIdentified is not supported off Linux.
func OpenIdentified(int, []Kind) ([]*Handle, Identity, error) { return nil, Identity{}, errUnsupported }

// Pin is not supported off Linux.
func Pin(*Handle, string) error { return errUnsupported }

// Unpin is not supported off Linux.
func Unpin(string) error { return errUnsupported }

// HasInit is not supported off Linux.
func HasInit(string) (bool, error) { return false, errUnsupported }

// CanJoin is not supported off Linux.
func CanJoin(*Handle, string) (bool, error) { return false, errUnsupported }

// Of is not supported off Linux.
func Of(int, []Kind) (map[Kind]ID, error) { return nil, errUnsupported }
