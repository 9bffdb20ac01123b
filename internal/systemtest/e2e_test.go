package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/internal/workflows"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// ledger is a fake downstream ticket service the test owns. It counts its own effects, apart
// from anything the executor reports, and the tool bodies that ran.
type ledger struct {
	mu      sync.Mutex
	effects int
	bodies  int
	byKey   map[string]Ticket // tickets by the idempotency key they were created with
	faults  []string          // consumed one per body run
	dedupe  bool              // deduplicate by idempotency key (a Stripe-style downstream)
	gate    chan struct{}     // faultGate waits for it to close
	// onCommit, if set, is called after each effect (outside the lock).
	onCommit func()
	// interrupted holds context.Cause of each body that heartbeated until its context ended.
	interrupted []error
	// lostText, if set, is the error faultLostAfterCommit returns instead of a connection reset.
	lostText string
	// body, if set, is the tool's body in place of the faults (counted in bodies).
	body func(context.Context, TicketRequest) (Ticket, error)
}

const (
	faultLostAfterCommit = "lost-after-commit"   // commit, then the response is lost
	faultHangAfterCommit = "hang-after-commit"   // commit, then hang past start-to-close
	faultErrBeforeCommit = "error-before-commit" // fail before committing, with a plain error
	faultNotApplied      = "not-applied"         // refuse before committing, saying so
	faultGate            = "gate"                // wait for the gate to open, then commit
	// A long body that heartbeats (so that `temporal activity pause` reaches it), interrupted
	// before it sends its request downstream, or after the downstream committed (pause_test.go).
	faultHeartbeatBeforeCommit = "heartbeat-before-commit"
	faultHeartbeatAfterCommit  = "heartbeat-after-commit"
	// A long body that never heartbeats and waits for its context to end before it sends its
	// request downstream (oncekey's heartbeats bring it the pause); one that heartbeats its
	// progress once, then waits for the gate and commits.
	faultWaitBeforeCommit   = "wait-before-commit"
	faultProgressBeforeGate = "progress-before-gate"
	// A body that heartbeats its progress and then fails before committing (an Idempotent tool's
	// next attempt starts with that progress as its heartbeat details).
	faultProgressThenFail = "progress-then-fail"
)

type TicketRequest struct {
	Customer  string `json:"customer"`
	Subject   string `json:"subject"`
	RequestID string `json:"request_id"`
}

type Ticket struct {
	ID      string `json:"id"`
	Subject string `json:"subject"`
	Seq     int    `json:"seq"`
}

func newLedger(faults ...string) *ledger {
	return &ledger{byKey: map[string]Ticket{}, faults: faults, gate: make(chan struct{})}
}

func (l *ledger) counts() (effects, bodies int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.effects, l.bodies
}

func (l *ledger) commit(key string, in TicketRequest) Ticket {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dedupe {
		if t, ok := l.byKey[key]; ok {
			return t
		}
	}
	l.effects++
	t := Ticket{ID: fmt.Sprintf("T-%d", l.effects), Subject: in.Subject, Seq: l.effects}
	l.byKey[key] = t
	if f := l.onCommit; f != nil {
		l.mu.Unlock()
		f()
		l.mu.Lock()
	}
	return t
}

// lookup is the downstream's receipt endpoint: the ticket created under key, if any.
func (l *ledger) lookup(key string) (Ticket, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.byKey[key]
	return t, ok
}

func (l *ledger) fault() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bodies++
	if len(l.faults) == 0 {
		return ""
	}
	f := l.faults[0]
	l.faults = l.faults[1:]
	return f
}

