package faults_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/faults"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
)

var (
	flagReport      = flag.String("faults.report", "", "append each scenario's result as a JSON line to this file")
	flagSoakOps     = flag.Int("faults.soak-ops", 200, "operations in the soak (make faults runs 20000)")
	flagSoakWorkers = flag.Int("faults.soak-workers", 4, "worker processes in the soak")
	flagSoakKill    = flag.Duration("faults.soak-kill-every", 5*time.Second, "how often the soak SIGKILLs a worker and starts a fresh one (make faults: 20s)")
	flagSoakBudget  = flag.Duration("faults.soak-budget", 12*time.Minute, "how long the soak may take before it fails")
	flagFailoverOps = flag.Int("faults.failover-ops", 100, "operations in each failover scenario's soak (pg_failover_sync, pg_failover_patroni, pg_failover_async, temporal_restart; make faults runs 1000)")
	flagLinDuration = flag.Duration("faults.lin-duration", 30*time.Second, "how long the linearizability scenario records histories")
	flagPGRestart   = flag.Bool("faults.pg-restart", true, "run the Postgres restart scenario (on a private Postgres instance it starts; false leaves it out)")
	flagOut         = flag.String("faults.out", "", "directory for artifacts such as non-linearizable histories (default: a new directory under the system temp dir)")
)

var (
	resultsMu sync.Mutex
	results   = map[string]faults.Result{}
)

