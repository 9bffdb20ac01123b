package faults_test

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the child process get SIGKILL when the test binary dies, so a test binary
// killed by a timeout leaves no worker behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