// CreateTicket is the tool under test. It passes its operation key downstream.
func (l *ledger) CreateTicket(ctx context.Context, in TicketRequest) (Ticket, error) {
	key, ok := oncekey.OperationKey(ctx)
	if !ok {
		return Ticket{}, errors.New("no operation key in the tool's context")
	}
	if l.body != nil {
		l.fault()
		return l.body(ctx, in)
	}
	switch l.fault() {
	case faultLostAfterCommit:
		l.commit(key, in)
		if l.lostText != "" {
			return Ticket{}, errors.New(l.lostText)
		}
		return Ticket{}, errors.New("read tcp 127.0.0.1:51234: connection reset by peer")
	case faultHangAfterCommit:
		l.commit(key, in)
		<-ctx.Done()
		return Ticket{}, ctx.Err()
	case faultLateResult:
		t := l.commit(key, in)
		<-ctx.Done()
		return t, nil
	case faultErrBeforeCommit:
		return Ticket{}, errors.New("dial tcp 127.0.0.1:9: connection refused")
	case faultNotApplied:
		return Ticket{}, oncekey.NotApplied(errors.New("503 Service Unavailable: request refused"))
	case faultHeartbeatBeforeCommit:
		return Ticket{}, oncekey.NotApplied(fmt.Errorf("interrupted before the request was sent: %w", l.heartbeatUntilDone(ctx)))
	case faultHeartbeatAfterCommit:
		l.commit(key, in)
		return Ticket{}, fmt.Errorf("interrupted after the request was sent: %w", l.heartbeatUntilDone(ctx))
	case faultWaitBeforeCommit:
		<-ctx.Done()
		return Ticket{}, oncekey.NotApplied(fmt.Errorf("interrupted before the request was sent: %w", l.interruptedBy(ctx)))
	case faultProgressThenFail:
		activity.RecordHeartbeat(ctx, bodyProgress)
		return Ticket{}, errors.New("dial tcp 127.0.0.1:9: connection refused")
	case faultProgressBeforeGate:
		activity.RecordHeartbeat(ctx, bodyProgress)
		select {
		case <-l.gate:
		case <-ctx.Done():
			return Ticket{}, oncekey.NotApplied(ctx.Err())
		}
	case faultGate:
		select {
		case <-l.gate:
		case <-ctx.Done():
			return Ticket{}, ctx.Err()
		}
	}
	return l.commit(key, in), nil
}

// CallOptions shape the activity call TicketWorkflow makes.
type CallOptions struct {
	StartToClose time.Duration
	Heartbeat    time.Duration
	// NoStepID schedules the call without WithStepID (the step is "<runID>/<activityID>").
	NoStepID bool
}

// TicketWorkflow creates one ticket at step "create_ticket".
func TicketWorkflow(ctx workflow.Context, in TicketRequest, o CallOptions) (Ticket, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: o.StartToClose,
		HeartbeatTimeout:    o.Heartbeat,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second},
	})
	if !o.NoStepID {
		ctx = oncekey.WithStepID(ctx, "create_ticket")
	}
	var t Ticket
	err := workflow.ExecuteActivity(ctx, "CreateTicket", in).Get(ctx, &t)
	return t, err
}

type e2e struct {
	c      client.Client
	store  oncekeystore.Store
	tq     string
	l      *ledger
	plugin *temporal.SimplePlugin
	w      sdkworker.Worker
	// effect is the tool's effect class, recorded with its histories.
	effect oncekey.Effect

	mu     sync.Mutex
	events []worker.Event
	// pausedActivity is the activity ID pauseRunningActivity paused.
	pausedActivity string
	// register, if set, registers more on every worker startWorkerWith starts.
	register func(sdkworker.Worker)
}

// setupE2E starts a worker on the dev server with the plugin on its client and Postgres as the
// store. wrap, if given, wraps the store the plugin uses (fault injection at one exact point).
func setupE2E(t *testing.T, l *ledger, p oncekey.Policy, wrap ...func(oncekeystore.Store) oncekeystore.Store) *e2e {
	t.Helper()
	return setupE2EWith(t, l, p, nil, wrap...)
}

// setupE2EWith is setupE2E with configure, if not nil, changing the interceptor's options.
func setupE2EWith(t *testing.T, l *ledger, p oncekey.Policy, configure func(*worker.Options), wrap ...func(oncekeystore.Store) oncekeystore.Store) *e2e {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	t.Parallel()
	return setupE2EOn(t, testenv.TemporalHostPort(t), l, p, configure, wrap...)
}

