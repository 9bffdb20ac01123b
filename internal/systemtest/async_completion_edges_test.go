package systemtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
	okworker "github.com/oncekey/oncekey/worker"
)

// The workflow run that waits for the completion is terminated. Temporal still lists the
// activity as pending for the closed run, but nothing can complete it any more: a new run of the
// workflow repeats the step, finds the hand-off of a closed run, and the outcome is unknown (the
// expense system may have paid), so it is reconciled, not asked again. A person resolves it
// applied; one registration, one payment.
func TestE2EAsyncCompletionOfATerminatedRunIsReconciled(t *testing.T) {
	e, x := setupExpenses(t, oncekey.Effectful)
	const id = "expense-terminated"
	run := e.startExpense(t, id)
	x.token(t, 1)
	rec := e.requireHandedOff(t)
	h, _ := activities.HandOffOf(rec)
	require.NoError(t, e.c.TerminateWorkflow(context.Background(), id, run.GetRunID(), "operator"))
	end, err := activities.ReadEnding(context.Background(), e.c, h)
	require.NoError(t, err)
	require.Equal(t, activities.NoCompletion, end.Kind, "a closed run's activity can no longer be completed")
	require.Contains(t, end.Why, "closed")

	run2 := e.startExpense(t, id)
	key := e.waitingKey(t)
	require.Equal(t, rec.OperationKey, key)
	now := e.decisionRecord(t)
	require.Equal(t, oncekeystore.StatusUnknown, now.Status)
	body, _ := json.Marshal("APPROVED")
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Epoch: now.Epoch, Outcome: reconcile.Applied, Result: body, ResolvedBy: "alice"}))
	require.NoError(t, run2.Get(testCtx(t), nil))
	registrations, payments := x.counts()
	require.Equal(t, 1, registrations, "the step was not asked again")
	require.Equal(t, 1, payments)
}

// A completion without a result (client.CompleteActivity(ctx, token, nil, nil)) settles the
// record too: applied, with no result, as the workflow got it.
func TestE2EAsyncCompletionWithoutAResult(t *testing.T) {
	e, x := setupExpenses(t, oncekey.Effectful)
	const id = "expense-nil-result"
	run := e.startExpense(t, id)
	tok := x.token(t, 1)
	e.requireHandedOff(t)
	require.NoError(t, e.c.CompleteActivity(context.Background(), tok, nil, nil))
	require.Error(t, run.Get(testCtx(t), nil), "an empty decision is not an approval")
	rec := e.decisionRecord(t)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status, "the workflow got the completion; the record is settled")
	require.Empty(t, rec.Result)
}

// fastDecider's body has its own callback complete the activity before the body returns
// ErrResultPending (a webhook that answers at once).
type fastDecider struct{ bodies atomic.Int32 }

func (f *fastDecider) FastDecision(ctx context.Context, in ExpenseRequest) (string, error) {
	f.bodies.Add(1)
	tok := activity.GetInfo(ctx).TaskToken
	c := activity.GetClient(ctx)
	if err := c.CompleteActivity(context.Background(), tok, "APPROVED", nil); err != nil {
		return "", err
	}
	time.Sleep(2 * time.Second) // the workflow gets the completion and runs SettleHandOff first
	return "", activity.ErrResultPending
}

func FastDecisionWorkflow(ctx workflow.Context, in ExpenseRequest) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, expenseOptions(in))
	var d string
	err := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "decide"), "FastDecision", in).Get(ctx, &d)
	return d, err
}

// A completion that reaches the workflow before the worker has written the hand-off (the body's
// own callback completes the activity before the body returns): SettleHandOff finds the record
// pending without a hand-off, asks again, and settles it once the hand-off is written.
func TestE2EAsyncCompletionBeforeTheHandOffIsWritten(t *testing.T) {
	f := &fastDecider{}
	e := setupE2EWith(t, newLedger(), oncekey.Policy{Effect: oncekey.Effectful}, func(o *okworker.Options) {
		require.NoError(t, o.Registry.Set(f.FastDecision, oncekey.Policy{Effect: oncekey.Effectful}))
	})
	e.w.Stop()
	e.startWorkerRegistering(t, func(w sdkworker.Worker) {
		w.RegisterActivity(f.FastDecision)
		w.RegisterWorkflow(FastDecisionWorkflow)
	})
	run, err := e.c.ExecuteWorkflow(context.Background(), clientStart("fast-decision", e.tq), FastDecisionWorkflow, ExpenseRequest{ID: "x", Amount: 1})
	require.NoError(t, err)
	var d string
	require.NoError(t, run.Get(testCtx(t), &d))
	require.Equal(t, "APPROVED", d)
	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{Tool: "FastDecision"})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	require.Equal(t, oncekeystore.StatusApplied, res.Records[0].Status, "the workflow got the completion; the record is settled")
	require.Equal(t, int32(1), f.bodies.Load())
}

// flakyDecider fails its first body with NotApplied (the expense system refused the request
// before registering it), then registers and hands off.
type flakyDecider struct {
	mu     sync.Mutex
	bodies int
	tokens [][]byte
}

