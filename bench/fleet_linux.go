package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd's process when the bench's ends,
// so that no server outlives a bench that was interrupted.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
