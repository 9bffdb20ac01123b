package privatepg

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// ProcAttr returns the attributes initdb and postgres run with (and Patroni, in package
// internal/dev/patroni): as root, the postgres user's credentials (dir is handed to that user);
// and a SIGINT (fast shutdown) when this process dies, so a test binary killed by a timeout
// leaves no server behind; and a process group of its own, which Kill ends as a whole.
func ProcAttr(dir string) (*syscall.SysProcAttr, error) {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGINT, Setpgid: true}
	if os.Geteuid() != 0 {
		return attr, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("privatepg: running as root, and there is no postgres user to run initdb and postgres as (the postgresql package creates it): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, fmt.Errorf("privatepg: %w", err)
	}
	attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return attr, nil
}

// pgbouncerAttr is ProcAttr for pgbouncer, whose shutdown on SIGINT waits for its clients: it
// gets SIGTERM (an immediate shutdown) when this process dies.
func pgbouncerAttr(dir string) (*syscall.SysProcAttr, error) {
	attr, err := ProcAttr(dir)
	if err != nil {
		return nil, err
	}
	attr.Pdeathsig = syscall.SIGTERM
	return attr, nil
}
