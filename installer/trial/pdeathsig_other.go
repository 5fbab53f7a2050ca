//go:build !linux

package trial

import "syscall"

// dieWithParent: only Linux has it; the trial is stopped by the installer.
func dieWithParent(*syscall.SysProcAttr) {}
