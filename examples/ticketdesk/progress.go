package main

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// progress shows how many requests are done, on stderr: one line updated in place when stderr is
// a terminal, a line at each quarter otherwise. Other lines go to stdout; on a terminal the
// progress line is cleared before them and drawn again after.
type progress struct {
	mu       sync.Mutex
	out, err io.Writer
	tty      bool
	shown    string // the progress line on screen, "" if none
}

func newProgress(stdout, stderr io.Writer) *progress {
	return &progress{out: stdout, err: stderr, tty: isTerminal(stderr)}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// line prints s on stdout.
func (p *progress) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.shown != "" {
		fmt.Fprint(p.err, "\r\x1b[K")
	}
	fmt.Fprintln(p.out, s)
	if p.tty && p.shown != "" {
		fmt.Fprint(p.err, p.shown)
	}
}

// done reports that done of total requests of mode have finished.
func (p *progress) done(mode string, done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := fmt.Sprintf("[%s] %d/%d requests done", mode, done, total)
	if p.tty {
		p.shown = s
		fmt.Fprint(p.err, "\r\x1b[K"+s)
		if done == total {
			fmt.Fprintln(p.err)
			p.shown = ""
		}
		return
	}
	if step := max(1, total/4); done%step == 0 || done == total {
		fmt.Fprintln(p.err, s)
	}
}

// finish ends a progress line left on screen.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.shown != "" {
		fmt.Fprintln(p.err)
		p.shown = ""
	}
}