// setupE2EOn is setupE2EWith on the Temporal frontend at hostPort (namespace "default").
func setupE2EOn(t *testing.T, hostPort string, l *ledger, p oncekey.Policy, configure func(*worker.Options), wrap ...func(oncekeystore.Store) oncekeystore.Store) *e2e {
	t.Helper()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	var store oncekeystore.Store = pgstore.New(pool, nil)
	e := &e2e{store: store, l: l, effect: p.Effect}
	for _, w := range wrap {
		store = w(store)
	}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(l.CreateTicket, p))
	opts := worker.Options{Store: store, Registry: reg, OnEvent: func(ev worker.Event) {
		e.mu.Lock()
		e.events = append(e.events, ev)
		e.mu.Unlock()
	}}
	if configure != nil {
		configure(&opts)
	}
	plugin, err := worker.NewPlugin(opts)
	require.NoError(t, err)
	c, err := client.Dial(client.Options{
		HostPort:  hostPort,
		Namespace: "default",
		Logger:    quiet{},
		Plugins:   []client.Plugin{plugin},
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := "oncekey-e2e-" + t.Name()
	e.c, e.tq, e.plugin = c, tq, plugin
	e.startWorker(t)
	return e
}

// awaiting reports whether workflow id has an await activity pending: one of its calls waits on
// a reconciliation or approval workflow another call started.
func (e *e2e) awaiting(id string) bool {
	d, err := e.c.DescribeWorkflow(context.Background(), id, "")
	if err != nil {
		return false
	}
	for _, a := range d.RawResponse.GetPendingActivities() {
		if a.GetActivityType().GetName() == activities.AwaitReconciliationName {
			return true
		}
	}
	return false
}

// startWorker starts a worker on e's task queue with the test's workflows and tool.
func (e *e2e) startWorker(t *testing.T) {
	t.Helper()
	e.startWorkerWith(t, sdkworker.Options{})
}

// startWorkerWith is startWorker with the worker options o.
func (e *e2e) startWorkerWith(t *testing.T, o sdkworker.Options) {
	t.Helper()
	w := sdkworker.New(e.c, e.tq, o)
	registerWorkflows(w)
	w.RegisterActivity(e.l.CreateTicket)
	if e.register != nil {
		e.register(w)
	}
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	e.w = w
}

// registerWorkflows registers the workflows the end-to-end tests run (and their replays replay).
func registerWorkflows(r interface{ RegisterWorkflow(any) }) {
	r.RegisterWorkflow(TicketWorkflow)
	r.RegisterWorkflow(AgentTicketWorkflow)
	r.RegisterWorkflow(TwoArgsWorkflow)
	r.RegisterWorkflow(SameStepOtherArgumentsWorkflow)
	r.RegisterWorkflow(LabelledTicketWorkflow)
	r.RegisterWorkflow(ExpenseWorkflow)
	r.RegisterWorkflow(ExpenseAskedTwiceWorkflow)
	r.RegisterWorkflow(NexusTicketWorkflow)
}

// outcomes returns the outcome labels of the claimed calls so far.
func (e *e2e) outcomes() []oncekey.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []oncekey.Outcome
	for _, ev := range e.events {
		out = append(out, ev.Outcome)
	}
	return out
}

func (e *e2e) history(t *testing.T, id string) *historypb.History {
	t.Helper()
	h := &historypb.History{}
	it := e.c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	require.NotEmpty(t, h.Events)
	return h
}

