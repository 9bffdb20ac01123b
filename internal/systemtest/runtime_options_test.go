package systemtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// faultLateResult commits, then returns its ticket only once the attempt's context has ended
// (past its start-to-close timeout): the record says applied, Temporal says timed out.
const faultLateResult = "late-result"

// LabelledTicketWorkflow creates one ticket at step "create_ticket" with one attempt of
// Temporal's retry policy and returns what oncekey.Label makes of the call: what a model reads.
func LabelledTicketWorkflow(ctx workflow.Context, in TicketRequest, startToClose time.Duration) (oncekey.ToolResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: startToClose,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	ctx = oncekey.WithStepID(ctx, "create_ticket")
	var raw converter.RawValue
	err := workflow.ExecuteActivity(ctx, "CreateTicket", in).Get(ctx, &raw)
	tr := oncekey.Label(raw, err)
	tr.Result = nil // the ticket is compared through the ledger
	return tr, nil
}

// An Idempotent tool whose body committed and answered after its start-to-close timeout: its
// record is applied, and Temporal's last attempt ended in a timeout. The workflow side reads the
// record through the claim path (a check that runs nothing), so Label gives the model the truth,
// applied (confirmed), instead of unknown/reconcile. One effect, one body.
func TestE2EIdempotentTimeoutReadsTheRecordApplied(t *testing.T) {
	l := newLedger(faultLateResult)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Idempotent})
	tr := e.labelled(t, "idempotent-timeout-applied")
	require.Equal(t, oncekey.OutcomeApplied, tr.Status, "the record proves it applied: %+v", tr)
	require.Equal(t, oncekey.ReasonConfirmed, tr.Reason)
	require.Equal(t, oncekey.NextNone, tr.NextAction)
	require.NotEmpty(t, tr.OperationKey)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies, "the check ran nothing")
	require.NoError(t, e.replay(t, true, "idempotent-timeout-applied"))
}

// The same for an Idempotent tool that timed out before it committed (its claim was given back):
// the record proves nothing landed, so the model reads failed, safe to repeat, not unknown.
func TestE2EIdempotentTimeoutReadsTheRecordNotApplied(t *testing.T) {
	l := newLedger(faultGate) // waits for a gate that never opens: the context ends first
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Idempotent})
	tr := e.labelled(t, "idempotent-timeout-not-applied")
	require.Equal(t, oncekey.OutcomeFailed, tr.Status, "the record proves it did not apply: %+v", tr)
	require.True(t, tr.SafeToRepeat)
	require.Equal(t, oncekey.NextPoll, tr.NextAction)
	effects, bodies := l.counts()
	require.Equal(t, 0, effects)
	require.Equal(t, 1, bodies, "the check ran nothing")
	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	require.Equal(t, oncekeystore.StatusReleased, res.Records[0].Status, "the check gave its claim back")
	require.NoError(t, e.replay(t, true, "idempotent-timeout-not-applied"))
}

// labelled runs LabelledTicketWorkflow as id with a 2 s start-to-close timeout and returns its
// ToolResult.
func (e *e2e) labelled(t *testing.T, id string) oncekey.ToolResult {
	t.Helper()
	run, err := e.c.ExecuteWorkflow(context.Background(), clientStart(id, e.tq), LabelledTicketWorkflow, req, 2*time.Second)
	require.NoError(t, err)
	var tr oncekey.ToolResult
	require.NoError(t, run.Get(testCtx(t), &tr))
	return tr
}

// `temporal activity update-options` gives a running Effectful attempt a retry policy of five
// attempts; the attempt commits downstream and hangs past its start-to-close timeout, so Temporal
// retries it on its own. The retry goes through the claim like any repeat: the record is unknown
// (or pending, then unknown), so it answers IndeterminateOutcome without running the body, and
// the workflow's reconciliation settles the call from the downstream's receipt. One effect, one
// body, whatever the options said at run time.
func TestE2EUpdateOptionsRetryDoesNotRunTheBodyAgain(t *testing.T) {
	l := newLedger(faultHangAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful, Lease: time.Second, Reconcile: receiptFrom(l)})
	const id = "update-options-retry"
	run := e.startWith(t, id, req, CallOptions{StartToClose: 4 * time.Second})
	activityID := e.runningActivity(t, id, func() bool { effects, _ := l.counts(); return effects == 1 })
	e.temporalCLI(t, "activity", "update-options", "--workflow-id", id, "--activity-id", activityID,
		"--retry-maximum-attempts", "5", "--retry-initial-interval", "100ms")
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, onlyTicket(t, l), got)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects, "never a second effect")
	require.Equal(t, 1, bodies, "Temporal's retry did not run the body")
	require.GreaterOrEqual(t, e.maxAttempt(t, id, activityID), int32(2), "Temporal retried the attempt under the new options")
	require.NoError(t, e.replay(t, true, id, reconcile.WorkflowID(e.onlyKey(t))))
}

// runningActivity waits until the workflow id has one pending activity and ready() holds, and
// returns that activity's ID.
func (e *e2e) runningActivity(t *testing.T, id string, ready func() bool) string {
	t.Helper()
	var activityID string
	require.Eventually(t, func() bool {
		d, err := e.c.DescribeWorkflow(context.Background(), id, "")
		if err != nil || !ready() || len(d.RawResponse.GetPendingActivities()) != 1 {
			return false
		}
		activityID = d.RawResponse.GetPendingActivities()[0].GetActivityId()
		return true
	}, 20*time.Second, 50*time.Millisecond, "the body never started")
	return activityID
}