func TestMain(m *testing.M) {
	code := testenv.Run(m)
	resultsMu.Lock()
	n := len(results)
	resultsMu.Unlock()
	if n > 0 && testing.Verbose() {
		faults.WriteReport(os.Stdout, results)
	}
	if bins.dir != "" {
		_ = os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

func record(r faults.Result) {
	resultsMu.Lock()
	results[r.Scenario] = r
	resultsMu.Unlock()
	if *flagReport != "" {
		if err := faults.AppendResult(*flagReport, r); err != nil {
			fmt.Fprintf(os.Stderr, "faults: write report: %v\n", err)
		}
	}
}

// env is one scenario's world: its own Postgres schema, downstream and task queue, on the
// shared dev server.
type env struct {
	t        *testing.T
	start    time.Time
	c        client.Client
	hostPort string
	dbURL    string
	pool     *pgxpool.Pool
	store    *pgstore.Store
	ds       *faults.Downstream
	tq       string
	res      faults.Result
	audited  bool

	mu        sync.Mutex
	workflows []string
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newEnv(t *testing.T, scenario string) *env {
	t.Helper()
	return newEnvOn(t, scenario, "")
}

// newEnvOn is newEnv with the scenario's schema in the database base names ("": the test
// database, testenv.DatabaseURL).
func newEnvOn(t *testing.T, scenario, base string) *env {
	t.Helper()
	t.Cleanup(func() {
		if t.Skipped() {
			record(faults.Result{Scenario: scenario, Skipped: true})
		}
	})
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	e := &env{t: t, start: time.Now(), res: faults.Result{Scenario: scenario}}
	if base == "" {
		base = testenv.DatabaseURL()
	}
	e.dbURL, _ = testenv.SchemaIn(t, base)
	cfg, err := pgxpool.ParseConfig(e.dbURL)
	require.NoError(t, err)
	pgstore.ConfigurePool(cfg, nil)
	e.pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(e.pool.Close)
	require.NoError(t, pgstore.Migrate(context.Background(), e.pool))
	e.store = pgstore.New(e.pool, nil)
	e.hostPort = testenv.TemporalHostPort(t)
	e.c = testenv.Temporal(t)
	e.ds, err = faults.NewDownstream()
	require.NoError(t, err)
	t.Cleanup(e.ds.Close)
	e.tq = "faults-" + scenario + "-" + randHex(4)
	t.Cleanup(e.finish)
	return e
}

// finish records the scenario's result; a scenario that did not audit is audited here so the
// table shows what it left behind.
func (e *env) finish() {
	if e.t.Skipped() {
		return
	}
	if !e.audited {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		a := e.audit(ctx)
		cancel()
		e.fill(a)
	}
	e.res.Passed = !e.t.Failed()
	e.res.Seconds = time.Since(e.start).Seconds()
	record(e.res)
}

func (e *env) note(format string, args ...any) {
	e.res.Note = fmt.Sprintf(format, args...)
	e.t.Log(e.res.Note)
}

func (e *env) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *env) config(name string, hooks bool, queues ...string) faults.WorkerConfig {
	if len(queues) == 0 {
		queues = []string{e.tq}
	}
	return faults.WorkerConfig{
		Name: name, TemporalAddress: e.hostPort, DatabaseURL: e.dbURL, Downstream: e.ds.URL(),
		TaskQueues: queues, Lease: 2 * time.Second, Hooks: hooks,
	}
}

// inProcess starts a worker in the test process.
func (e *env) inProcess(name string, hooks bool, queues ...string) *faults.Worker {
	e.t.Helper()
	w, err := faults.StartWorker(e.ctx(time.Minute), e.config(name, hooks, queues...))
	require.NoError(e.t, err)
	e.t.Cleanup(w.Stop)
	return w
}

func (e *env) wfID(id string) string { return e.tq + "/" + id }

func (e *env) startWorkflow(id, name string, in any) client.WorkflowRun {
	e.t.Helper()
	run, err := e.c.ExecuteWorkflow(e.ctx(time.Minute), client.StartWorkflowOptions{
		ID: e.wfID(id), TaskQueue: e.tq, WorkflowExecutionTimeout: 30 * time.Minute,
	}, name, in)
	require.NoError(e.t, err)
	e.mu.Lock()
	e.workflows = append(e.workflows, run.GetID())
	e.mu.Unlock()
	return run
}

func (e *env) startCalls(id string, in faults.CallsInput) client.WorkflowRun {
	if in.StartToClose == 0 {
		in.StartToClose = 10 * time.Second
	}
	return e.startWorkflow(id, faults.WorkflowCalls, in)
}

// calls waits for a Calls workflow's answers.
func (e *env) calls(run client.WorkflowRun) []faults.CallResult {
	e.t.Helper()
	var out []faults.CallResult
	require.NoError(e.t, run.Get(e.ctx(5*time.Minute), &out), "workflow %s", run.GetID())
	return out
}

func (e *env) signal(id string) {
	e.t.Helper()
	require.NoError(e.t, e.c.SignalWorkflow(e.ctx(time.Minute), e.wfID(id), "", faults.SignalContinue, nil))
}

// key derives the operation key of step in workflow id, as the interceptor does (default
// tenant: the namespace).
func (e *env) key(id, step string) string {
	e.t.Helper()
	k, err := oncekey.Key(oncekey.Policy{}, oncekey.Operation{Namespace: "default", Tenant: "default", WorkflowID: e.wfID(id), StepID: step})
	require.NoError(e.t, err)
	return k
}

func (e *env) get(key string) *oncekeystore.Record {
	e.t.Helper()
	rec, err := e.store.Get(e.ctx(time.Minute), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(e.t, err)
	return rec
}

func (e *env) waitHit(h *faults.Hold) faults.Hit {
	e.t.Helper()
	select {
	case hit := <-h.Hit:
		return hit
	case <-time.After(3 * time.Minute):
		e.t.Fatal("nobody arrived at the armed point")
	}
	return faults.Hit{}
}

// waitReconciling waits until the reconciliation workflow of key waits for a person.
func (e *env) waitReconciling(key string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := reconcile.Status(ctx, e.c, key)
		return err == nil && st.State == reconcile.StateWaiting
	}, 3*time.Minute, 200*time.Millisecond, "no reconciliation came to wait for a person on %s", key)
}

func (e *env) waitEvents(n int, what string, match func(faults.WorkerEvent) bool) {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return e.ds.CountEvents(match) >= n }, 3*time.Minute, 50*time.Millisecond,
		"fewer than %d %s events", n, what)
}