func (f *flakyDecider) FlakyDecision(ctx context.Context, in ExpenseRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bodies++
	if f.bodies == 1 {
		return "", oncekey.NotApplied(errors.New("the expense system was down; nothing registered"))
	}
	f.tokens = append(f.tokens, activity.GetInfo(ctx).TaskToken)
	return "", activity.ErrResultPending
}

// FixedIDDecisionWorkflow gives the decision an explicit ActivityID, which oncekey's retry loop
// keeps on its re-runs.
func FixedIDDecisionWorkflow(ctx workflow.Context, in ExpenseRequest) (string, error) {
	o := expenseOptions(in)
	o.ActivityID = "decide"
	ctx = workflow.WithActivityOptions(ctx, o)
	var d string
	err := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "decide"), "FlakyDecision", in).Get(ctx, &d)
	return d, err
}

// A workflow that gives the call an explicit ActivityID, which oncekey's re-runs keep: the first
// attempt fails NotApplied, the re-run (same activity ID) hands off and is completed. The record
// is settled from the re-run's completion, not the earlier attempt's failure: applied, and a new
// run of the workflow replays it without registering again.
func TestE2EAsyncCompletionWithAReusedActivityID(t *testing.T) {
	f := &flakyDecider{}
	e := setupE2EWith(t, newLedger(), oncekey.Policy{Effect: oncekey.Effectful}, func(o *okworker.Options) {
		require.NoError(t, o.Registry.Set(f.FlakyDecision, oncekey.Policy{Effect: oncekey.Effectful}))
	})
	e.w.Stop()
	e.startWorkerRegistering(t, func(w sdkworker.Worker) {
		w.RegisterActivity(f.FlakyDecision)
		w.RegisterWorkflow(FixedIDDecisionWorkflow)
	})
	const id = "fixed-id-decision"
	run, err := e.c.ExecuteWorkflow(context.Background(), clientStart(id, e.tq), FixedIDDecisionWorkflow, ExpenseRequest{ID: "x", Amount: 1})
	require.NoError(t, err)
	var tok []byte
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.tokens) == 0 {
			return false
		}
		tok = f.tokens[0]
		return true
	}, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, e.c.CompleteActivity(context.Background(), tok, "APPROVED", nil))
	var d string
	require.NoError(t, run.Get(testCtx(t), &d))
	require.Equal(t, "APPROVED", d)
	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{Tool: "FlakyDecision"})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)

	// The workflow again (same ID, same step): replay expected, no new registration.
	run2, err := e.c.ExecuteWorkflow(context.Background(), clientStart(id, e.tq), FixedIDDecisionWorkflow, ExpenseRequest{ID: "x", Amount: 1})
	require.NoError(t, err)
	require.NoError(t, run2.Get(testCtx(t), &d))
	require.Equal(t, "APPROVED", d)
	f.mu.Lock()
	bodies := f.bodies
	f.mu.Unlock()
	require.Equal(t, oncekeystore.StatusApplied, res.Records[0].Status)
	require.Equal(t, 2, bodies, "one NotApplied, one hand-off: no second registration")
}

// The expense sample on a client with a payload codec: the completion is stored as the codec
// encoded it (no plain text at rest), and a new run replays the decision and the payment.
func TestE2EAsyncCompletionWithACodec(t *testing.T) {
	t.Parallel()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	store := pgstore.New(pool, nil)
	x := newExpenses()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(x.RequestDecision, oncekey.Policy{Effect: oncekey.Effectful}))
	require.NoError(t, reg.Set(x.Pay, oncekey.Policy{Effect: oncekey.Effectful}))
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), xorCodec{})
	plugin, err := okworker.NewPlugin(okworker.Options{Store: store, Registry: reg})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Logger: quiet{}, DataConverter: dc, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := "oncekey-e2e-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{})
	w.RegisterWorkflow(ExpenseWorkflow)
	w.RegisterActivity(x.RequestDecision)
	w.RegisterActivity(x.Pay)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	const id = "expense-codec"
	run, err := c.ExecuteWorkflow(context.Background(), clientStart(id, tq), ExpenseWorkflow, ExpenseRequest{ID: "e", Amount: 3})
	require.NoError(t, err)
	tok := x.token(t, 1)
	require.NoError(t, c.CompleteActivity(context.Background(), tok, "APPROVED", nil))
	var first ExpensePayment
	require.NoError(t, run.Get(testCtx(t), &first))
	res, err := store.List(context.Background(), &oncekeystore.ListParams{Tool: "RequestDecision"})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	rec := res.Records[0]
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.False(t, bytes.Contains(rec.Result, []byte("APPROVED")), "plain text at rest")
	run2, err := c.ExecuteWorkflow(context.Background(), clientStart(id, tq), ExpenseWorkflow, ExpenseRequest{ID: "e", Amount: 3})
	require.NoError(t, err)
	var again ExpensePayment
	require.NoError(t, run2.Get(testCtx(t), &again))
	require.Equal(t, first, again)
	regs, pays := x.counts()
	require.Equal(t, 1, regs)
	require.Equal(t, 1, pays)
}
