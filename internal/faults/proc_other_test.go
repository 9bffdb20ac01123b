//go:build !linux

package faults_test

import "os/exec"

// dieWithParent is a no-op where the kernel offers no parent-death signal.
func dieWithParent(*exec.Cmd) {}
