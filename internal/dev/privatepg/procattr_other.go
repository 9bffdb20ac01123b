//go:build !linux

package privatepg

import "syscall"

// procAttr runs initdb and postgres as this process's user (which must not be root), in a
// process group of its own, which Kill ends as a whole.
func procAttr(string) (*syscall.SysProcAttr, error) { return &syscall.SysProcAttr{Setpgid: true}, nil }

// pgbouncerAttr is procAttr for pgbouncer.
func pgbouncerAttr(dir string) (*syscall.SysProcAttr, error) { return procAttr(dir) }