// replay replays the recorded histories of the workflows ids with the SDK's workflow replayer,
// oncekey installed through the same plugin (or, with plugin false, without oncekey).
func (e *e2e) replay(t *testing.T, plugin bool, ids ...string) error {
	t.Helper()
	var opts sdkworker.WorkflowReplayerOptions
	if plugin {
		opts.Plugins = []sdkworker.Plugin{e.plugin}
	} else {
		// Without oncekey the reconciliation workflow is not registered either; register it so
		// only the interceptor's absence can make replay fail.
		opts.Plugins = nil
	}
	r, err := sdkworker.NewWorkflowReplayerWithOptions(opts)
	require.NoError(t, err)
	registerWorkflows(r)
	if !plugin {
		workflows.Register(r)
	}
	for _, id := range ids {
		// Replay from the history alone, as a replay test in CI does: under the replayer's own
		// namespace and workflow ID, which the workflow side must not derive anything from that
		// is not in the history. Then against the real namespace and execution.
		h := e.history(t, id)
		if plugin {
			e.record(t, id, h)
		}
		if err := r.ReplayWorkflowHistory(quiet{}, h); err != nil {
			return fmt.Errorf("replay %s from its history: %w", id, err)
		}
		if err := r.ReplayWorkflowExecution(context.Background(), e.c.WorkflowService(), quiet{}, "default", workflow.Execution{ID: id}); err != nil {
			return fmt.Errorf("replay %s: %w", id, err)
		}
	}
	return nil
}

func (e *e2e) start(t *testing.T, id string, in TicketRequest, startToClose time.Duration) client.WorkflowRun {
	t.Helper()
	return e.startWith(t, id, in, CallOptions{StartToClose: startToClose})
}

func (e *e2e) startWith(t *testing.T, id string, in TicketRequest, o CallOptions) client.WorkflowRun {
	t.Helper()
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: id, TaskQueue: e.tq, WorkflowExecutionTimeout: 2 * time.Minute,
	}, TicketWorkflow, in, o)
	require.NoError(t, err)
	return run
}

// waitingKey waits until exactly one operation is unknown and its reconciliation workflow waits
// for a person, and returns its key.
func (e *e2e) waitingKey(t *testing.T) string {
	t.Helper()
	var key string
	require.Eventually(t, func() bool {
		res, err := reconcile.List(context.Background(), e.store, oncekeystore.ListParams{})
		if err != nil || len(res.Records) != 1 {
			return false
		}
		key = res.Records[0].OperationKey
		st, err := reconcile.Status(context.Background(), e.c, key)
		return err == nil && st.State == reconcile.StateWaiting
	}, 30*time.Second, 100*time.Millisecond, "no reconciliation came to wait for a person")
	return key
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var req = TicketRequest{Customer: "acme", Subject: "printer on fire", RequestID: "r-1"}

// The downstream commits, then the tool's response is lost. The tool is Effectful; the policy's
// Reconcile hook asks the downstream for a receipt by operation key, so reconciliation finds the
// original ticket: no second effect, and the workflow gets the original result.
func TestE2EResponseLostAfterCommitReceipt(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{
		Effect: oncekey.Effectful,
		Reconcile: func(ctx context.Context, r oncekey.ReconcileRequest) (oncekey.Receipt, error) {
			if t, ok := l.lookup(r.OperationKey); ok {
				return oncekey.Receipt{Outcome: oncekey.ReceiptApplied, Result: t, EffectReference: t.ID}, nil
			}
			return oncekey.Receipt{Outcome: oncekey.ReceiptNotFound}, nil
		},
	})
	run := e.start(t, "lost-after-commit-receipt", req, 10*time.Second)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	effects, bodies := l.counts()
	require.Equal(t, 1, effects, "the downstream saw one effect")
	require.Equal(t, 1, bodies)
	first := onlyTicket(t, l)
	require.Equal(t, first, got, "the workflow received the original result")
	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	require.Equal(t, oncekeystore.StatusApplied, res.Records[0].Status)
	require.Equal(t, "receipt:CreateTicket", res.Records[0].ResolvedBy)
	require.Equal(t, first.ID, res.Records[0].EffectReference)
	require.NoError(t, e.replay(t, true, "lost-after-commit-receipt", reconcile.WorkflowID(res.Records[0].OperationKey)))
}

// The same loss, for an Idempotent tool whose downstream deduplicates by the operation key the
// tool passes it: Temporal retries, the downstream returns the first ticket, one effect.
func TestE2EResponseLostAfterCommitIdempotent(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	l.dedupe = true
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Idempotent})
	run := e.start(t, "lost-after-commit-idempotent", req, 10*time.Second)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 2, bodies, "the retry ran the body again; the downstream deduplicated it")
	require.Equal(t, onlyTicket(t, l), got)
	require.NoError(t, e.replay(t, true, "lost-after-commit-idempotent"))
}

