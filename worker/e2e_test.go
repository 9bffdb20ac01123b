package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/activities"
	"github.com/oncekey/oncekey/interceptor"
	"github.com/oncekey/oncekey/internal/testenv"
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
}

const (
	faultLostAfterCommit = "lost-after-commit"   // commit, then the response is lost
	faultHangAfterCommit = "hang-after-commit"   // commit, then hang past start-to-close
	faultErrBeforeCommit = "error-before-commit" // fail before committing, with a plain error
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

func newLedger(faults ...string) *ledger { return &ledger{byKey: map[string]Ticket{}, faults: faults} }

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
	switch l.fault() {
	case faultLostAfterCommit:
		l.commit(key, in)
		return Ticket{}, errors.New("read tcp 127.0.0.1:51234: connection reset by peer")
	case faultHangAfterCommit:
		l.commit(key, in)
		<-ctx.Done()
		return Ticket{}, ctx.Err()
	case faultErrBeforeCommit:
		return Ticket{}, errors.New("dial tcp 127.0.0.1:9: connection refused")
	}
	return l.commit(key, in), nil
}

// TicketWorkflow creates one ticket at step "create_ticket".
func TicketWorkflow(ctx workflow.Context, in TicketRequest, startToClose time.Duration) (Ticket, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: startToClose,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second},
	})
	var t Ticket
	err := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "create_ticket"), "CreateTicket", in).Get(ctx, &t)
	return t, err
}

type e2e struct {
	c     client.Client
	store oncekey.Store
	tq    string
	l     *ledger
}

// setupE2E starts a worker on the dev server with the plugin on its client and Postgres as the
// store.
func setupE2E(t *testing.T, l *ledger, p oncekey.Policy) *e2e {
	t.Helper()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	store := pgstore.New(pool, nil)
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(l.CreateTicket, p))
	plugin, err := worker.NewPlugin(interceptor.Options{Store: store, Registry: reg})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{
		HostPort:  testenv.TemporalHostPort(t),
		Namespace: "default",
		Logger:    quiet{},
		Plugins:   []client.Plugin{plugin},
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := "oncekey-e2e-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{})
	w.RegisterWorkflow(TicketWorkflow)
	w.RegisterActivity(l.CreateTicket)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return &e2e{c: c, store: store, tq: tq, l: l}
}

func (e *e2e) start(t *testing.T, id string, in TicketRequest, startToClose time.Duration) client.WorkflowRun {
	t.Helper()
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: id, TaskQueue: e.tq, WorkflowExecutionTimeout: 2 * time.Minute,
	}, TicketWorkflow, in, startToClose)
	require.NoError(t, err)
	return run
}

// waitingKey waits until exactly one operation is unknown and its reconciliation workflow waits
// for a person, and returns its key.
func (e *e2e) waitingKey(t *testing.T) string {
	t.Helper()
	var key string
	require.Eventually(t, func() bool {
		res, err := reconcile.List(context.Background(), e.store, oncekey.ListParams{})
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
	res, err := e.store.List(context.Background(), &oncekey.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	require.Equal(t, oncekey.StatusApplied, res.Records[0].Status)
	require.Equal(t, "receipt:CreateTicket", res.Records[0].ResolvedBy)
	require.Equal(t, first.ID, res.Records[0].EffectReference)
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
	require.Equal(t, oncekey.StatusUnknown, st.RecordStatus)
	require.False(t, st.WaitingSince.IsZero())

	// Invalid resolutions are refused before anything is sent.
	var inv *reconcile.InvalidResolutionError
	require.ErrorAs(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{Outcome: "maybe"}), &inv)
	require.ErrorAs(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":`)}), &inv)

	landed, ok := l.lookup(key)
	require.True(t, ok)
	resolved := Ticket{ID: landed.ID, Subject: "printer on fire", Seq: landed.Seq}
	body, _ := json.Marshal(resolved)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Outcome: reconcile.Applied, Result: body, EffectReference: landed.ID, ResolvedBy: "alice", Note: "found it in the helpdesk",
	}))
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, resolved, got)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	rec, err := e.store.Get(context.Background(), &oncekey.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekey.StatusApplied, rec.Status)
	require.Equal(t, "alice", rec.ResolvedBy)
	require.Equal(t, landed.ID, rec.EffectReference)

	// The reconciliation is over: another resolution has nobody to go to.
	err = reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{Outcome: reconcile.NotApplied})
	require.ErrorIs(t, err, reconcile.ErrNoReconciliation)
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
		Outcome: reconcile.NotApplied, ResolvedBy: "bob", Note: "no ticket in the helpdesk",
	}))
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	effects, bodies = l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 2, bodies, "the tool ran exactly once more")
	landed, _ := l.lookup(key)
	require.Equal(t, landed, got)
	rec, err := e.store.Get(context.Background(), &oncekey.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekey.StatusApplied, rec.Status)
}

// Two workflows blocked on one unknown key (an explicit business key) are both released by one
// resolution.
func TestE2ETwoWorkflowsOneResolution(t *testing.T) {
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
	require.Eventually(t, func() bool {
		d, err := e.c.DescribeWorkflowExecution(context.Background(), "two-blocked-b", "")
		if err != nil {
			return false
		}
		for _, a := range d.PendingActivities {
			if a.GetActivityType().GetName() == activities.AwaitReconciliationName {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond)
	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, _ := json.Marshal(landed)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{Outcome: reconcile.Applied, Result: body, ResolvedBy: "carol"}))
	for _, run := range []client.WorkflowRun{first, second} {
		var got Ticket
		require.NoError(t, run.Get(testCtx(t), &got))
		require.Equal(t, landed, got)
	}
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies, "the second workflow's attempt met the unknown record and never ran the body")
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
