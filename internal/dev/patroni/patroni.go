package patroni

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncekey/oncekey/internal/dev/privatepg"
)

// ErrNoPatroni is returned by Start when the patroni or the etcd binary is not installed.
var ErrNoPatroni = errors.New("patroni: no patroni or etcd in PATH (Debian: apt-get install patroni etcd-server)")

// Options configure Start. The zero value starts a primary and its synchronous standby that fail
// over in about ten seconds.
type Options struct {
	// LoopWait is Patroni's loop_wait: how long a node sleeps between two looks at etcd and its
	// Postgres. Defaults to 1s.
	LoopWait time.Duration
	// Nodes is the number of Patroni nodes, each with its own Postgres. Defaults to 2: a primary
	// and its synchronous standby.
	Nodes int
	// Parameters are Postgres settings of every node, beside those Patroni sets itself. Defaults
	// to {"fsync": "off"}: the tests kill processes, not the machine.
	Parameters map[string]string
	// RetryTimeout is Patroni's retry_timeout: how long a node retries etcd and Postgres before
	// a primary demotes itself. Defaults to 3s.
	RetryTimeout time.Duration
	// TTL is Patroni's ttl: how long the leader key lives without renewal, the longest a dead
	// primary keeps the lead. Defaults to 10s.
	TTL time.Duration
}

// Cluster is a running Patroni cluster of the caller's own: one etcd and Options.Nodes Patroni
// nodes, everything in one temporary directory and on free ports of 127.0.0.1.
type Cluster struct {
	// Nodes are the Patroni nodes, named n0, n1, …; which one is the primary changes (Primary).
	Nodes []*Node
	// Scope is Patroni's scope: the cluster's name in etcd.
	Scope string

	dir  string
	etcd *process
}

// Node is one Patroni node and its Postgres.
type Node struct {
	// Name is Patroni's name of the node, and its Postgres's application_name on the primary.
	Name string
	// Port is the TCP port on 127.0.0.1 its Postgres listens on.
	Port int
	// APIPort is the TCP port on 127.0.0.1 of its Patroni REST API.
	APIPort int
	// URL connects to its Postgres as the superuser oncekey (trust authentication) to the
	// database postgres: postgres://oncekey@127.0.0.1:<Port>/postgres?sslmode=disable.
	URL string

	argv    []string
	dir     string // the cluster's directory
	data    string
	attr    *syscall.SysProcAttr
	patroni *process
}

// Start starts etcd, then every node's Patroni, which bootstraps the cluster with initdb (the
// superuser oncekey, trust authentication on 127.0.0.1) and clones the standbys with
// pg_basebackup. The dynamic configuration has synchronous_mode and synchronous_mode_strict
// on, use_pg_rewind on, and opts' ttl, loop_wait and retry_timeout. Start returns once one node
// is the primary and another its synchronous standby. As root (which initdb and postgres
// refuse) Patroni and etcd run as the postgres user, like privatepg.Start. It returns
// ErrNoPatroni when patroni or etcd is missing, privatepg.ErrNoPostgres when Postgres's
// binaries are. Call Close when done.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	patroniBin, err := exec.LookPath("patroni")
	if err != nil {
		return nil, ErrNoPatroni
	}
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, ErrNoPatroni
	}
	pgBin, err := privatepg.Bin()
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	dir, err := os.MkdirTemp("", "oncekey-patroni-")
	if err != nil {
		return nil, fmt.Errorf("patroni: %w", err)
	}
	attr, err := privatepg.ProcAttr(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	c := &Cluster{Scope: "oncekey-" + hex.EncodeToString(b[:]), dir: dir}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	etcdURL, err := c.startEtcd(ctx, etcdBin, attr)
	if err != nil {
		return nil, err
	}
	for i := range opts.Nodes {
		n := &Node{Name: "n" + strconv.Itoa(i), dir: dir, attr: attr}
		if n.Port, err = privatepg.FreePort(); err != nil {
			return nil, fmt.Errorf("patroni: %w", err)
		}
		if n.APIPort, err = privatepg.FreePort(); err != nil {
			return nil, fmt.Errorf("patroni: %w", err)
		}
		n.URL = fmt.Sprintf("postgres://oncekey@127.0.0.1:%d/postgres?sslmode=disable", n.Port)
		n.data = filepath.Join(dir, n.Name)
		config := filepath.Join(dir, n.Name+".yml")
		// JSON is YAML: Patroni reads it as its configuration file.
		conf, err := json.MarshalIndent(n.config(c.Scope, etcdURL, pgBin, opts), "", "  ")
		if err != nil {
			return nil, fmt.Errorf("patroni: %w", err)
		}
		if err := os.WriteFile(config, conf, 0o644); err != nil {
			return nil, fmt.Errorf("patroni: %w", err)
		}
		n.argv = []string{patroniBin, config}
		c.Nodes = append(c.Nodes, n)
		if err := n.Start(ctx); err != nil {
			return nil, err
		}
	}
	if _, err := c.WaitPrimary(ctx, nil); err != nil {
		return nil, err
	}
	if opts.Nodes > 1 {
		if _, err := c.WaitSync(ctx); err != nil {
			return nil, err
		}
	}
	ok = true
	return c, nil
}

