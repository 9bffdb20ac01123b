package systemtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
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
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second},
	})
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
	run, err := e.c.ExecuteWorkflow(context.Background(), clientStart(id, e.tq), ExpenseWorkflow, ExpenseRequest{ID: "exp-7", Amount: 120})
	require.NoError(t, err)
	return run
}

// The expense sample with the policy a user picks when unsure: RequestDecision Effectful. Its
// body registers the callback and returns activity.ErrResultPending; oncekey cannot record a
// result completed from outside the worker, so it refuses the hand-off with a typed
// AsyncCompletion error that says what to register instead, and keeps the refusal in the record:
// running the workflow again gives the refusal without registering again. The person's
// CompleteActivity finds nothing to complete, and nothing is paid.
func TestE2EAsyncCompletionOfAnEffectfulToolIsRefused(t *testing.T) {
	e, x := setupExpenses(t, oncekey.Effectful)
	const id = "expense-effectful"
	err := e.startExpense(t, id).Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, oncekey.ErrTypeAsyncCompletion, appErr.Type())
	require.Contains(t, detail(err), "Register the part that waits for the completion as Idempotent or ReadOnly")
	require.Equal(t, oncekey.OutcomeFailed, oncekey.Label(nil, err).Status)

	err = e.c.CompleteActivity(context.Background(), x.token(t, 1), "APPROVED", nil)
	require.Error(t, err, "the refused activity cannot be completed from outside")

	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	require.Equal(t, oncekeystore.StatusFailed, res.Records[0].Status, "the record keeps the refusal")

	err = e.startExpense(t, id).Get(testCtx(t), nil)
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, oncekey.ErrTypeAsyncCompletion, appErr.Type(), "the repeat gives the remembered refusal, under the type the docs pin")
	require.True(t, appErr.NonRetryable())
	require.Equal(t, oncekey.OutcomeFailed, oncekey.Label(nil, err).Status)
	registrations, payments := x.counts()
	require.Equal(t, 1, registrations, "the repeat did not run the body")
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
