package trial

import "syscall"

// dieWithParent has the kernel kill the trial when the installer dies.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