// maxAttempt returns the highest attempt Temporal started of the activity activityID in the
// history of the workflow id.
func (e *e2e) maxAttempt(t *testing.T, id, activityID string) int32 {
	t.Helper()
	scheduled := map[int64]string{}
	var attempt int32
	for _, ev := range e.history(t, id).GetEvents() {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityId()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			if scheduled[a.GetScheduledEventId()] == activityID {
				attempt = max(attempt, a.GetAttempt())
			}
		}
	}
	if attempt == 0 {
		t.Fatalf("%s: no start of activity %s in the history", id, activityID)
	}
	return attempt
}

// clientStart returns the options that start the workflow id on task queue tq.
func clientStart(id, tq string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: id, TaskQueue: tq, WorkflowExecutionTimeout: 2 * time.Minute}
}

// LabelledCreditWorkflow makes one AddCredit call with one attempt of Temporal's retry policy and
// a 2 s start-to-close timeout, and returns what oncekey.Label makes of it.
func LabelledCreditWorkflow(ctx workflow.Context, in CreditRequest) (oncekey.ToolResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var raw converter.RawValue
	err := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "credit"), "AddCredit", in).Get(ctx, &raw)
	tr := oncekey.Label(raw, err)
	tr.Result = nil
	return tr, nil
}

// A Transactional tool whose body wrote its row and returned only after its start-to-close
// timeout: oncekey committed the row with the record applied, and Temporal's only attempt ended
// in a timeout. The check reads the record, so the model reads applied (confirmed), not unknown.
// One row, one body.
func TestTransactionalTimeoutReadsTheRecordApplied(t *testing.T) {
	cr := &credits{fault: func(ctx context.Context, _ int32) error {
		<-ctx.Done()
		return nil
	}}
	e := setupTx(t, cr, oncekey.Policy{}, nil)
	run, err := e.c.ExecuteWorkflow(context.Background(), clientStart("tx-"+t.Name(), e.tq), LabelledCreditWorkflow, CreditRequest{Account: "acme", Amount: 10})
	require.NoError(t, err)
	var tr oncekey.ToolResult
	require.NoError(t, run.Get(testCtx(t), &tr))
	require.Equal(t, oncekey.OutcomeApplied, tr.Status, "%+v", tr)
	require.Equal(t, oncekey.ReasonConfirmed, tr.Reason)
	require.Equal(t, 1, e.effects(t))
	require.Equal(t, int32(1), e.credits.bodies.Load(), "the check ran nothing")
	require.Equal(t, oncekeystore.StatusApplied, e.record(t).Status)
}

// A Transactional body that overruns its start-to-close timeout (2 s) and keeps going, ignoring
// its context, with a lease (5 s) longer than the timeout: the check after the timeout waits on
// the worker until the lease has run out and takes the record over, so the call reads a definite
// "not applied" (failed, poll: safe to repeat), never unknown. Before, the check ran within the
// call's own 2 s start-to-close timeout, timed out while the lease still held the record, and the
// call read unknown. No row: the body's transaction never commits.
func TestTransactionalTimeoutCheckOutwaitsTheLease(t *testing.T) {
	hang := make(chan struct{})
	cr := &credits{fault: func(ctx context.Context, _ int32) error {
		<-ctx.Done()
		<-hang
		return nil
	}}
	e := setupTx(t, cr, oncekey.Policy{Lease: 5 * time.Second}, nil)
	t.Cleanup(func() { close(hang) })
	run, err := e.c.ExecuteWorkflow(context.Background(), clientStart("tx-"+t.Name(), e.tq), LabelledCreditWorkflow, CreditRequest{Account: "acme", Amount: 10})
	require.NoError(t, err)
	var tr oncekey.ToolResult
	require.NoError(t, run.Get(testCtx(t), &tr))
	require.Equal(t, oncekey.OutcomeFailed, tr.Status, "%+v", tr)
	require.Equal(t, oncekey.NextPoll, tr.NextAction, "%+v", tr)
	require.Equal(t, 0, e.effects(t))
	require.Equal(t, int32(1), e.credits.bodies.Load(), "the check ran nothing")
	require.Equal(t, oncekeystore.StatusReleased, e.record(t).Status)
}

// The check header (wire.HeaderCheck) can only make the worker do less: a workflow worker
// without oncekey's interceptor schedules an Effectful call with it, and the worker answers from
// the record without running the body (a free record: NotApplied, the claim given back). The real
// call then runs once.
func TestE2EForgedCheckHeaderRunsNothing(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	const id = "forged-check"
	fields := oncekeyHeaders(t, req, true)
	var err error
	fields[wire.HeaderCheck], err = converter.GetDefaultDataConverter().ToPayload(true)
	require.NoError(t, err)
	c, tq := e.attacker(t, fields)
	forged, err := c.ExecuteWorkflow(context.Background(), clientStart(id, tq), ForgedCallWorkflow, req, e.tq)
	require.NoError(t, err)
	err = forged.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, oncekey.ErrTypeNotApplied, appErr.Type(), appErr.Error())
	requireRuns(t, l, 0, 0)

	var got Ticket
	require.NoError(t, e.start(t, id, req, 10*time.Second).Get(testCtx(t), &got))
	require.Equal(t, onlyTicket(t, l), got)
	requireRuns(t, l, 1, 1)
}
