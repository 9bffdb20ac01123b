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
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/failuredoc"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	okworker "github.com/oncekey/oncekey/worker"
)

// expenses is a fake expense system in the shape of Temporal's expense sample: RequestDecision
// registers a callback (the activity's task token) and returns activity.ErrResultPending, a
// person completes it later with client.CompleteActivity, and Pay pays. It counts its own
// registrations and payments.
type expenses struct {
	mu            sync.Mutex
	tokens        [][]byte
	payments      int
	paidByKey     map[string]ExpensePayment
	registrations int
}

type ExpenseRequest struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
	// Timeout and Heartbeat, in seconds, change the decision's start-to-close and heartbeat
	// timeouts from the sample's (a minute, none); zero keeps them.
	Timeout   int `json:"timeout,omitempty"`
	Heartbeat int `json:"heartbeat,omitempty"`
}

type ExpensePayment struct {
	ID  string `json:"id"`
	Seq int    `json:"seq"`
}

func newExpenses() *expenses { return &expenses{paidByKey: map[string]ExpensePayment{}} }

// RequestDecision registers the activity for a person's decision and hands its result off.
func (x *expenses) RequestDecision(ctx context.Context, in ExpenseRequest) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.registrations++
	x.tokens = append(x.tokens, activity.GetInfo(ctx).TaskToken)
	return "", activity.ErrResultPending
}

// Pay pays the expense: the effect that must happen once.
func (x *expenses) Pay(ctx context.Context, in ExpenseRequest) (ExpensePayment, error) {
	key, _ := oncekey.OperationKey(ctx)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.payments++
	p := ExpensePayment{ID: fmt.Sprintf("P-%d", x.payments), Seq: x.payments}
	x.paidByKey[key] = p
	return p, nil
}

func (x *expenses) counts() (registrations, payments int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.registrations, x.payments
}

// token waits for the n-th registration (from 1) and returns its task token.
func (x *expenses) token(t *testing.T, n int) []byte {
	t.Helper()
	var tok []byte
	require.Eventually(t, func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		if len(x.tokens) < n {
			return false
		}
		tok = x.tokens[n-1]
		return true
	}, 30*time.Second, 50*time.Millisecond, "no registration %d", n)
	return tok
}

// ExpenseWorkflow asks for a decision (completed from outside) and pays an approved expense at
// step "pay".
func ExpenseWorkflow(ctx workflow.Context, in ExpenseRequest) (ExpensePayment, error) {
	ctx = workflow.WithActivityOptions(ctx, expenseOptions(in))
	var decision string
	if err := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "decide"), "RequestDecision", in).Get(ctx, &decision); err != nil {
		return ExpensePayment{}, err
	}
	if decision != "APPROVED" {
		return ExpensePayment{}, temporal.NewNonRetryableApplicationError("expense "+decision, "Rejected", nil)
	}
	var p ExpensePayment
	err := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "pay"), "Pay", in).Get(ctx, &p)
	return p, err
}

func expenseOptions(in ExpenseRequest) workflow.ActivityOptions {
	o := workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second},
	}
	if in.Timeout > 0 {
		o.StartToCloseTimeout = time.Duration(in.Timeout) * time.Second
	}
	o.HeartbeatTimeout = time.Duration(in.Heartbeat) * time.Second
	return o
}

