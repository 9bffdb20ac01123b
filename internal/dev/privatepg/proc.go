package privatepg

import (
	"os"
	"os/exec"
	"time"
)

// proc is a started server process (postgres, pgbouncer) and when it exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// startProc starts cmd and watches for its exit.
func startProc(cmd *exec.Cmd) (*proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// running reports whether the process is running; a nil proc never is.
func (p *proc) running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends sig and returns once the process has exited, killing it after stopWait. Stopping
// a process that is not running does nothing.
func (p *proc) stop(sig os.Signal) {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(stopWait):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