func (o Options) withDefaults() Options {
	if o.LoopWait == 0 {
		o.LoopWait = time.Second
	}
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.Parameters == nil {
		o.Parameters = map[string]string{"fsync": "off"}
	}
	if o.RetryTimeout == 0 {
		o.RetryTimeout = 3 * time.Second
	}
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	return o
}

// startEtcd starts a single-member etcd with its data under the cluster's directory and
// returns its client URL once it reports itself healthy.
func (c *Cluster) startEtcd(ctx context.Context, bin string, attr *syscall.SysProcAttr) (string, error) {
	client, err := privatepg.FreePort()
	if err != nil {
		return "", fmt.Errorf("patroni: %w", err)
	}
	peer, err := privatepg.FreePort()
	if err != nil {
		return "", fmt.Errorf("patroni: %w", err)
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	c.etcd, err = startProcess([]string{bin, "--name", "etcd", "--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "etcd=" + peerURL, "--initial-cluster-state", "new", "--initial-cluster-token", c.Scope,
		"--logger", "zap", "--log-level", "warn"}, attr, c.dir, filepath.Join(c.dir, "etcd.log"))
	if err != nil {
		return "", err
	}
	for {
		if body, ok := get(ctx, clientURL+"/health"); ok && strings.Contains(body, `"true"`) {
			return clientURL, nil
		}
		if !c.etcd.running() {
			return "", fmt.Errorf("patroni: etcd exited at start-up:\n%s", readTail(filepath.Join(c.dir, "etcd.log")))
		}
		if err := wait(ctx, "etcd on "+clientURL+" to be healthy"); err != nil {
			return "", err
		}
	}
}

// config is the node's Patroni configuration.
func (n *Node) config(scope, etcdURL, pgBin string, opts Options) map[string]any {
	parameters := map[string]any{}
	for k, v := range opts.Parameters {
		parameters[k] = v
	}
	secs := func(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }
	api := fmt.Sprintf("127.0.0.1:%d", n.APIPort)
	pg := fmt.Sprintf("127.0.0.1:%d", n.Port)
	return map[string]any{
		"scope": scope, "namespace": "/oncekey/", "name": n.Name,
		"restapi": map[string]any{"listen": api, "connect_address": api},
		"etcd3":   map[string]any{"hosts": []string{strings.TrimPrefix(etcdURL, "http://")}},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl": secs(opts.TTL), "loop_wait": secs(opts.LoopWait), "retry_timeout": secs(opts.RetryTimeout),
				"maximum_lag_on_failover": 1 << 20,
				"synchronous_mode":        true, "synchronous_mode_strict": true,
				"postgresql": map[string]any{"use_pg_rewind": true, "use_slots": true, "parameters": parameters},
			},
			"initdb": []any{map[string]string{"encoding": "UTF8"}, "no-sync"},
		},
		"postgresql": map[string]any{
			"listen": pg, "connect_address": pg,
			"data_dir": n.data, "bin_dir": pgBin, "pgpass": filepath.Join(n.dir, n.Name+".pgpass"),
			"authentication": map[string]any{
				"superuser":   map[string]string{"username": "oncekey"},
				"replication": map[string]string{"username": "replicator"},
			},
			"parameters": map[string]any{"unix_socket_directories": n.dir},
			"pg_hba": []string{
				"local all all trust",
				"host all all 127.0.0.1/32 trust",
				"host replication all 127.0.0.1/32 trust",
			},
			"remove_data_directory_on_rewind_failure":     true,
			"remove_data_directory_on_diverged_timelines": true,
		},
	}
}

// Start starts the node's Patroni (again, after Kill: on its old data it rejoins as a standby
// of the current primary, rewound with pg_rewind or cloned anew), and returns once its REST API
// answers. Starting a running node is an error.
func (n *Node) Start(ctx context.Context) error {
	if n.patroni != nil && n.patroni.running() {
		return fmt.Errorf("patroni: node %s is already running", n.Name)
	}
	p, err := startProcess(n.argv, n.attr, n.dir, n.logPath())
	if err != nil {
		return err
	}
	n.patroni = p
	for {
		if _, ok := get(ctx, n.api("/liveness")); ok {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("patroni: node %s exited at start-up:\n%s", n.Name, n.Log())
		}
		if err := wait(ctx, "the REST API of node "+n.Name); err != nil {
			return err
		}
	}
}

// Kill ends the node as the loss of its machine would: SIGKILL to its Patroni, then to its
// postmaster and every process of the postmaster's group (backends, WAL writer, walsenders),
// so nothing is flushed, sent to a standby or handed over. The leader key it held lives until
// its ttl runs out; then Patroni promotes the synchronous standby. It returns once both are
// gone. The data stays for Start.
func (n *Node) Kill() {
	if n.patroni != nil {
		n.patroni.kill()
	}
	killPostmaster(n.data)
}