// ExpenseAskedTwiceWorkflow asks for the decision of the same step twice at once, as an agent
// whose model proposes the call again while the first waits, and returns both answers.
func ExpenseAskedTwiceWorkflow(ctx workflow.Context, in ExpenseRequest) ([]string, error) {
	ctx = workflow.WithActivityOptions(ctx, expenseOptions(in))
	first := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "decide"), "RequestDecision", in)
	_ = workflow.Sleep(ctx, time.Second) // the first hands off before the second is proposed
	second := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "decide"), "RequestDecision", in)
	out := make([]string, 2)
	for i, f := range []workflow.Future{first, second} {
		if err := f.Get(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// setupExpenses is setupE2E with the expense activities registered with the policies decide
// (RequestDecision) and Effectful (Pay).
func setupExpenses(t *testing.T, decide oncekey.Effect) (*e2e, *expenses) {
	t.Helper()
	x := newExpenses()
	e := setupE2EWith(t, newLedger(), oncekey.Policy{Effect: oncekey.Effectful}, func(o *okworker.Options) {
		require.NoError(t, o.Registry.Set(x.RequestDecision, oncekey.Policy{Effect: decide}))
		require.NoError(t, o.Registry.Set(x.Pay, oncekey.Policy{Effect: oncekey.Effectful}))
	})
	e.w.Stop()
	e.startWorkerRegistering(t, func(w sdkworker.Worker) {
		w.RegisterActivity(x.RequestDecision)
		w.RegisterActivity(x.Pay)
	})
	return e, x
}

// startWorkerRegistering starts a worker on e's task queue with the test's workflows, tool, and
// what register adds (on this worker and every later one startWorkerWith starts).
func (e *e2e) startWorkerRegistering(t *testing.T, register func(sdkworker.Worker)) {
	t.Helper()
	e.register = register
	e.startWorkerWith(t, sdkworker.Options{})
}

func (e *e2e) startExpense(t *testing.T, id string) client.WorkflowRun {
	t.Helper()
	return e.startExpenseWith(t, id, ExpenseRequest{})
}

// startExpenseWith starts ExpenseWorkflow for expense exp-7 with in's timeouts.
func (e *e2e) startExpenseWith(t *testing.T, id string, in ExpenseRequest) client.WorkflowRun {
	t.Helper()
	in.ID, in.Amount = "exp-7", 120
	run, err := e.c.ExecuteWorkflow(context.Background(), clientStart(id, e.tq), ExpenseWorkflow, in)
	require.NoError(t, err)
	return run
}

// decisionRecord returns the record of the decision step (the one record of RequestDecision).
func (e *e2e) decisionRecord(t *testing.T) *oncekeystore.Record {
	t.Helper()
	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{Tool: "RequestDecision"})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	return res.Records[0]
}

// storedDecision decodes the decision stored in rec.
func storedDecision(t *testing.T, rec *oncekeystore.Record) string {
	t.Helper()
	var ps commonpb.Payloads
	require.NoError(t, proto.Unmarshal(rec.Result, &ps))
	var s string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(&ps, &s))
	return s
}

// requireHandedOff waits until the decision's record waits for its asynchronous completion.
func (e *e2e) requireHandedOff(t *testing.T) *oncekeystore.Record {
	t.Helper()
	var rec *oncekeystore.Record
	require.Eventually(t, func() bool {
		res, err := e.store.List(context.Background(), &oncekeystore.ListParams{Tool: "RequestDecision"})
		if err != nil || len(res.Records) != 1 {
			return false
		}
		rec = res.Records[0]
		_, ok := activities.HandOffOf(rec)
		return ok && rec.Status == oncekeystore.StatusPending
	}, 30*time.Second, 50*time.Millisecond, "the record does not show the hand-off")
	return rec
}

// The expense sample, unchanged, with the policy a user picks when unsure: RequestDecision
// Effectful. Its body registers the callback and returns activity.ErrResultPending; the record
// waits for the completion. A person's CompleteActivity approves it, the workflow pays once, and
// the completion is recorded from the workflow's history: running the workflow again replays the
// decision (no second registration) and the payment. One registration, one payment.
func TestE2EAsyncCompletionOfAnEffectfulTool(t *testing.T) {
	e, x := setupExpenses(t, oncekey.Effectful)
	const id = "expense-effectful"
	run := e.startExpense(t, id)
	waiting := e.requireHandedOff(t)
	h, _ := activities.HandOffOf(waiting)
	require.Equal(t, id, h.WorkflowID)
	require.Equal(t, run.GetRunID(), h.RunID)
	require.NoError(t, e.c.CompleteActivity(context.Background(), x.token(t, 1), "APPROVED", nil))
	var first ExpensePayment
	require.NoError(t, run.Get(testCtx(t), &first))

	rec := e.decisionRecord(t)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status, "the completion was recorded")
	require.Equal(t, "APPROVED", storedDecision(t, rec))

	var again ExpensePayment
	require.NoError(t, e.startExpense(t, id).Get(testCtx(t), &again))
	require.Equal(t, first, again, "the payment was replayed")
	registrations, payments := x.counts()
	require.Equal(t, 1, registrations, "the decision was replayed, not asked again")
	require.Equal(t, 1, payments)
}