// The downstream commits and the tool hangs past its start-to-close timeout: the workflow side
// derives the key, the reconciliation finds the receipt, the workflow gets the original result.
func TestE2EStartToCloseTimeoutAfterCommit(t *testing.T) {
	l := newLedger(faultHangAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{
		Effect: oncekey.Effectful,
		Lease:  time.Second,
		Reconcile: func(ctx context.Context, r oncekey.ReconcileRequest) (oncekey.Receipt, error) {
			if t, ok := l.lookup(r.OperationKey); ok {
				return oncekey.Receipt{Outcome: oncekey.ReceiptApplied, Result: t, EffectReference: t.ID}, nil
			}
			return oncekey.Receipt{Outcome: oncekey.ReceiptNotFound}, nil
		},
	})
	run := e.start(t, "timeout-after-commit", req, 2*time.Second)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	require.Equal(t, onlyTicket(t, l), got)
	require.NoError(t, e.replay(t, true, "timeout-after-commit", reconcile.WorkflowID(e.onlyKey(t))))
}

// The same timeout without an explicit step ID: the workflow side derives the key from the run ID
// and the timed-out attempt's activity ID, exactly as the worker did.
func TestE2EStartToCloseTimeoutDefaultStep(t *testing.T) {
	l := newLedger(faultHangAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful, Lease: time.Second, Reconcile: receiptFrom(l)})
	run := e.startWith(t, "timeout-default-step", req, CallOptions{StartToClose: 2 * time.Second, NoStepID: true})
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	require.Equal(t, onlyTicket(t, l), got)
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: e.onlyKey(t)})
	require.NoError(t, err)
	require.Regexp(t, "^"+run.GetRunID()+"/[0-9]+$", rec.StepID)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.NoError(t, e.replay(t, true, "timeout-default-step", reconcile.WorkflowID(rec.OperationKey)))
}

// An Effectful tool fails after its effect; nobody can tell; the reconciliation waits; a person
// resolves Applied with a result, which the workflow receives decoded into its declared type.
func TestE2EResolveApplied(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.start(t, "resolve-applied", req, 10*time.Second)
	key := e.waitingKey(t)
	st, err := reconcile.Status(context.Background(), e.c, key)
	require.NoError(t, err)
	require.Equal(t, "CreateTicket", st.Tool)
	require.Equal(t, "create_ticket", st.StepID)
	require.Equal(t, oncekeystore.StatusUnknown, st.RecordStatus)
	require.False(t, st.WaitingSince.IsZero())

	// Invalid resolutions are refused before anything is sent.
	var inv *reconcile.InvalidResolutionError
	require.ErrorAs(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: "maybe"}), &inv)
	require.ErrorAs(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":`)}), &inv)

	landed, ok := l.lookup(key)
	require.True(t, ok)
	resolved := Ticket{ID: landed.ID, Subject: "printer on fire", Seq: landed.Seq}
	body, _ := json.Marshal(resolved)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Epoch: 1, Outcome: reconcile.Applied, Result: body, EffectReference: landed.ID, ResolvedBy: "alice", Note: "found it in the helpdesk",
	}))
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, resolved, got)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, "alice", rec.ResolvedBy)
	require.Equal(t, landed.ID, rec.EffectReference)

	// The reconciliation is over: another resolution has nobody to go to.
	err = reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied})
	require.ErrorIs(t, err, reconcile.ErrNoReconciliation)
	require.NoError(t, e.replay(t, true, "resolve-applied", reconcile.WorkflowID(key)))
}

