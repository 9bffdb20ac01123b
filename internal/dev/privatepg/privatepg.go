package privatepg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres is returned by Start when the server's own binaries (initdb and postgres) are
// not installed.
var ErrNoPostgres = errors.New("privatepg: no initdb and postgres under /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)")

// Options configure Start. The zero value starts an unpinned instance with Postgres's defaults.
type Options struct {
	// CPUs pins the server with `taskset -c CPUs` (a CPU list, "0" or "0,2"). Defaults to "":
	// not pinned.
	CPUs string
	// Settings are server settings passed as `-c name=value`, for example {"fsync": "off"}.
	// Defaults to none.
	Settings map[string]string
}

// Instance is a running private Postgres. Its data stays until Close, across Stop and Start.
type Instance struct {
	// URL connects as the superuser oncekey (trust authentication) to the database postgres:
	// postgres://oncekey@127.0.0.1:<Port>/postgres?sslmode=disable.
	URL string
	// Port is the TCP port on 127.0.0.1 the server listens on, the same after a Start.
	Port int

	dir  string // holds data/, postgres.log and the server's Unix socket
	argv []string
	attr *syscall.SysProcAttr
	proc *proc // the running server, nil before Start
}

// stopWait is how long Stop waits for a fast shutdown before it kills the server.
const stopWait = 30 * time.Second

// startWait is how long Start waits for the server to accept connections.
const startWait = 60 * time.Second

// Start initdb's a cluster into a new temporary directory (superuser oncekey, trust
// authentication, UTF8, no fsync during initdb) and starts it on a free port of 127.0.0.1. It
// returns once the server accepts connections. As root (which initdb and postgres refuse) it
// runs both as the postgres user that the postgresql package creates. It returns ErrNoPostgres
// when the binaries are missing. Call Close when done.
func Start(ctx context.Context, opts Options) (*Instance, error) {
	return create(ctx, opts, func(bin, data string) []string {
		return []string{filepath.Join(bin, "initdb"), "-D", data, "-U", "oncekey", "-A", "trust", "-E", "UTF8", "--no-sync"}
	})
}

// StartStandby copies primary with pg_basebackup (WAL streamed during the copy, -R: standby.signal
// and primary_conninfo written) into a new temporary directory and starts it on a free port of
// 127.0.0.1 as a hot standby streaming from primary, with opts as Start takes them. It returns
// once the standby accepts (read-only) connections. primary must be running; initdb's
// pg_hba.conf lets replication connections from 127.0.0.1 in, with trust. The walreceiver's
// application_name is "standby" (cluster_name), so synchronous_standby_names may name it, or
// be '*'. Promote makes it a primary. Call Close when done.
func StartStandby(ctx context.Context, primary *Instance, opts Options) (*Instance, error) {
	if !primary.Running() {
		return nil, fmt.Errorf("privatepg: standby of the server on port %d: it is not running", primary.Port)
	}
	if opts.Settings == nil {
		opts.Settings = map[string]string{}
	}
	if _, ok := opts.Settings["cluster_name"]; !ok {
		opts.Settings = maps.Clone(opts.Settings)
		opts.Settings["cluster_name"] = "standby"
	}
	return create(ctx, opts, func(bin, data string) []string {
		return []string{filepath.Join(bin, "pg_basebackup"), "-D", data, "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port),
			"-U", "oncekey", "-X", "stream", "-R", "--no-sync", "-c", "fast"}
	})
}