// A model that proposes the waiting call again: the second call of the same step, while the first
// waits for its completion, is answered in_flight (no second registration), and once the person
// completes the first, the second gets the same decision from the record.
func TestE2EAsyncCompletionRepeatWhileWaitingIsInFlight(t *testing.T) {
	e, x := setupExpenses(t, oncekey.Effectful)
	run, err := e.c.ExecuteWorkflow(context.Background(), clientStart("expense-asked-twice", e.tq), ExpenseAskedTwiceWorkflow, ExpenseRequest{ID: "exp-8", Amount: 40})
	require.NoError(t, err)
	tok := x.token(t, 1)
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, ev := range e.events {
			if ev.Tool == "RequestDecision" && ev.Outcome == oncekey.OutcomeInFlight && ev.Err != nil &&
				oncekey.Label(nil, ev.Err).Status == oncekey.OutcomeInFlight {
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the repeat was not answered in_flight")
	registrations, _ := x.counts()
	require.Equal(t, 1, registrations, "no second hand-off while the first waits")

	require.NoError(t, e.c.CompleteActivity(context.Background(), tok, "APPROVED", nil))
	var got []string
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, []string{"APPROVED", "APPROVED"}, got)
	registrations, _ = x.counts()
	require.Equal(t, 1, registrations)
	require.Equal(t, oncekeystore.StatusApplied, e.decisionRecord(t).Status)
}

// The completion never comes: the decision times out, the outcome is unknown (the record says
// when the result was handed off), and the reconciliation waits for a person, who finds the
// expense approved in the expense system and resolves it applied. The workflow pays once. The
// completion that arrives after that is refused by Temporal and changes nothing: the record keeps
// the person's decision, and running the workflow again replays it.
func TestE2EAsyncCompletionThatNeverComesIsReconciled(t *testing.T) {
	e, x := setupExpenses(t, oncekey.Effectful)
	const id = "expense-no-completion"
	run := e.startExpenseWith(t, id, ExpenseRequest{Timeout: 3})
	tok := x.token(t, 1)
	key := e.waitingKey(t)
	rec := e.decisionRecord(t)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)
	doc, ok := failuredoc.Decode(rec.Failure)
	require.True(t, ok)
	require.NotNil(t, doc.HandOff, "the unknown record keeps the hand-off")
	require.Contains(t, doc.Message, "handed off to an asynchronous completion")
	require.Contains(t, doc.Message, "timed out")

	body, _ := json.Marshal("APPROVED")
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Epoch: rec.Epoch, Outcome: reconcile.Applied, Result: body, ResolvedBy: "alice", Note: "approved in the expense system",
	}))
	var paid ExpensePayment
	require.NoError(t, run.Get(testCtx(t), &paid))

	require.Error(t, e.c.CompleteActivity(context.Background(), tok, "REJECTED", nil), "Temporal refuses a completion after the timeout")
	rec = e.decisionRecord(t)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, "alice", rec.ResolvedBy)
	require.Equal(t, "APPROVED", storedDecision(t, rec))

	var again ExpensePayment
	require.NoError(t, e.startExpenseWith(t, id, ExpenseRequest{Timeout: 3}).Get(testCtx(t), &again))
	require.Equal(t, paid, again)
	registrations, payments := x.counts()
	require.Equal(t, 1, registrations)
	require.Equal(t, 1, payments)
}