// The tool fails before committing but with a plain error, so its outcome is unknown; a person
// says NotApplied; the tool runs exactly once more: two body runs, one effect.
func TestE2EResolveNotApplied(t *testing.T) {
	l := newLedger(faultErrBeforeCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.start(t, "resolve-not-applied", req, 10*time.Second)
	key := e.waitingKey(t)
	effects, bodies := l.counts()
	require.Equal(t, 0, effects)
	require.Equal(t, 1, bodies)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Epoch: 1, Outcome: reconcile.NotApplied, ResolvedBy: "bob", Note: "no ticket in the helpdesk",
	}))
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	effects, bodies = l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 2, bodies, "the tool ran exactly once more")
	landed, _ := l.lookup(key)
	require.Equal(t, landed, got)
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.NoError(t, e.replay(t, true, "resolve-not-applied", reconcile.WorkflowID(key)))
}

// Two workflows blocked on one unknown key (an explicit business key) are both released by one
// resolution.
func TestE2ETwoWorkflowsOneResolution(t *testing.T) {
	req := requestFor(t)
	l := newLedger(faultLostAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{
		Effect: oncekey.Effectful,
		Key: oncekey.ExplicitKey(func(op oncekey.Operation) (string, error) {
			r, ok := op.Args[0].(TicketRequest)
			if !ok {
				return "", fmt.Errorf("unexpected argument %T", op.Args[0])
			}
			return "request:" + r.RequestID, nil
		}),
	})
	first := e.start(t, "two-blocked-a", req, 10*time.Second)
	key := e.waitingKey(t)
	second := e.start(t, "two-blocked-b", req, 10*time.Second)
	// The second workflow's attempt meets the unknown record and waits on the same investigation.
	require.Eventually(t, func() bool { return e.awaiting("two-blocked-b") }, 30*time.Second, 100*time.Millisecond)
	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, _ := json.Marshal(landed)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: body, ResolvedBy: "carol"}))
	for _, run := range []client.WorkflowRun{first, second} {
		var got Ticket
		require.NoError(t, run.Get(testCtx(t), &got))
		require.Equal(t, landed, got)
	}
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies, "the second workflow's attempt met the unknown record and never ran the body")
	require.NoError(t, e.replay(t, true, "two-blocked-a", "two-blocked-b", reconcile.WorkflowID(key)))
}

// onlyTicket returns the one ticket the ledger holds.
func onlyTicket(t *testing.T, l *ledger) Ticket {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Len(t, l.byKey, 1)
	for _, v := range l.byKey {
		return v
	}
	return Ticket{}
}

type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}

// onlyKey returns the operation key of the one record in the store.
func (e *e2e) onlyKey(t *testing.T) string {
	t.Helper()
	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	return res.Records[0].OperationKey
}

func receiptFrom(l *ledger) func(context.Context, oncekey.ReconcileRequest) (oncekey.Receipt, error) {
	return func(ctx context.Context, r oncekey.ReconcileRequest) (oncekey.Receipt, error) {
		if t, ok := l.lookup(r.OperationKey); ok {
			return oncekey.Receipt{Outcome: oncekey.ReceiptApplied, Result: t, EffectReference: t.ID}, nil
		}
		return oncekey.Receipt{Outcome: oncekey.ReceiptNotFound}, nil
	}
}

// The workflow side re-schedules a tool that says NotApplied; the recorded history replays with
// oncekey installed, and fails to replay without it.
func TestE2ENotAppliedLoopReplays(t *testing.T) {
	l := newLedger(faultNotApplied, faultNotApplied)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.start(t, "not-applied-loop", req, 10*time.Second)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 3, bodies)
	require.Equal(t, onlyTicket(t, l), got)
	require.NoError(t, e.replay(t, true, "not-applied-loop"))
	err := e.replay(t, false, "not-applied-loop")
	require.Error(t, err, "a history made with oncekey must not replay without it")
}

