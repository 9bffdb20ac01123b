package privatepg

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoPgBouncer is returned by StartPgBouncer when the pgbouncer binary is not installed.
var ErrNoPgBouncer = errors.New("privatepg: no pgbouncer in PATH or /usr/sbin (Debian: apt-get install pgbouncer)")

// PgBouncerOptions configure StartPgBouncer.
type PgBouncerOptions struct {
	// Host and Port are the Postgres server PgBouncer connects to, for every database name a
	// client asks for (a "*" entry). Required.
	Host string
	Port int
	// Users are the roles clients connect as, all let in without a password (auth_type trust);
	// PgBouncer logs in to Postgres as the same role. Required.
	Users []string
	// PoolMode is PgBouncer's pool_mode: "transaction", "session" or "statement". Defaults to
	// "transaction".
	PoolMode string
	// PoolSize is default_pool_size: the server connections PgBouncer opens per database and
	// role, which every client of that pair shares. Defaults to 4.
	PoolSize int
}

// PgBouncer is a running private PgBouncer on a loopback port of its own.
type PgBouncer struct {
	// Port is the TCP port on 127.0.0.1 PgBouncer listens on.
	Port int
	// Version is the first line of `pgbouncer --version` ("PgBouncer 1.18.0").
	Version string

	dir  string
	proc *proc
}

// PgBouncerBin returns the pgbouncer binary (PATH, then /usr/sbin, where Debian puts it), or
// ErrNoPgBouncer.
func PgBouncerBin() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", ErrNoPgBouncer
}

// StartPgBouncer writes a configuration into a new temporary directory and starts pgbouncer
// in the foreground on a free port of 127.0.0.1, in front of opts.Host:opts.Port. It returns
// once PgBouncer accepts TCP connections. As root (which pgbouncer refuses) it runs as the
// postgres user, like Start. It returns ErrNoPgBouncer when the binary is missing. Call Close
// when done.
func StartPgBouncer(ctx context.Context, opts PgBouncerOptions) (*PgBouncer, error) {
	bin, err := PgBouncerBin()
	if err != nil {
		return nil, err
	}
	if opts.Host == "" || opts.Port == 0 || len(opts.Users) == 0 {
		return nil, fmt.Errorf("privatepg: pgbouncer needs Host, Port and Users, got %q, %d, %q", opts.Host, opts.Port, opts.Users)
	}
	mode, size := opts.PoolMode, opts.PoolSize
	if mode == "" {
		mode = "transaction"
	}
	if size == 0 {
		size = 4
	}
	version, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("privatepg: pgbouncer --version: %w", err)
	}
	dir, err := os.MkdirTemp("", "oncekey-pgbouncer-")
	if err != nil {
		return nil, fmt.Errorf("privatepg: %w", err)
	}
	b := &PgBouncer{dir: dir, Version: strings.SplitN(strings.TrimSpace(string(version)), "\n", 2)[0]}
	if b.Port, err = FreePort(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("privatepg: %w", err)
	}
	var users strings.Builder
	for _, u := range opts.Users {
		fmt.Fprintf(&users, "%q \"\"\n", u)
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
default_pool_size = %d
max_client_conn = 1000
logfile = %s
`, opts.Host, opts.Port, b.Port, filepath.Join(dir, "users.txt"), mode, size, b.logPath())
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(users.String()), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("privatepg: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("privatepg: %w", err)
	}
	attr, err := pgbouncerAttr(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.SysProcAttr, cmd.Dir = attr, dir
	if b.proc, err = startProc(cmd); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("privatepg: start pgbouncer: %w", err)
	}

	deadline := time.Now().Add(startWait)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return b, nil
		}
		if !b.Running() || time.Now().After(deadline) || ctx.Err() != nil {
			log := b.Log()
			b.Close()
			return nil, fmt.Errorf("privatepg: pgbouncer on port %d did not start: %v\n%s", b.Port, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Running reports whether the pgbouncer process is running.
func (b *PgBouncer) Running() bool { return b.proc.running() }

// Close stops PgBouncer (SIGTERM: open client connections are closed) and removes its
// directory. The server behind it is left alone.
func (b *PgBouncer) Close() {
	b.proc.stop(syscall.SIGTERM)
	os.RemoveAll(b.dir)
}

// Log returns what PgBouncer has written to its log so far.
func (b *PgBouncer) Log() string {
	out, _ := os.ReadFile(b.logPath())
	return string(out)
}

func (b *PgBouncer) logPath() string { return filepath.Join(b.dir, "pgbouncer.log") }