// The worker that handed the result off stops before the completion; another worker runs the
// rest. The completion reaches the workflow, which has the new worker record it: the record is
// applied, and running the workflow again replays. One registration, one payment.
func TestE2EAsyncCompletionAfterTheWorkerIsGone(t *testing.T) {
	e, x := setupExpenses(t, oncekey.Effectful)
	const id = "expense-worker-gone"
	run := e.startExpense(t, id)
	tok := x.token(t, 1)
	e.requireHandedOff(t)
	e.w.Stop()
	e.startWorkerWith(t, sdkworker.Options{})
	require.NoError(t, e.c.CompleteActivity(context.Background(), tok, "APPROVED", nil))
	var first ExpensePayment
	require.NoError(t, run.Get(testCtx(t), &first))
	require.Equal(t, oncekeystore.StatusApplied, e.decisionRecord(t).Status)

	var again ExpensePayment
	require.NoError(t, e.startExpense(t, id).Get(testCtx(t), &again))
	require.Equal(t, first, again)
	registrations, payments := x.counts()
	require.Equal(t, 1, registrations)
	require.Equal(t, 1, payments)
}

// The expense system completes the decision with a failure: the workflow gets it, and the record
// keeps it as a definite failure, which running the workflow again gives without asking again.
// Nothing is paid.
func TestE2EAsyncCompletionWithAFailureIsRemembered(t *testing.T) {
	e, x := setupExpenses(t, oncekey.Effectful)
	const id = "expense-failed"
	run := e.startExpense(t, id)
	tok := x.token(t, 1)
	e.requireHandedOff(t)
	require.NoError(t, e.c.CompleteActivity(context.Background(), tok, nil, temporal.NewNonRetryableApplicationError("the expense report is incomplete", "Incomplete", nil)))
	err := run.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, "Incomplete", appErr.Type())
	require.Eventually(t, func() bool { return e.decisionRecord(t).Status == oncekeystore.StatusFailed }, 30*time.Second, 50*time.Millisecond)
	doc, _ := failuredoc.Decode(e.decisionRecord(t).Failure)
	require.Equal(t, "Incomplete", doc.Type)

	err = e.startExpense(t, id).Get(testCtx(t), nil)
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, oncekey.ErrTypeFailed, appErr.Type())
	require.Contains(t, detail(err), "the expense report is incomplete", "the operator's account names the remembered failure")
	registrations, payments := x.counts()
	require.Equal(t, 1, registrations)
	require.Equal(t, 0, payments)
}

// An asynchronously completed activity keeps Temporal's heartbeat path: the expense system
// heartbeats the waiting decision by its task token past its heartbeat timeout, then completes
// it. The record is applied, one payment.
func TestE2EAsyncCompletionHeartbeatsByTaskToken(t *testing.T) {
	e, x := setupExpenses(t, oncekey.Effectful)
	run := e.startExpenseWith(t, "expense-heartbeat", ExpenseRequest{Heartbeat: 2})
	tok := x.token(t, 1)
	e.requireHandedOff(t)
	for range 10 {
		require.NoError(t, e.c.RecordActivityHeartbeat(context.Background(), tok, "still with the approver"))
		time.Sleep(500 * time.Millisecond)
	}
	require.NoError(t, e.c.CompleteActivity(context.Background(), tok, "APPROVED", nil))
	require.NoError(t, run.Get(testCtx(t), nil))
	require.Equal(t, oncekeystore.StatusApplied, e.decisionRecord(t).Status)
	_, payments := x.counts()
	require.Equal(t, 1, payments)
}

// An asynchronously completed activity keeps the pause path: `temporal activity pause` and
// `unpause` on the waiting decision, then the completion by ID. The record is applied, one
// payment.
func TestE2EAsyncCompletionPausedAndUnpaused(t *testing.T) {
	e, x := setupExpenses(t, oncekey.Effectful)
	const id = "expense-paused"
	run := e.startExpense(t, id)
	x.token(t, 1)
	rec := e.requireHandedOff(t)
	h, _ := activities.HandOffOf(rec)
	e.temporalCLI(t, "activity", "pause", "--workflow-id", id, "--activity-id", h.ActivityID)
	e.temporalCLI(t, "activity", "unpause", "--workflow-id", id, "--activity-id", h.ActivityID)
	require.NoError(t, e.c.CompleteActivityByID(context.Background(), "default", id, run.GetRunID(), h.ActivityID, "APPROVED", nil))
	require.NoError(t, run.Get(testCtx(t), nil))
	require.Equal(t, oncekeystore.StatusApplied, e.decisionRecord(t).Status)
	registrations, payments := x.counts()
	require.Equal(t, 1, registrations)
	require.Equal(t, 1, payments)
}