func outcome(tool string, o oncekey.Outcome) func(faults.WorkerEvent) bool {
	return func(ev faults.WorkerEvent) bool { return ev.Tool == tool && ev.Outcome == string(o) }
}

// decide is what an operator decides for an unknown operation after looking in the
// downstream's ledger by operation key, for the record's epoch.
func (e *env) decide(key string, epoch int64) reconcile.Resolution {
	if rec, ok := e.ds.Lookup(key); ok {
		b, _ := json.Marshal(rec)
		return reconcile.Resolution{Epoch: epoch, Outcome: reconcile.Applied, EffectReference: rec.ID, Result: b,
			ResolvedBy: "faults-operator", Note: "found in the downstream ledger"}
	}
	return reconcile.Resolution{Epoch: epoch, Outcome: reconcile.NotApplied, ResolvedBy: "faults-operator", Note: "no effect in the downstream ledger"}
}

// resolveCLI resolves key with the operator CLI, as a person would, deciding from the ledger.
func (e *env) resolveCLI(key string) reconcile.Resolution {
	e.t.Helper()
	_, cli := binaries(e.t)
	r := e.decide(key, e.get(key).Epoch)
	args := []string{"resolve", key, "--tenant", "default", "--epoch", strconv.FormatInt(r.Epoch, 10), "--address", e.hostPort, "--by", r.ResolvedBy, "--note", r.Note}
	if r.Outcome == reconcile.Applied {
		args = append(args, "--applied", "--ref", r.EffectReference, "--result", string(r.Result))
	} else {
		args = append(args, "--not-applied")
	}
	out, err := exec.Command(cli, args...).CombinedOutput()
	require.NoError(e.t, err, "oncekey %s: %s", strings.Join(args, " "), out)
	e.t.Logf("oncekey resolve: %s", bytes.TrimSpace(out))
	return r
}

// operator resolves, until ctx ends, every unknown operation whose reconciliation waits for a
// person, deciding from the downstream's ledger (and leaving alone a key the downstream is
// still handling a request for).
type operator struct {
	applied, notApplied atomic.Int64
}

