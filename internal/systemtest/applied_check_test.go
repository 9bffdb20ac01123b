package systemtest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/worker"
)

// TwoCallsWorkflow makes two CreateTicket calls at one step ID: first, then second. The second
// is a new call with the same operation key; the workflow returns both results and the second
// call's error.
func TwoCallsWorkflow(ctx workflow.Context, first, second TicketRequest) (TwoCalls, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second},
	})
	ctx = oncekey.WithStepID(ctx, "send")
	var out TwoCalls
	if err := workflow.ExecuteActivity(ctx, "CreateTicket", first).Get(ctx, &out.First); err != nil {
		return out, err
	}
	err := workflow.ExecuteActivity(ctx, "CreateTicket", second).Get(ctx, &out.Second)
	if err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			out.SecondErrType = appErr.Type()
		}
		out.SecondErr = err.Error()
	}
	return out, nil
}

type TwoCalls struct {
	First, Second Ticket
	SecondErr     string
	SecondErrType string
}

// slowAuthorize is a Policy.Authorize that, the first time it sees a call with subject slow,
// waits until the attempt's context ends (a slow authorization service), so that the attempt
// times out before it claims. deny, once set, refuses every call.
type slowAuthorize struct {
	slow string
	mu   sync.Mutex
	seen bool
	deny bool
}

func (a *slowAuthorize) authorize(ctx context.Context, op oncekey.Operation) error {
	in, _ := op.Args[0].(TicketRequest)
	a.mu.Lock()
	first := in.Subject == a.slow && !a.seen
	if first {
		a.seen = true
	}
	deny := a.deny
	a.mu.Unlock()
	if first {
		<-ctx.Done()
		return ctx.Err()
	}
	if deny {
		return errors.New("the caller may no longer send tickets")
	}
	return nil
}

func (a *slowAuthorize) setDeny() {
	a.mu.Lock()
	a.deny = true
	a.mu.Unlock()
}

func setupTwoCalls(t *testing.T, l *ledger, p oncekey.Policy) (client.Client, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	t.Parallel()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(l.CreateTicket, p))
	plugin, err := worker.NewPlugin(worker.Options{Store: pgstore.New(pool, nil), Registry: reg})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := "oncekey-twocalls-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{})
	w.RegisterWorkflow(TwoCallsWorkflow)
	w.RegisterActivity(l.CreateTicket)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return c, tq
}

// A call with other arguments at a step ID whose record is applied times out before it claims
// (its Policy.Authorize is slow). Reconciliation finds the applied record; the call must not get
// that record's result: the step runs again and the claim path refuses the other arguments.
func TestAppliedDecisionChecksFingerprint(t *testing.T) {
	l := newLedger()
	auth := &slowAuthorize{slow: "send 9999 to mallory"}
	c, tq := setupTwoCalls(t, l, oncekey.Policy{Effect: oncekey.Effectful, Lease: time.Second, Authorize: auth.authorize})
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "applied-check-fingerprint", TaskQueue: tq, WorkflowExecutionTimeout: 2 * time.Minute},
		TwoCallsWorkflow, TicketRequest{Customer: "acme", Subject: "send 10 to alice"}, TicketRequest{Customer: "acme", Subject: "send 9999 to mallory"})
	require.NoError(t, err)
	var out TwoCalls
	require.NoError(t, run.Get(testCtx(t), &out))
	require.Equal(t, "send 10 to alice", out.First.Subject)
	require.Empty(t, out.Second, "the call with other arguments got the record's result")
	require.Equal(t, oncekey.ErrTypeFingerprintMismatch, out.SecondErrType, out.SecondErr)
	effects, _ := l.counts()
	require.Equal(t, 1, effects)
}

// The same call again (same arguments) after its authorization was withdrawn, timing out before
// it claims: the applied record's result is replayed only if Policy.Authorize passes now.
func TestAppliedDecisionChecksAuthorize(t *testing.T) {
	l := newLedger()
	auth := &slowAuthorize{slow: "send 10 to alice, again"}
	l.onCommit = auth.setDeny
	c, tq := setupTwoCalls(t, l, oncekey.Policy{Effect: oncekey.Effectful, Lease: time.Second, Authorize: auth.authorize,
		Exclude: []string{"subject"}})
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "applied-check-authorize", TaskQueue: tq, WorkflowExecutionTimeout: 2 * time.Minute},
		TwoCallsWorkflow, TicketRequest{Customer: "acme", Subject: "send 10 to alice"}, TicketRequest{Customer: "acme", Subject: "send 10 to alice, again"})
	require.NoError(t, err)
	var out TwoCalls
	require.NoError(t, run.Get(testCtx(t), &out))
	require.Equal(t, "send 10 to alice", out.First.Subject)
	require.Empty(t, out.Second, "a call no longer authorized got the record's result")
	require.Equal(t, oncekey.ErrTypeUnauthorized, out.SecondErrType, out.SecondErr)
	effects, _ := l.counts()
	require.Equal(t, 1, effects)
}