// create makes a temporary directory, runs the command setup returns (initdb or pg_basebackup
// into data) as the server's user, and starts the server on a free port with opts.
func create(ctx context.Context, opts Options, setup func(bin, data string) []string) (*Instance, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	var argv []string
	if opts.CPUs != "" {
		taskset, err := exec.LookPath("taskset")
		if err != nil {
			return nil, fmt.Errorf("privatepg: taskset not found (Debian: apt-get install util-linux): %w", err)
		}
		argv = []string{taskset, "-c", opts.CPUs}
	}
	dir, err := os.MkdirTemp("", "oncekey-pg-")
	if err != nil {
		return nil, fmt.Errorf("privatepg: %w", err)
	}
	pg := &Instance{dir: dir}
	if pg.attr, err = ProcAttr(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	setupArgv := setup(bin, data)
	cmd := exec.CommandContext(ctx, setupArgv[0], setupArgv[1:]...)
	cmd.SysProcAttr, cmd.Dir = pg.attr, dir
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("privatepg: %s: %v: %s", filepath.Base(setupArgv[0]), err, out)
	}
	if pg.Port, err = FreePort(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("privatepg: %w", err)
	}
	argv = append(argv, filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(pg.Port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1")
	names := make([]string, 0, len(opts.Settings))
	for name := range opts.Settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		argv = append(argv, "-c", name+"="+opts.Settings[name])
	}
	pg.argv = argv
	pg.URL = fmt.Sprintf("postgres://oncekey@127.0.0.1:%d/postgres?sslmode=disable", pg.Port)
	if err := pg.Start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return pg, nil
}

// Start starts the stopped server again on the same port and data, and returns once it accepts
// connections. Starting a running server is an error.
func (pg *Instance) Start(ctx context.Context) error {
	if pg.Running() {
		return fmt.Errorf("privatepg: the server on port %d is already running", pg.Port)
	}
	logf, err := os.OpenFile(pg.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("privatepg: %w", err)
	}
	defer logf.Close() // the server writes to its own copy of the descriptor
	cmd := exec.Command(pg.argv[0], pg.argv[1:]...)
	cmd.SysProcAttr, cmd.Dir = pg.attr, pg.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	proc, err := startProc(cmd)
	if err != nil {
		return fmt.Errorf("privatepg: start postgres: %w", err)
	}
	pg.proc = proc

	deadline := time.Now().Add(startWait)
	for {
		c, err := pgx.Connect(ctx, pg.URL)
		if err == nil {
			c.Close(ctx)
			return nil
		}
		if !pg.Running() || time.Now().After(deadline) || ctx.Err() != nil {
			pg.Stop()
			return fmt.Errorf("privatepg: postgres on port %d did not start: %v\n%s", pg.Port, err, pg.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Running reports whether the server process is running.
func (pg *Instance) Running() bool { return pg.proc.running() }

// Stop shuts the server down (a fast shutdown: open connections are ended) and returns once it
// has exited, killing it after 30s. The data stays for Start. Stopping a stopped server does
// nothing.
func (pg *Instance) Stop() { pg.proc.stop(syscall.SIGINT) }

// Kill ends the server as a crash would: SIGKILL to the postmaster and every process of its
// process group (its backends, WAL writer and walsenders), so nothing is flushed, sent to a
// standby or shut down cleanly. It returns once the postmaster has exited. The data stays for
// Start (which then runs crash recovery). Killing a stopped server does nothing.
func (pg *Instance) Kill() {
	if !pg.Running() {
		return
	}
	_ = syscall.Kill(-pg.proc.cmd.Process.Pid, syscall.SIGKILL)
	<-pg.proc.done
}

// Promote ends recovery on a standby (pg_promote, waiting up to 60s) so that it takes writes,
// and returns once it does. Promoting a server that is not in recovery is an error.
func (pg *Instance) Promote(ctx context.Context) error {
	c, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		return fmt.Errorf("privatepg: promote the server on port %d: %w", pg.Port, err)
	}
	defer c.Close(ctx)
	var ok bool
	if err := c.QueryRow(ctx, `SELECT pg_promote(true, 60)`).Scan(&ok); err != nil {
		return fmt.Errorf("privatepg: promote the server on port %d: %w", pg.Port, err)
	}
	if !ok {
		return fmt.Errorf("privatepg: the server on port %d was not promoted within 60s:\n%s", pg.Port, pg.Log())
	}
	return nil
}

// Close stops the server and removes its directory.
func (pg *Instance) Close() {
	pg.Stop()
	os.RemoveAll(pg.dir)
}

// Log returns what the server has written to its log so far.
func (pg *Instance) Log() string {
	b, _ := os.ReadFile(pg.logPath())
	return string(b)
}

func (pg *Instance) logPath() string { return filepath.Join(pg.dir, "postgres.log") }

// Bin returns the newest /usr/lib/postgresql/<version>/bin holding initdb and postgres, or
// ErrNoPostgres.
func Bin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", ErrNoPostgres
}

// FreePort returns a TCP port of 127.0.0.1 that nothing listened on a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