func (e *env) runOperator(ctx context.Context) *operator {
	op := &operator{}
	go func() {
		for ctx.Err() == nil {
			for _, rec := range e.list(ctx, oncekeystore.StatusUnknown) {
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				st, err := reconcile.Status(sctx, e.c, rec.OperationKey)
				cancel()
				if err != nil || st.State != reconcile.StateWaiting || e.ds.InFlight(rec.OperationKey) > 0 {
					continue
				}
				r := e.decide(rec.OperationKey, rec.Epoch)
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err = reconcile.Resolve(rctx, e.c, "default", rec.OperationKey, r)
				cancel()
				// Unconfirmed: delivered, and handled once a worker runs the workflow again.
				if err == nil || errors.Is(err, reconcile.ErrUnconfirmed) {
					if r.Outcome == reconcile.Applied {
						op.applied.Add(1)
					} else {
						op.notApplied.Add(1)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	return op
}

// list returns every record with status (all records for ""); errors give what was read.
func (e *env) list(ctx context.Context, status oncekeystore.Status) []*oncekeystore.Record {
	var out []*oncekeystore.Record
	p := oncekeystore.ListParams{Status: status, Limit: 1000}
	for {
		res, err := e.store.List(ctx, &p)
		if err != nil {
			return out
		}
		out = append(out, res.Records...)
		if res.Next == "" {
			return out
		}
		p.Cursor = res.Next
	}
}

type auditResult struct {
	effects, double, lost, stuck int
	problems                     []string
}

func (a *auditResult) problem(format string, args ...any) {
	a.problems = append(a.problems, fmt.Sprintf(format, args...))
}

// audit compares the downstream's ledger with the store and Temporal: effects beyond the first
// under one key are double; an effect no record accounts for (or an applied record without an
// effect) is lost; a pending record with neither a live lease nor a running reconciliation, an
// unknown record without one, and a workflow still running are stuck.
func (e *env) audit(ctx context.Context) auditResult {
	var a auditResult
	ledger := e.ds.EffectsByKey()
	e.addCredits(ctx, ledger, &a)
	for k, n := range ledger {
		a.effects += n
		if n > 1 {
			a.double += n - 1
			a.problem("key %.16s has %d effects", k, n)
		}
	}
	reconciling := func(key string) bool {
		d, err := e.c.DescribeWorkflow(ctx, reconcile.WorkflowID(key), "")
		return err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}
	seen := map[string]bool{}
	for _, rec := range e.list(ctx, "") {
		seen[rec.OperationKey] = true
		n := ledger[rec.OperationKey]
		switch rec.Status {
		case oncekeystore.StatusApplied:
			if n == 0 {
				a.lost++
				a.problem("key %.16s is applied but the downstream has no effect", rec.OperationKey)
			}
		case oncekeystore.StatusReleased, oncekeystore.StatusFailed:
			if n > 0 {
				a.lost++
				a.problem("key %.16s is %s but the downstream has %d effects", rec.OperationKey, rec.Status, n)
			}
		case oncekeystore.StatusPending:
			if rec.LeaseExpired && !reconciling(rec.OperationKey) {
				a.stuck++
				a.problem("key %.16s is pending with an expired lease and no reconciliation", rec.OperationKey)
			}
		case oncekeystore.StatusUnknown:
			if !reconciling(rec.OperationKey) {
				a.stuck++
				a.problem("key %.16s is unknown with no reconciliation running", rec.OperationKey)
			}
		}
	}
	for k, n := range ledger {
		if !seen[k] {
			a.lost += n
			a.problem("key %.16s has %d effects and no record", k, n)
		}
	}
	e.mu.Lock()
	ids := append([]string(nil), e.workflows...)
	e.mu.Unlock()
	for _, id := range ids {
		d, err := e.c.DescribeWorkflow(ctx, id, "")
		if err != nil {
			a.problem("describe %s: %v", id, err)
			continue
		}
		if d.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			a.stuck++
			a.problem("workflow %s is still running", id)
		}
	}
	return a
}

// addCredits adds to ledger the effects of the Transactional tool (faults.ToolCredit): its rows
// in faults.CreditsTable, when the scenario created the table.
func (e *env) addCredits(ctx context.Context, ledger map[string]int, a *auditResult) {
	var exists bool
	if err := e.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, faults.CreditsTable).Scan(&exists); err != nil {
		a.problem("look for %s: %v", faults.CreditsTable, err)
		return
	}
	if !exists {
		return
	}
	rows, err := e.pool.Query(ctx, `SELECT op_key, count(*) FROM `+faults.CreditsTable+` GROUP BY op_key`)
	if err != nil {
		a.problem("count %s: %v", faults.CreditsTable, err)
		return
	}
	var key string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&key, &n}, func() error { ledger[key] += n; return nil })
	if err != nil {
		a.problem("count %s: %v", faults.CreditsTable, err)
	}
}

// auditTimeout is how long the audit of ops operations may take: it reads every record and
// describes every workflow (a 20,000-operation soak has 5,000), so 2 minutes plus 10ms an
// operation.
func auditTimeout(ops int) time.Duration {
	return 2*time.Minute + time.Duration(ops)*10*time.Millisecond
}

func (e *env) fill(a auditResult) {
	e.res.Effects, e.res.DoubleEffects, e.res.Lost, e.res.Stuck = a.effects, a.double, a.lost, a.stuck
}

// check audits the scenario and requires ops intended operations, effects downstream effects,
// and nothing double, lost or stuck.
func (e *env) check(ops, effects int) {
	e.t.Helper()
	a := e.audit(e.ctx(auditTimeout(ops)))
	e.fill(a)
	e.res.Operations = ops
	e.audited = true
	require.Empty(e.t, a.problems)
	require.Equal(e.t, effects, a.effects, "downstream effects")
}

// binaries builds the worker and the operator CLI once per test binary.
var bins struct {
	once             sync.Once
	dir, worker, cli string
	err              error
}

func binaries(t *testing.T) (worker, cli string) {
	t.Helper()
	bins.once.Do(func() {
		bins.dir, bins.err = os.MkdirTemp("", "oncekey-faults-bin-")
		if bins.err != nil {
			return
		}
		gobin, err := exec.LookPath("go")
		if err != nil {
			bins.err = err
			return
		}
		out, err := exec.Command(gobin, "build", "-o", bins.dir+string(filepath.Separator),
			"github.com/oncekey/oncekey/internal/faults/cmd/worker").CombinedOutput()
		if err != nil {
			bins.err = fmt.Errorf("go build: %v: %s", err, out)
			return
		}
		// The CLI is a module of its own (cmd/oncekey/go.mod), built from its directory.
		out, err = exec.Command(gobin, "build", "-C", filepath.Join("..", "..", "cmd", "oncekey"), "-o", filepath.Join(bins.dir, "oncekey"), ".").CombinedOutput()
		if err != nil {
			bins.err = fmt.Errorf("go build -C ../../cmd/oncekey: %v: %s", err, out)
			return
		}
		bins.worker, bins.cli = filepath.Join(bins.dir, "worker"), filepath.Join(bins.dir, "oncekey")
	})
	require.NoError(t, bins.err)
	return bins.worker, bins.cli
}

// child is a worker running as a process of its own.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	out  *tailBuffer
}

