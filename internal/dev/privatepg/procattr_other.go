//go:build !linux

package privatepg

import "syscall"

// procAttr runs initdb and postgres as this process's user (which must not be root).
func procAttr(string) (*syscall.SysProcAttr, error) { return &syscall.SysProcAttr{}, nil }
