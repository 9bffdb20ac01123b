package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncekey/oncekey/internal/benchdrive"
)

// The pinned figures: a private Postgres instance of this run, started from the server's own
// binaries (initdb into a temporary directory, its own port and socket directory) and pinned to
// one CPU with taskset, while this process (started pinned to another CPU, `taskset -c 1`) and
// the pgbench it starts run on the other. Both clients then ask the same server on its own
// core, so the ratio compares what each client asks of the server, not how much CPU each takes
// from it; the worker's own CPU per call is measured apart (worker_cpu_claim_complete).

// privateSettings are copied from the main cluster (databaseURL) when it answers, so that the
// private instance commits the way it does: durability (fsync and friends) and memory.
var privateSettings = []string{"fsync", "synchronous_commit", "wal_sync_method", "full_page_writes", "shared_buffers", "commit_delay"}

// privatePostgres is a running private instance.
type privatePostgres struct {
	URL      string
	Settings map[string]string
	dir      string
	cmd      *exec.Cmd
}

// startPrivatePostgres initdb's a cluster into a temporary directory and starts it on a free
// port, pinned to cpu. As root it runs both as the postgres user (initdb and postgres refuse
// root). Call Stop when done.
func startPrivatePostgres(ctx context.Context, cpu int, mainURL string) (*privatePostgres, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		return nil, fmt.Errorf("taskset not found (Debian: apt-get install util-linux): %w", err)
	}
	settings := mainSettings(ctx, mainURL)
	dir, err := os.MkdirTemp("", "oncekey-bench-pg")
	if err != nil {
		return nil, err
	}
	pg := &privatePostgres{dir: dir, Settings: settings}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, and there is no postgres user to run the private instance as (it comes with the postgresql package): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "oncekey", "-A", "trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args := []string{"-c", strconv.Itoa(cpu), filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=100"}
	for _, name := range privateSettings {
		if v, ok := settings[name]; ok {
			args = append(args, "-c", name+"="+v)
		}
	}
	pg.cmd = exec.Command(taskset, args...)
	pg.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	pg.cmd.Dir = dir
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err == nil {
		_ = logf.Chown(int(credUID(cred)), int(credGID(cred)))
		pg.cmd.Stdout, pg.cmd.Stderr = logf, logf
		defer logf.Close()
	}
	if err := pg.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	pg.URL = fmt.Sprintf("postgres://oncekey@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := pgx.Connect(ctx, pg.URL)
		if err == nil {
			c.Close(ctx)
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			pg.Stop()
			return nil, fmt.Errorf("private postgres on port %d did not start: %v: %s", port, err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return pg, nil
}

func credUID(c *syscall.Credential) uint32 {
	if c == nil {
		return uint32(os.Getuid())
	}
	return c.Uid
}

func credGID(c *syscall.Credential) uint32 {
	if c == nil {
		return uint32(os.Getgid())
	}
	return c.Gid
}

// Stop shuts the instance down (fast shutdown) and removes its directory.
func (pg *privatePostgres) Stop() {
	benchdrive.StopServer(pg.cmd, syscall.SIGINT, 30*time.Second, pg.dir)
}

// postgresBin returns the newest /usr/lib/postgresql/*/bin holding initdb and postgres.
func postgresBin() (string, error) {
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
	return "", errors.New("no initdb and postgres under /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)")
}

// mainSettings reads privateSettings from the main cluster; an unreachable one gives none (the
// private instance then runs with Postgres's defaults, fsync on).
func mainSettings(ctx context.Context, url string) map[string]string {
	out := map[string]string{}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		fmt.Fprintf(os.Stderr, "# private postgres: main cluster at %s not reachable (%v); Postgres defaults\n", url, err)
		return out
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT name, setting, coalesce(unit, '') FROM pg_settings WHERE name = ANY($1)`, privateSettings)
	if err != nil {
		return out
	}
	var name, setting, unit string
	_, _ = pgx.ForEachRow(rows, []any{&name, &setting, &unit}, func() error {
		// shared_buffers comes in 8kB pages: give it with its unit.
		if unit == "8kB" {
			setting = strconv.Itoa(mustAtoi(setting)*8) + "kB"
		}
		out[name] = setting
		return nil
	})
	return out
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// allowedCPUs returns this process's CPU affinity as the kernel lists it (Cpus_allowed_list).
func allowedCPUs() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