// hideHandOff is a store without oncekeystore.HandOffStore.
type hideHandOff struct{ oncekeystore.Store }

// On a store that cannot keep a hand-off, the Effectful hand-off is refused with a typed
// AsyncCompletion error, the record keeps the refusal, and running the workflow again gives it
// without registering again. Nothing is paid.
func TestE2EAsyncCompletionRefusedWithoutAHandOffStore(t *testing.T) {
	x := newExpenses()
	e := setupE2EWith(t, newLedger(), oncekey.Policy{Effect: oncekey.Effectful}, func(o *okworker.Options) {
		require.NoError(t, o.Registry.Set(x.RequestDecision, oncekey.Policy{Effect: oncekey.Effectful}))
		require.NoError(t, o.Registry.Set(x.Pay, oncekey.Policy{Effect: oncekey.Effectful}))
	}, func(s oncekeystore.Store) oncekeystore.Store { return hideHandOff{s} })
	e.w.Stop()
	e.startWorkerRegistering(t, func(w sdkworker.Worker) {
		w.RegisterActivity(x.RequestDecision)
		w.RegisterActivity(x.Pay)
	})
	const id = "expense-refused"
	err := e.startExpense(t, id).Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, oncekey.ErrTypeAsyncCompletion, appErr.Type())
	require.Contains(t, detail(err), "Register the part that waits for the completion as Idempotent or ReadOnly")
	require.Equal(t, oncekey.OutcomeFailed, oncekey.Label(nil, err).Status)
	require.Error(t, e.c.CompleteActivity(context.Background(), x.token(t, 1), "APPROVED", nil))
	require.Equal(t, oncekeystore.StatusFailed, e.decisionRecord(t).Status)
	err = e.startExpense(t, id).Get(testCtx(t), nil)
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, oncekey.ErrTypeAsyncCompletion, appErr.Type())
	registrations, payments := x.counts()
	require.Equal(t, 1, registrations)
	require.Equal(t, 0, payments)
}

// The same workflow registered as the refusal says: RequestDecision Idempotent (its hand-off is
// run again on a repeat), Pay Effectful. A person completes the decision from outside with
// client.CompleteActivity, and the one payment lands; running the workflow again (a new run under
// the same ID) asks for the decision again and replays the payment. One payment.
func TestE2EAsyncCompletionOfAnIdempotentToolThenEffectfulPay(t *testing.T) {
	e, x := setupExpenses(t, oncekey.Idempotent)
	const id = "expense-idempotent"
	run := e.startExpense(t, id)
	require.NoError(t, e.c.CompleteActivity(context.Background(), x.token(t, 1), "APPROVED", nil))
	var first ExpensePayment
	require.NoError(t, run.Get(testCtx(t), &first))

	run = e.startExpense(t, id)
	require.NoError(t, e.c.CompleteActivity(context.Background(), x.token(t, 2), "APPROVED", nil))
	var again ExpensePayment
	require.NoError(t, run.Get(testCtx(t), &again))
	require.Equal(t, first, again, "the payment was replayed")
	registrations, payments := x.counts()
	require.Equal(t, 2, registrations, "each run asked for the decision")
	require.Equal(t, 1, payments, "one payment")
}

// A Transactional tool whose body wrote its row and returned activity.ErrResultPending: the
// completion could not commit with the record, so the hand-off is refused (AsyncCompletion, not
// retried), the transaction rolls back and the claim is given back. No row.
func TestTransactionalAsyncCompletionIsRefused(t *testing.T) {
	cr := &credits{fault: func(context.Context, int32) error { return activity.ErrResultPending }}
	e := setupTx(t, cr, oncekey.Policy{}, nil)
	_, err := e.run(t, 1, false)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, oncekey.ErrTypeAsyncCompletion, appErr.Type(), appErr.Error())
	require.Equal(t, 0, e.effects(t), "the row rolled back")
	require.Equal(t, int32(1), e.credits.bodies.Load(), "not retried")
	require.Equal(t, oncekeystore.StatusReleased, e.record(t).Status)
}