// killPostmaster SIGKILLs the process group of the postmaster whose pid data's postmaster.pid
// holds, and waits (up to 10s) until the postmaster is gone. Patroni starts the postmaster in
// a session of its own, so the group holds Postgres's processes only.
func killPostmaster(data string) {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 1 {
		return
	}
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			return
		}
	}
}

// IsPrimary reports whether the node is the primary taking writes: its REST API says so (GET
// /primary answers 200, which it does as soon as it holds the leader key) and its Postgres has
// left recovery.
func (n *Node) IsPrimary(ctx context.Context) bool {
	if _, ok := get(ctx, n.api("/primary")); !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		return false
	}
	defer c.Close(context.Background())
	var recovering bool
	return c.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering) == nil && !recovering
}

// IsSync reports whether the node's REST API says it is a synchronous standby
// (GET /sync answers 200).
func (n *Node) IsSync(ctx context.Context) bool {
	_, ok := get(ctx, n.api("/sync"))
	return ok
}

// Log returns what the node's Patroni and its Postgres have written so far (its last 32 KiB).
func (n *Node) Log() string { return readTail(n.logPath()) }

func (n *Node) logPath() string { return filepath.Join(n.dir, n.Name+".log") }

func (n *Node) api(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", n.APIPort, path) }

// Primary returns the node that answers as the primary now, or an error when none does.
func (c *Cluster) Primary(ctx context.Context) (*Node, error) {
	for _, n := range c.Nodes {
		if n.IsPrimary(ctx) {
			return n, nil
		}
	}
	return nil, fmt.Errorf("patroni: no node of %s answers as the primary", c.Scope)
}

// WaitPrimary waits until a node other than not (nil: any node) answers as the primary, and
// returns it. It gives up when ctx ends.
func (c *Cluster) WaitPrimary(ctx context.Context, not *Node) (*Node, error) {
	for {
		for _, n := range c.Nodes {
			if n != not && n.IsPrimary(ctx) {
				return n, nil
			}
		}
		if err := wait(ctx, "a primary of "+c.Scope); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, c.Log())
		}
	}
}

// WaitSync waits until a node answers as a synchronous standby, and returns it. It gives up
// when ctx ends.
func (c *Cluster) WaitSync(ctx context.Context) (*Node, error) {
	for {
		for _, n := range c.Nodes {
			if n.IsSync(ctx) {
				return n, nil
			}
		}
		if err := wait(ctx, "a synchronous standby of "+c.Scope); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, c.Log())
		}
	}
}

// URL connects as Node.URL does, naming every node's Postgres with
// target_session_attrs=read-write: pgx tries the hosts in order and keeps the first that takes
// writes, as an application behind Patroni would connect.
func (c *Cluster) URL() string {
	hosts := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", n.Port)
	}
	return "postgres://oncekey@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}

// Log returns the last lines of etcd's log and of every node's.
func (c *Cluster) Log() string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- etcd\n%s", readTail(filepath.Join(c.dir, "etcd.log")))
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "--- node %s (postgres port %d, api port %d)\n%s", n.Name, n.Port, n.APIPort, n.Log())
	}
	return b.String()
}

// Close stops every node (SIGTERM: Patroni shuts its Postgres down; SIGKILL after 30s), then
// etcd, and removes the cluster's directory.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n.patroni != nil {
				n.patroni.stop(syscall.SIGTERM)
			}
			killPostmaster(n.data)
		}()
	}
	wg.Wait()
	if c.etcd != nil {
		c.etcd.stop(syscall.SIGTERM)
	}
	os.RemoveAll(c.dir)
}

// process is a child process in a process group of its own.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// stopWait is how long stop waits before it kills.
const stopWait = 30 * time.Second

func startProcess(argv []string, attr *syscall.SysProcAttr, dir, logPath string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("patroni: %w", err)
	}
	defer logf.Close() // the child writes to its own copy of the descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr, cmd.Dir = attr, dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("patroni: start %s: %w", filepath.Base(argv[0]), err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill SIGKILLs the process's group and waits for the process to exit.
func (p *process) kill() {
	if !p.running() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop sends sig and waits up to stopWait for the process to exit, then kills it.
func (p *process) stop(sig syscall.Signal) {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(stopWait):
		p.kill()
	}
}

// httpClient asks the REST APIs and etcd; a look that takes longer than a second counts as no.
var httpClient = &http.Client{Timeout: time.Second}

// get returns the body of url and whether it answered 200.
func get(ctx context.Context, url string) (string, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", false
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return string(b), resp.StatusCode == http.StatusOK
}

// wait sleeps between two looks, or returns an error naming what was awaited when ctx ends.
func wait(ctx context.Context, what string) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("patroni: waiting for %s: %w", what, ctx.Err())
	case <-time.After(100 * time.Millisecond):
		return nil
	}
}

// readTail returns the last 32 KiB of the file at path.
func readTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 32<<10 {
		b = b[len(b)-32<<10:]
	}
	return string(b)
}