// Two workflows share an explicit key. The second meets the first's live claim, waits
// WaitInFlight, fails in_flight and is re-scheduled by its workflow; once the first finishes, the
// second replays its result.
func TestE2EInFlightThenReplay(t *testing.T) {
	req := requestFor(t)
	l := newLedger(faultGate)
	e := setupE2E(t, l, oncekey.Policy{
		Effect:       oncekey.Effectful,
		WaitInFlight: 200 * time.Millisecond,
		Key: oncekey.ExplicitKey(func(op oncekey.Operation) (string, error) {
			return "request:" + op.Args[0].(TicketRequest).RequestID, nil
		}),
	})
	first := e.start(t, "in-flight-a", req, 20*time.Second)
	require.Eventually(t, func() bool { _, b := l.counts(); return b == 1 }, 30*time.Second, 20*time.Millisecond)
	second := e.start(t, "in-flight-b", req, 20*time.Second)
	require.Eventually(t, func() bool {
		for _, o := range e.outcomes() {
			if o == oncekey.OutcomeInFlight {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "the second call never reported in_flight")
	close(l.gate)
	var a, b Ticket
	require.NoError(t, first.Get(testCtx(t), &a))
	require.NoError(t, second.Get(testCtx(t), &b))
	require.Equal(t, a, b)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	require.Contains(t, e.outcomes(), oncekey.OutcomeReplayed)
	require.NoError(t, e.replay(t, true, "in-flight-a", "in-flight-b"))
}

// A person resolves Failed: the workflow's call fails, non-retryable, with the person's note.
func TestE2EResolveFailed(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.start(t, "resolve-failed", req, 10*time.Second)
	key := e.waitingKey(t)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Epoch: 1, Outcome: reconcile.Failed, ResolvedBy: "frank", Note: "ticket voided by hand",
	}))
	err := run.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, oncekey.ErrTypeFailed, appErr.Type())
	require.Contains(t, detail(err), "ticket voided by hand")
	_, bodies := l.counts()
	require.Equal(t, 1, bodies)
	require.NoError(t, e.replay(t, true, "resolve-failed", reconcile.WorkflowID(key)))
}

// The tool commits, then no heartbeat comes (oncekey's own are off, as when the worker is cut off
// from Temporal): a heartbeat timeout. The zombie attempt still holds its lease until its own
// start-to-close ends; the reconciliation waits for it, then finds the receipt.
func TestE2EHeartbeatTimeoutAfterCommit(t *testing.T) {
	l := newLedger(faultHangAfterCommit)
	e := setupE2EWith(t, l, oncekey.Policy{Effect: oncekey.Effectful, Lease: time.Second, Reconcile: receiptFrom(l)},
		func(o *worker.Options) { o.DisableBodyHeartbeat = true })
	run := e.startWith(t, "heartbeat-timeout", req, CallOptions{StartToClose: 4 * time.Second, Heartbeat: time.Second})
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	require.Equal(t, onlyTicket(t, l), got)
	key := e.onlyKey(t)
	require.NoError(t, e.replay(t, true, "heartbeat-timeout", reconcile.WorkflowID(key)))
}

// renewFails is a store whose lease renewals never land: what a claim looks like to the store
// when its worker is gone.
type renewFails struct{ oncekeystore.Store }

func (renewFails) Renew(context.Context, *oncekeystore.RenewParams) (*oncekeystore.Record, error) {
	return nil, &oncekeystore.StoreUnavailableError{Op: "renew", Err: errors.New("worker gone")}
}

// The claim's lease lapses while the tool runs (its owner is gone as far as the store can tell):
// the body is cancelled, the record is left pending with an expired lease, the reconciliation
// marks it unknown and the receipt lookup settles it with the original result.
func TestE2EOwnerGoneLeaseLapses(t *testing.T) {
	l := newLedger(faultHangAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful, Lease: time.Second, Reconcile: receiptFrom(l)},
		func(s oncekeystore.Store) oncekeystore.Store { return renewFails{s} })
	run := e.start(t, "owner-gone", req, 30*time.Second)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	require.Equal(t, onlyTicket(t, l), got)
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: e.onlyKey(t)})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, "receipt:CreateTicket", rec.ResolvedBy)
	require.Contains(t, e.outcomes(), oncekey.OutcomeUnknown)
}