// readyWriter signals ready when the child prints its ready line.
type readyWriter struct {
	once  sync.Once
	ready chan struct{}
	tail  *tailBuffer
}

func (w *readyWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("ready")) {
		w.once.Do(func() { close(w.ready) })
	}
	return w.tail.Write(p)
}

// tailBuffer keeps the last 16 KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 16<<10 {
		t.b = t.b[len(t.b)-16<<10:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// child starts a worker process and waits until it polls.
func (e *env) child(name string, hooks bool, queues ...string) *child {
	e.t.Helper()
	c, err := e.spawn(name, hooks, queues...)
	require.NoError(e.t, err)
	return c
}

// spawn is child without failing the test, for use from other goroutines.
func (e *env) spawn(name string, hooks bool, queues ...string) (*child, error) {
	bin, _ := binaries(e.t)
	c := &child{name: name, done: make(chan struct{}), out: &tailBuffer{}}
	rw := &readyWriter{ready: make(chan struct{}), tail: c.out}
	c.cmd = exec.Command(bin)
	c.cmd.Env = append(os.Environ(), e.config(name, hooks, queues...).Env()...)
	c.cmd.Stdout = rw
	c.cmd.Stderr = c.out
	dieWithParent(c.cmd)
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = c.cmd.Wait()
		close(c.done)
	}()
	e.t.Cleanup(c.kill)
	select {
	case <-rw.ready:
		return c, nil
	case <-c.done:
		return nil, fmt.Errorf("worker %s exited before it was ready: %s", name, c.out)
	case <-time.After(2 * time.Minute):
		c.kill()
		return nil, fmt.Errorf("worker %s not ready after 2m: %s", name, c.out)
	}
}

// kill SIGKILLs the process and waits for it to be gone.
func (c *child) kill() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

func (c *child) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// isStoreUnavailable matches an error type the interceptor reports when it failed closed.
func isStoreUnavailable(ev faults.WorkerEvent) bool {
	return ev.ErrType == oncekey.ErrTypeStoreUnavailable
}
