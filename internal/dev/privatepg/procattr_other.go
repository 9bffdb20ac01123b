//go:build !linux

package privatepg

import "syscall"

// ProcAttr runs initdb and postgres as this process's user (which must not be root), in a
// process group of its own, which Kill ends as a whole.
func ProcAttr(string) (*syscall.SysProcAttr, error) { return &syscall.SysProcAttr{Setpgid: true}, nil }

// pgbouncerAttr is ProcAttr for pgbouncer.
func pgbouncerAttr(dir string) (*syscall.SysProcAttr, error) { return ProcAttr(dir) }