// The plugin on a client with a codec data converter stores results through that codec without
// being told, and replays decode through it.
func TestE2EPluginCapturesClientDataConverter(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	t.Parallel()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	store := pgstore.New(pool, nil)
	l := newLedger()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(l.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	plugin, err := worker.NewPlugin(worker.Options{Store: store, Registry: reg})
	require.NoError(t, err)
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), converter.NewZlibCodec(converter.ZlibCodecOptions{AlwaysEncode: true}))
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, DataConverter: dc, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := "oncekey-e2e-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{})
	w.RegisterWorkflow(TicketWorkflow)
	w.RegisterActivity(l.CreateTicket)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "codec", TaskQueue: tq}, TicketWorkflow, req, CallOptions{StartToClose: 10 * time.Second})
	require.NoError(t, err)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	res, err := store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	ps := &commonpb.Payloads{}
	require.NoError(t, proto.Unmarshal(res.Records[0].Result, ps))
	require.Equal(t, "binary/zlib", string(ps.Payloads[0].Metadata["encoding"]))
	var stored Ticket
	require.NoError(t, dc.FromPayloads(ps, &stored))
	require.Equal(t, got, stored)
}

// The workflow is cancelled while its Effectful tool runs: the tool has committed and hangs, the
// workflow ends cancelled at once, and the tool's attempt later ends at its start-to-close
// timeout, so the record is unknown. The workflow side must have handed it to a reconciliation
// workflow that outlives the cancelled workflow, so a person finds it waiting.
func TestE2ECancelledWhileEffectfulRuns(t *testing.T) {
	l := newLedger(faultHangAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful, Lease: time.Second})
	run := e.start(t, "cancelled-while-running", req, 3*time.Second)
	require.Eventually(t, func() bool { effects, _ := l.counts(); return effects == 1 }, 30*time.Second, 50*time.Millisecond,
		"the tool never committed")
	require.NoError(t, e.c.CancelWorkflow(context.Background(), "cancelled-while-running", ""))
	err := run.Get(testCtx(t), nil)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, err, &canceled, "the workflow ends cancelled")

	// The attempt ends at its start-to-close timeout, after the workflow is gone: unknown.
	require.Eventually(t, func() bool {
		res, err := reconcile.List(context.Background(), e.store, oncekeystore.ListParams{Status: oncekeystore.StatusUnknown})
		return err == nil && len(res.Records) == 1
	}, 30*time.Second, 100*time.Millisecond, "the record never became unknown")
	key := e.waitingKey(t)
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)
	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, _ := json.Marshal(landed)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Epoch: 1, Outcome: reconcile.Applied, Result: body, EffectReference: landed.ID, ResolvedBy: "alice",
	}))
	require.NoError(t, e.c.GetWorkflow(context.Background(), reconcile.WorkflowID(key), "").Get(testCtx(t), nil))
	rec, err = e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	require.NoError(t, e.replay(t, true, "cancelled-while-running", reconcile.WorkflowID(key)))
}

// The workflow is cancelled while it waits for the reconciliation of an unknown outcome: it
// ends cancelled, and the reconciliation goes on without it (the cancellation is not passed on),
// so a person's resolution is still recorded.
func TestE2ECancelledWhileReconciling(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.start(t, "cancelled-while-reconciling", req, 10*time.Second)
	key := e.waitingKey(t)
	require.NoError(t, e.c.CancelWorkflow(context.Background(), "cancelled-while-reconciling", ""))
	err := run.Get(testCtx(t), nil)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, err, &canceled, "the workflow ends cancelled")

	st, err := reconcile.Status(context.Background(), e.c, key)
	require.NoError(t, err, "the reconciliation outlives the cancelled workflow")
	require.Equal(t, reconcile.StateWaiting, st.State)
	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, _ := json.Marshal(landed)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Epoch: 1, Outcome: reconcile.Applied, Result: body, EffectReference: landed.ID, ResolvedBy: "alice",
	}))
	require.NoError(t, e.c.GetWorkflow(context.Background(), reconcile.WorkflowID(key), "").Get(testCtx(t), nil))
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	require.NoError(t, e.replay(t, true, "cancelled-while-reconciling", reconcile.WorkflowID(key)))
}
