package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/mdtext"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// restartWith stops e's worker and starts one on e's task queue whose registry gives the tool
// policy p, as a deploy that changes the policy would.
func (e *e2e) restartWith(t *testing.T, p oncekey.Policy) {
	t.Helper()
	e.w.Stop()
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: []client.Plugin{e.pluginFor(t, p)}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	w := sdkworker.New(c, e.tq, sdkworker.Options{})
	registerWorkflows(w)
	w.RegisterActivity(e.l.CreateTicket)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	e.w = w
}

// timeOut runs TicketWorkflow as id to its end with nobody deciding (e's policy has a short
// approval timeout) and returns the timed-out approval.
func (e *e2e) timeOut(t *testing.T, id string) *oncekeystore.Approval {
	t.Helper()
	err := e.start(t, id, req, 10*time.Second).Get(testCtx(t), nil)
	require.Contains(t, detail(err), "nobody approved")
	res, err := e.approvals(t).ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{})
	require.NoError(t, err)
	require.Len(t, res.Approvals, 1)
	require.Equal(t, oncekeystore.ApprovalTimedOut, res.Approvals[0].Status)
	return res.Approvals[0]
}

// pluginFor returns the oncekey plugin over e's store with the tool under policy p.
func (e *e2e) pluginFor(t *testing.T, p oncekey.Policy) *temporal.SimplePlugin {
	t.Helper()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(e.l.CreateTicket, p))
	plugin, err := worker.NewPlugin(worker.Options{Store: e.store, Registry: reg})
	require.NoError(t, err)
	return plugin
}

// otherNamespace starts a worker in testenv.SecondNamespace sharing e's store, the tool under
// policy p, and returns its client and task queue.
func (e *e2e) otherNamespace(t *testing.T, p oncekey.Policy) (client.Client, string) {
	t.Helper()
	c := testenv.TemporalIn(t, testenv.SecondNamespace, e.pluginFor(t, p))
	tq := "oncekey-other-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{})
	registerWorkflows(w)
	w.RegisterActivity(e.l.CreateTicket)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return c, tq
}

// approvalFaults is a store whose DecideApproval a test can interfere with at one exact point.
type approvalFaults struct {
	oncekeystore.Store
	// afterDecide, if set, runs after the store wrote a decision; an error it returns is what
	// the activity sees instead of the answer (the response lost after the write).
	afterDecide func(*oncekeystore.Approval) error
	// beforeDecide, if set, runs before the decision reaches the store.
	beforeDecide func(*oncekeystore.DecideApprovalParams)
}

func (s *approvalFaults) as() oncekeystore.ApprovalStore { return s.Store.(oncekeystore.ApprovalStore) }

func (s *approvalFaults) RequestApproval(ctx context.Context, p *oncekeystore.RequestApprovalParams) (*oncekeystore.ApprovalResult, error) {
	return s.as().RequestApproval(ctx, p)
}

func (s *approvalFaults) DecideApproval(ctx context.Context, p *oncekeystore.DecideApprovalParams) (*oncekeystore.Approval, error) {
	if f := s.beforeDecide; f != nil {
		f(p)
	}
	a, err := s.as().DecideApproval(ctx, p)
	if err == nil && s.afterDecide != nil {
		if ferr := s.afterDecide(a); ferr != nil {
			return nil, ferr
		}
	}
	return a, err
}

func (s *approvalFaults) GetApproval(ctx context.Context, p *oncekeystore.GetParams) (*oncekeystore.Approval, error) {
	return s.as().GetApproval(ctx, p)
}

func (s *approvalFaults) ListApprovals(ctx context.Context, p *oncekeystore.ListApprovalsParams) (*oncekeystore.ListApprovalsResult, error) {
	return s.as().ListApprovals(ctx, p)
}

// The store writes the decision and its answer is lost: the DecideApproval activity's retry finds
// its own decision recorded and returns it, so Decide reports the decision taken (its request
// ID), the store holds one decision, and the call runs once.
func TestE2EApprovalDecideResponseLostIsOneDecision(t *testing.T) {
	l := newLedger()
	var decides, lost atomic.Int32
	faults := &approvalFaults{
		beforeDecide: func(*oncekeystore.DecideApprovalParams) { decides.Add(1) },
		afterDecide: func(*oncekeystore.Approval) error {
			if lost.Add(1) == 1 {
				return errors.New("read tcp 127.0.0.1:5432: connection reset by peer")
			}
			return nil
		},
	}
	e := setupE2E(t, l, approvalPolicy(0), func(s oncekeystore.Store) oncekeystore.Store { faults.Store = s; return faults })
	run := e.start(t, "approval-decide-lost", req, 10*time.Second)
	a := e.pendingApproval(t)
	out, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, reconcile.Decision{
		Decision: reconcile.Approve, Tenant: "default", DecidedBy: "alice", RequestID: "approve-lost",
	})
	require.NoError(t, err, "the decision was recorded; Decide must not call it refused")
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
	require.Equal(t, "approve-lost", out.RequestID)
	require.Equal(t, "alice", out.DecidedBy)
	require.Equal(t, int32(2), decides.Load(), "the activity retried once after the lost answer")
	require.Equal(t, int32(1), lost.Load(), "the store wrote once")
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
	stored := e.approval(t, a.OperationKey)
	require.Equal(t, oncekeystore.ApprovalApproved, stored.Status)
	require.Equal(t, "alice", stored.DecidedBy)
	require.Equal(t, int64(1), stored.Episode)
}

// An approve and a deny sent at the same moment: exactly one is recorded, the other is told how
// the approval was decided, and the effects follow the recorded one.
func TestE2EApprovalConcurrentApproveAndDenyOneWins(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.start(t, "approval-race", req, 10*time.Second)
	a := e.pendingApproval(t)
	decisions := []reconcile.Decision{
		{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "alice", RequestID: "race-approve"},
		{Decision: reconcile.Deny, Tenant: "default", DecidedBy: "bob", Reason: "no", RequestID: "race-deny"},
	}
	outs := make([]*reconcile.ApprovalOutput, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, d := range decisions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = reconcile.Decide(context.Background(), e.c, a.OperationKey, d)
		}()
	}
	wg.Wait()
	won := -1
	for i := range decisions {
		if errs[i] == nil {
			require.Equal(t, -1, won, "both decisions were reported recorded: %v", outs)
			won = i
			continue
		}
		var refused *reconcile.DecisionRefusedError
		if !errors.As(errs[i], &refused) {
			require.ErrorIs(t, errs[i], reconcile.ErrNoApproval, "the loser is refused or finds the workflow gone: %v", errs[i])
		}
	}
	require.NotEqual(t, -1, won, "one decision is recorded: %v", errs)
	stored := e.approval(t, a.OperationKey)
	require.Equal(t, decisions[won].Decision.Status(), stored.Status)
	require.Equal(t, decisions[won].DecidedBy, stored.DecidedBy)
	err := run.Get(testCtx(t), nil)
	if decisions[won].Decision == reconcile.Approve {
		require.NoError(t, err)
		requireRuns(t, l, 1, 1)
	} else {
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, oncekey.ErrTypeApproval, appErr.Type())
		requireRuns(t, l, 0, 0)
	}
}

// The same decision is delivered twice at once, as the update and as the signal (one request
// ID): it is recorded once, Decide reports it taken, and the call runs once.
func TestE2EApprovalSameDecisionByUpdateAndSignal(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.start(t, "approval-twice", req, 10*time.Second)
	a := e.pendingApproval(t)
	d := reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "alice", RequestID: "twice-1"}
	id := reconcile.ApprovalWorkflowID(a.OperationKey)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = e.c.SignalWorkflow(context.Background(), id, "", reconcile.DecideSignalName, d)
	}()
	out, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, d)
	wg.Wait()
	if err != nil {
		// The signal may have closed the workflow before the update reached it.
		require.ErrorIs(t, err, reconcile.ErrNoApproval)
	} else {
		require.Equal(t, "twice-1", out.RequestID)
	}
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
	var res reconcile.ApprovalOutput
	require.NoError(t, e.c.GetWorkflow(context.Background(), id, "").Get(testCtx(t), &res))
	require.Equal(t, "twice-1", res.RequestID)
	require.Equal(t, oncekeystore.ApprovalApproved, e.approval(t, a.OperationKey).Status)
}

// The workflow's worker is down when the decision lands (the approval workflow runs on its own
// task queue and worker): the approval workflow closes approved, nothing runs, and once a worker
// is back the call is scheduled and runs once, without asking again.
func TestE2EApprovalDecidedWhileWorkflowWorkerDownRunsOnce(t *testing.T) {
	l := newLedger()
	tqApprovals := "oncekey-e2e-approvals-" + t.Name()
	e := setupE2EWith(t, l, approvalPolicy(0), func(o *worker.Options) { o.ReconcileTaskQueue = tqApprovals })
	aw := sdkworker.New(e.c, tqApprovals, sdkworker.Options{})
	require.NoError(t, aw.Start())
	t.Cleanup(aw.Stop)
	run := e.start(t, "approval-worker-down", req, 10*time.Second)
	a := e.pendingApproval(t)
	e.w.Stop()
	e.approve(t, a.OperationKey, "alice")
	var out reconcile.ApprovalOutput
	require.NoError(t, e.c.GetWorkflow(context.Background(), reconcile.ApprovalWorkflowID(a.OperationKey), "").Get(testCtx(t), &out))
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
	requireRuns(t, l, 0, 0)
	e.startWorker(t)
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
	stored := e.approval(t, a.OperationKey)
	require.Equal(t, int64(1), stored.Episode)
	require.Equal(t, "alice", stored.DecidedBy)
	require.NoError(t, e.replay(t, true, "approval-worker-down"))
}

// An operator terminates the approval workflow while two proposals of the call wait on it (one
// its child, one through the await activity): both fail at once with an error that says to call
// again, nothing runs, and a later call asks anew (the pending episode) and runs once approved.
func TestE2EApprovalWorkflowTerminatedFailsWaitersAndAsksAnew(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.startAgent(t, "approval-terminated", 2)
	a := e.pendingApproval(t)
	id := reconcile.ApprovalWorkflowID(a.OperationKey)
	require.Eventually(t, func() bool {
		// Only the await activity: both proposals' attempts were refused (the worker asked), one
		// started the approval workflow and the other waits on it.
		d, err := e.c.DescribeWorkflow(context.Background(), "approval-terminated", "")
		if err != nil {
			return false
		}
		pending := d.RawResponse.GetPendingActivities()
		return len(pending) == 1 && pending[0].GetActivityType().GetName() == activities.AwaitReconciliationName
	}, 30*time.Second, 100*time.Millisecond, "the second proposal waits through the await activity")
	require.NoError(t, e.c.TerminateWorkflow(context.Background(), id, "", "operator"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []oncekey.ToolResult
	require.NoError(t, run.Get(ctx, &got), "the calls fail at once rather than hang")
	require.Len(t, got, 2)
	for _, tr := range got {
		require.Equal(t, oncekey.OutcomeRejected, tr.Status)
		require.Equal(t, oncekey.NextAsk, tr.NextAction)
	}
	requireRuns(t, l, 0, 0)
	require.Equal(t, oncekeystore.ApprovalPending, e.approval(t, a.OperationKey).Status)

	again := e.startAgent(t, "approval-terminated", 1)
	require.Eventually(t, func() bool {
		d, err := e.c.DescribeWorkflow(context.Background(), id, "")
		return err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}, 30*time.Second, 100*time.Millisecond, "the later call starts a new approval workflow")
	require.Equal(t, a.OperationKey, e.pendingApproval(t).OperationKey)
	e.approve(t, a.OperationKey, "alice")
	require.NoError(t, again.Get(testCtx(t), &got))
	require.Equal(t, oncekey.OutcomeApplied, got[0].Status)
	requireRuns(t, l, 1, 1)
	require.Equal(t, int64(1), e.approval(t, a.OperationKey).Episode)
}

// The call's error when its approval workflow is terminated says what happened and what to do.
func TestE2EApprovalWorkflowTerminatedErrorSaysCallAgain(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.start(t, "approval-terminated-msg", req, 10*time.Second)
	a := e.pendingApproval(t)
	require.NoError(t, e.c.TerminateWorkflow(context.Background(), reconcile.ApprovalWorkflowID(a.OperationKey), "", "operator"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run.Get(ctx, nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, oncekey.ErrTypeApproval, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.Contains(t, detail(err), "ended without a decision")
	require.Contains(t, detail(err), "call it again to ask anew")
	requireRuns(t, l, 0, 0)
}

// An operator resets the approval workflow to its first workflow task while a call waits: the
// new run asks the store again (the same pending episode), a decision on it reaches the waiting
// call, and the call runs once.
func TestE2EApprovalWorkflowResetStillDecides(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.start(t, "approval-reset", req, 10*time.Second)
	a := e.pendingApproval(t)
	id := reconcile.ApprovalWorkflowID(a.OperationKey)
	var first int64
	for _, ev := range e.history(t, id).Events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			first = ev.GetEventId()
			break
		}
	}
	require.NotZero(t, first)
	d, err := e.c.DescribeWorkflow(context.Background(), id, "")
	require.NoError(t, err)
	_, err = e.c.ResetWorkflowExecution(context.Background(), &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: "default", WorkflowExecution: d.RawResponse.GetWorkflowExecutionInfo().GetExecution(), Reason: "operator",
		WorkflowTaskFinishEventId: first, RequestId: "reset-1",
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		rep, err := reconcile.QueryApproval(context.Background(), e.c, a.OperationKey)
		return err == nil && rep.State == reconcile.ApprovalStateWaiting
	}, 30*time.Second, 100*time.Millisecond)
	e.approve(t, a.OperationKey, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, run.Get(ctx, nil), "the decision of the reset run reaches the call")
	requireRuns(t, l, 1, 1)
}

// The deadline passes while a decision is being written: the store's clock decides. The
// approval reads timed out from its deadline on (in every store, whether or not a workflow
// waits), so a decision that reaches the store after it does not land: the store records the
// timeout, the person is told the approval timed out, and nothing runs (the next call asks anew).
func TestE2EApprovalDeadlineWhileDecisionInFlight(t *testing.T) {
	l := newLedger()
	faults := &approvalFaults{}
	e := setupE2E(t, l, approvalPolicy(3*time.Second), func(s oncekeystore.Store) oncekeystore.Store { faults.Store = s; return faults })
	run := e.start(t, "approval-deadline-inflight", req, 10*time.Second)
	a := e.pendingApproval(t)
	faults.beforeDecide = func(p *oncekeystore.DecideApprovalParams) {
		if p.Status == oncekeystore.ApprovalApproved {
			<-time.After(time.Until(a.Deadline) + 2*time.Second) // the deadline passes meanwhile
		}
	}
	_, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "alice"})
	var refused *reconcile.DecisionRefusedError
	require.ErrorAs(t, err, &refused, "a decision that reaches the store after the deadline does not land")
	require.Contains(t, refused.Reason, string(oncekeystore.ApprovalTimedOut))
	require.Error(t, run.Get(testCtx(t), nil), "the call is refused as not approved in time")
	requireRuns(t, l, 0, 0)
	require.Equal(t, oncekeystore.ApprovalTimedOut, e.approval(t, a.OperationKey).Status)
}

// TwoArgsWorkflow proposes CreateTicket at one step ID twice at once with different arguments.
func TwoArgsWorkflow(ctx workflow.Context) ([]oncekey.ToolResult, error) {
	ctx = workflow.WithActivityOptions(oncekey.WithStepID(ctx, "same"), workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	ins := []TicketRequest{req, {Customer: "acme", Subject: "refund everything", RequestID: "r-2"}}
	out := make([]oncekey.ToolResult, len(ins))
	wg := workflow.NewWaitGroup(ctx)
	for i, in := range ins {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			var t Ticket
			err := workflow.ExecuteActivity(ctx, "CreateTicket", in).Get(ctx, &t)
			out[i] = oncekey.Label(t, err)
		})
	}
	wg.Wait(ctx)
	return out, nil
}

// A call re-proposed under the same key with other arguments while the first waits: it does not
// ride the first call's approval; once that is approved the first runs and the second is refused
// as a fingerprint mismatch; one effect.
func TestE2EApprovalReproposalWithOtherArgumentsIsRefused(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "approval-other-args", TaskQueue: e.tq, WorkflowExecutionTimeout: time.Minute}, TwoArgsWorkflow)
	require.NoError(t, err)
	a := e.pendingApproval(t)
	e.approve(t, a.OperationKey, "alice")
	var got []oncekey.ToolResult
	require.NoError(t, run.Get(testCtx(t), &got))
	statuses := []oncekey.Outcome{got[0].Status, got[1].Status}
	require.ElementsMatch(t, []oncekey.Outcome{oncekey.OutcomeApplied, oncekey.OutcomeConflict}, statuses)
	requireRuns(t, l, 1, 1)
	onlyTicket(t, l)
	require.NoError(t, e.replay(t, true, "approval-other-args"))
}

// A flood of invalid decision signals makes the approval workflow continue as new while a valid
// decision arrives among them: the valid one decides (in whichever run takes it), and the call
// runs once.
func TestE2EApprovalContinueAsNewFloodKeepsValidDecision(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.start(t, "approval-flood", req, 10*time.Second)
	a := e.pendingApproval(t)
	id := reconcile.ApprovalWorkflowID(a.OperationKey)
	ctx := context.Background()
	for i := range decision.MaxInvalidSignals + 30 {
		if i == decision.MaxInvalidSignals {
			require.NoError(t, e.c.SignalWorkflow(ctx, id, "", reconcile.DecideSignalName,
				reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "valid", RequestID: "the-one"}))
			continue
		}
		err := e.c.SignalWorkflow(ctx, id, "", reconcile.DecideSignalName, map[string]any{"decision": "approve", "tenant": "mallory"})
		if err != nil {
			require.ErrorContains(t, err, "already completed", "only a decided workflow stops taking signals")
			break
		}
	}
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
	stored := e.approval(t, a.OperationKey)
	require.Equal(t, oncekeystore.ApprovalApproved, stored.Status)
	require.Equal(t, "valid", stored.DecidedBy)
	var out reconcile.ApprovalOutput
	require.NoError(t, e.c.GetWorkflow(ctx, id, "").Get(testCtx(t), &out))
	require.Equal(t, "the-one", out.RequestID)
}

// After a flood of invalid signals has continued the approval workflow as new, the new run still
// waits on the same episode, keeps the count and that the episode was asked by this call
// (Created), and takes a decision by update; the call runs once.
func TestE2EApprovalContinuedAsNewTakesTheDecision(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.start(t, "approval-continued", req, 10*time.Second)
	a := e.pendingApproval(t)
	id := reconcile.ApprovalWorkflowID(a.OperationKey)
	ctx := context.Background()
	d0, err := e.c.DescribeWorkflow(ctx, id, "")
	require.NoError(t, err)
	firstRun := d0.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	for range decision.MaxInvalidSignals {
		require.NoError(t, e.c.SignalWorkflow(ctx, id, "", reconcile.DecideSignalName, map[string]any{"decision": "approve", "tenant": "mallory"}))
	}
	require.Eventually(t, func() bool {
		d, err := e.c.DescribeWorkflow(ctx, id, "")
		if err != nil || d.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId() == firstRun {
			return false
		}
		rep, err := reconcile.QueryApproval(ctx, e.c, a.OperationKey)
		return err == nil && rep.State == reconcile.ApprovalStateWaiting && rep.InvalidSignals == decision.MaxInvalidSignals
	}, 30*time.Second, 100*time.Millisecond, "the flood continued the approval as new, and the new run waits")
	out := e.approve(t, a.OperationKey, "alice")
	require.Equal(t, int64(1), out.Episode)
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
	require.NoError(t, e.replay(t, true, "approval-continued"))
}

// ApprovalPolicy.Required is decided on the worker, from the Operation the worker builds (this
// one reads the activity ID, which only the worker has): the worker asks, nothing runs before the
// decision, and approved the call runs once.
func TestE2EApprovalRequiredDecidedOnTheWorker(t *testing.T) {
	l := newLedger()
	p := approvalPolicy(0)
	p.Approval.Required = func(op oncekey.Operation) bool { return op.ActivityID != "" }
	e := setupE2E(t, l, p)
	run := e.start(t, "approval-required-worker", req, 10*time.Second)
	a := e.pendingApproval(t)
	requireRuns(t, l, 0, 0)
	e.approve(t, a.OperationKey, "alice")
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
}

// hostileMarkdown is text a model can put into a tool's arguments, and so into a summary, that
// Markdown would render as something else than itself: a forged line, emphasis, a link, an
// image that calls out, raw HTML.
const hostileMarkdown = "acme\n\n**APPROVED by security** [approve here](https://evil.example/a) ![x](https://evil.example/t.png) <img src=x onerror=alert(1)> `oncekey approve ok1_forged`\u202e"

// requireInertMarkdown checks that s carries none of hostileMarkdown's constructs as Markdown.
func requireInertMarkdown(t *testing.T, what, s string) {
	t.Helper()
	for _, bad := range []string{"**APPROVED", "[approve here](", "![x](", " <img", "`oncekey approve ok1_forged`", "\u202e"} {
		require.NotContains(t, s, bad, "%s renders %q:\n%s", what, bad, s)
	}
	require.Contains(t, s, mdtext.Text(hostileMarkdown), "%s shows the text escaped", what)
}

// Hostile text in a summary (from the call's arguments) and in who decided is shown inert in the
// Temporal UI: the approval workflow's summary, details and current details.
func TestE2EApprovalUIShowsHostileStringsInert(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	in := req
	in.Customer = hostileMarkdown
	run := e.start(t, "approval-hostile-ui", in, 10*time.Second)
	a := e.pendingApproval(t)
	id := reconcile.ApprovalWorkflowID(a.OperationKey)
	desc, err := e.c.DescribeWorkflow(context.Background(), id, "")
	require.NoError(t, err)
	summary, err := desc.GetStaticSummary()
	require.NoError(t, err)
	require.NotContains(t, summary, "\n", "the summary is one line")
	requireInertMarkdown(t, "static summary", summary)
	require.Contains(t, summary, "acme")
	details, err := desc.GetStaticDetails()
	require.NoError(t, err)
	requireInertMarkdown(t, "static details", details)
	require.Contains(t, details, "`oncekey approve "+a.OperationKey+" --tenant default`")
	current := func() string {
		v, err := e.c.QueryWorkflow(context.Background(), id, "", "__temporal_workflow_metadata")
		require.NoError(t, err)
		var md sdkpb.WorkflowMetadata
		require.NoError(t, v.Get(&md))
		return md.GetCurrentDetails()
	}
	requireInertMarkdown(t, "current details", current())
	_, err = reconcile.Decide(context.Background(), e.c, a.OperationKey, reconcile.Decision{Decision: reconcile.Deny, Tenant: "default",
		DecidedBy: hostileMarkdown, Reason: hostileMarkdown})
	require.NoError(t, err)
	requireInertMarkdown(t, "current details once decided", current())
	var tr oncekey.ToolResult
	err = run.Get(testCtx(t), &tr)
	require.Error(t, err)
	requireRuns(t, l, 0, 0)
	require.True(t, strings.HasPrefix(e.approval(t, a.OperationKey).DecidedBy, "acme\n\n**APPROVED"), "the store keeps the text as given")
}

// requestKey keys CreateTicket calls by their request ID, so calls of different workflows share
// one operation (and one approval).
var requestKey = oncekey.ExplicitKey(func(op oncekey.Operation) (string, error) {
	var r TicketRequest
	if err := json.Unmarshal(op.ArgsJSON, &r); err != nil {
		return "", err
	}
	return "request:" + r.RequestID, nil
})

// requestFor is req with a request ID of t's own. Tests keyed by requestKey run in parallel in
// one Temporal namespace, where a shared request ID would give them one operation key and so one
// reconciliation or approval workflow ID between them.
func requestFor(t *testing.T) TicketRequest {
	r := req
	r.RequestID = t.Name()
	return r
}

// The reconciliation another workflow waits on is terminated: the waiting workflow fails at once
// with an unknown outcome that says to run the step again, rather than wait forever; the body
// ran once.
func TestE2EReconciliationTerminatedReleasesTheOtherWaiter(t *testing.T) {
	req := requestFor(t)
	l := newLedger(faultLostAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful, Key: requestKey})
	first := e.start(t, "recon-terminated-a", req, 10*time.Second)
	key := e.waitingKey(t)
	second := e.start(t, "recon-terminated-b", req, 10*time.Second)
	require.Eventually(t, func() bool {
		d, err := e.c.DescribeWorkflow(context.Background(), "recon-terminated-b", "")
		return err == nil && len(d.RawResponse.GetPendingActivities()) == 1 &&
			d.RawResponse.GetPendingActivities()[0].GetActivityType().GetName() == activities.AwaitReconciliationName
	}, 30*time.Second, 100*time.Millisecond)
	require.NoError(t, e.c.TerminateWorkflow(context.Background(), reconcile.WorkflowID(key), "", "operator"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, run := range []client.WorkflowRun{first, second} {
		err := run.Get(ctx, nil)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "the call fails at once rather than hang")
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, oncekey.ErrTypeIndeterminate, appErr.Type())
		require.Contains(t, detail(err), "run the step again")
	}
	requireRuns(t, l, 1, 1)
}

// A decision for an episode that timed out, delivered once the next call asked again (episode
// 2), is refused as an update and as a signal: it cannot approve the new request. A decision for
// episode 2 then does, and the call runs once.
func TestE2EApprovalLateDecisionForTimedOutEpisodeIsRefused(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(2*time.Second))
	e.timeOut(t, "approval-late")
	e.restartWith(t, approvalPolicy(time.Hour))

	run := e.start(t, "approval-late", req, 10*time.Second)
	a := e.pendingApproval(t)
	require.Equal(t, int64(2), a.Episode, "the next call asks again, episode 2")
	var refused *reconcile.DecisionRefusedError
	_, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", Episode: 1, DecidedBy: "late"})
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, "episode 1")
	id := reconcile.ApprovalWorkflowID(a.OperationKey)
	require.NoError(t, e.c.SignalWorkflow(context.Background(), id, "", reconcile.DecideSignalName,
		reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", Episode: 1, DecidedBy: "late", RequestID: "late-sig"}))
	require.Eventually(t, func() bool {
		rep, err := reconcile.QueryApproval(context.Background(), e.c, a.OperationKey)
		return err == nil && rep.LastInvalidRequestID == "late-sig"
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, oncekeystore.ApprovalPending, e.approval(t, a.OperationKey).Status)
	requireRuns(t, l, 0, 0)
	out, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", Episode: 2, DecidedBy: "alice"})
	require.NoError(t, err)
	require.Equal(t, int64(2), out.Episode)
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
}

// Two workflows call the tool with one explicit key while it waits for approval: the second finds
// the approval workflow running (the server says already started) and waits on it; one approval
// releases both, the tool runs once and the second replays it.
func TestE2EApprovalSharedAcrossWorkflows(t *testing.T) {
	req := requestFor(t)
	l := newLedger()
	p := approvalPolicy(0)
	p.Key = requestKey
	e := setupE2E(t, l, p)
	first := e.start(t, "approval-across-a", req, 10*time.Second)
	a := e.pendingApproval(t)
	second := e.start(t, "approval-across-b", req, 10*time.Second)
	require.Eventually(t, func() bool {
		d, err := e.c.DescribeWorkflow(context.Background(), "approval-across-b", "")
		return err == nil && len(d.RawResponse.GetPendingActivities()) == 1 &&
			d.RawResponse.GetPendingActivities()[0].GetActivityType().GetName() == activities.AwaitReconciliationName
	}, 30*time.Second, 100*time.Millisecond, "the second workflow waits on the first's approval")
	e.approve(t, a.OperationKey, "alice")
	var t1, t2 Ticket
	require.NoError(t, first.Get(testCtx(t), &t1))
	require.NoError(t, second.Get(testCtx(t), &t2))
	require.Equal(t, t1, t2)
	requireRuns(t, l, 1, 1)
	require.Equal(t, int64(1), e.approval(t, a.OperationKey).Episode)
	require.NoError(t, e.replay(t, true, "approval-across-a", "approval-across-b"))
}

// An approval given for a call of one namespace does not let a call of another namespace run,
// though the two share the store, the tenant and the explicit key ("request:r-1"): the operation
// key digests the namespace, so the second namespace's call has a key of its own, with no
// approval: its worker asks for it (in its namespace) and runs nothing meanwhile.
func TestE2EApprovalOfAnotherNamespaceDoesNotRunTheCall(t *testing.T) {
	req := requestFor(t)
	l := newLedger()
	p := approvalPolicy(0)
	p.Key = requestKey
	e := setupE2E(t, l, p)
	run := e.start(t, "approval-ns-a", req, 10*time.Second)
	a := e.pendingApproval(t)
	require.Equal(t, "default", a.Namespace)
	// Approved in the store (as the first namespace's approval workflow would write it); the first
	// namespace's workflows are then ended so that only the second namespace's call remains.
	_, err := e.approvals(t).DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{
		Tenant: "default", OperationKey: a.OperationKey, Episode: a.Episode, Token: a.Token, Status: oncekeystore.ApprovalApproved, DecidedBy: "alice", Retention: time.Hour,
	})
	require.NoError(t, err)
	require.NoError(t, e.c.TerminateWorkflow(context.Background(), "approval-ns-a", "", "test"))
	require.NoError(t, e.c.TerminateWorkflow(context.Background(), reconcile.ApprovalWorkflowID(a.OperationKey), "", "test"))
	var canceled *temporal.TerminatedError
	require.ErrorAs(t, run.Get(testCtx(t), nil), &canceled)

	other := p
	other.Approval = &oncekey.ApprovalPolicy{Summary: p.Approval.Summary, Required: func(op oncekey.Operation) bool { return op.ActivityID != "" }}
	c, tq := e.otherNamespace(t, other)
	runB, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "approval-ns-b", TaskQueue: tq, WorkflowExecutionTimeout: time.Minute},
		TicketWorkflow, req, CallOptions{StartToClose: 10 * time.Second})
	require.NoError(t, err)
	var asked *oncekeystore.Approval
	require.Eventually(t, func() bool {
		res, err := e.approvals(t).ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending})
		if err != nil {
			return false
		}
		for _, ap := range res.Approvals {
			if ap.Namespace == testenv.SecondNamespace {
				asked = ap
			}
		}
		return asked != nil
	}, 30*time.Second, 100*time.Millisecond, "the other namespace's worker asks for its call")
	require.NotEqual(t, a.OperationKey, asked.OperationKey, "a key of its own")
	requireRuns(t, l, 0, 0)
	require.NoError(t, c.TerminateWorkflow(context.Background(), "approval-ns-b", "", "test"))
	require.Error(t, runB.Get(testCtx(t), nil))
	requireRuns(t, l, 0, 0)
}

// A workflow of another namespace (sharing the store) starts oncekey's approval workflow for a
// key of the first namespace whose approval timed out, with its tenant, tool and fingerprint (all
// computable), to ask it anew in its own namespace and approve it there. oncekey's RequestApproval
// refuses before writing: the approval belongs to the other namespace. The first namespace's next
// call then asks anew in its own namespace and runs once approved.
func TestE2EApprovalCannotBeAskedAnewFromAnotherNamespace(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(2*time.Second))
	timedOut := e.timeOut(t, "approval-hijack")

	other, tq := e.otherNamespace(t, approvalPolicy(time.Hour))
	forged, err := other.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: reconcile.ApprovalWorkflowID(timedOut.OperationKey), TaskQueue: tq, WorkflowExecutionTimeout: time.Minute,
	}, reconcile.ApprovalWorkflowName, decision.ApprovalInput{
		Tenant: "default", OperationKey: timedOut.OperationKey, Tool: "CreateTicket", Fingerprint: timedOut.Fingerprint,
		WorkflowID: "forged", Summary: "harmless", Timeout: time.Hour, Retention: time.Hour,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = forged.Get(ctx, nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "the forged approval workflow is refused, not left waiting for the forger's decision")
	require.Equal(t, activities.ErrTypeForeignRecord, appErr.Type())
	after := e.approval(t, timedOut.OperationKey)
	require.Equal(t, timedOut, after, "nothing was written")

	e.restartWith(t, approvalPolicy(time.Hour))
	run := e.start(t, "approval-hijack", req, 10*time.Second)
	a := e.pendingApproval(t)
	require.Equal(t, int64(2), a.Episode)
	require.Equal(t, "default", a.Namespace)
	e.approve(t, a.OperationKey, "alice")
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
}

// Approved, the call still meets Policy.Authorize right before the effect: refused there, it
// fails unauthorized and nothing runs; the approval stays approved.
func TestE2EApprovalApprovedStillAuthorized(t *testing.T) {
	l := newLedger()
	p := approvalPolicy(0)
	var frozen atomic.Bool
	p.Authorize = func(context.Context, oncekey.Operation) error {
		if frozen.Load() {
			return errors.New("the customer's account is frozen")
		}
		return nil
	}
	e := setupE2E(t, l, p)
	run := e.start(t, "approval-authorize", req, 10*time.Second)
	a := e.pendingApproval(t)
	frozen.Store(true) // after the request: Authorize refuses what the person then approves
	e.approve(t, a.OperationKey, "alice")
	err := run.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, oncekey.ErrTypeUnauthorized, appErr.Type())
	requireRuns(t, l, 0, 0)
	require.Equal(t, oncekeystore.ApprovalApproved, e.approval(t, a.OperationKey).Status)
}

// An operator resets the workflow to its first workflow task after its approved call ran: the
// new run schedules the call again, the worker finds the approval (nobody is asked), and the call
// replays; one effect.
func TestE2EApprovalWorkflowResetAfterTheCallReplays(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.start(t, "approval-parent-reset", req, 10*time.Second)
	a := e.pendingApproval(t)
	e.approve(t, a.OperationKey, "alice")
	var t1 Ticket
	require.NoError(t, run.Get(testCtx(t), &t1))
	var first int64
	for _, ev := range e.history(t, "approval-parent-reset").Events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			first = ev.GetEventId()
			break
		}
	}
	d, err := e.c.DescribeWorkflow(context.Background(), "approval-parent-reset", "")
	require.NoError(t, err)
	reset, err := e.c.ResetWorkflowExecution(context.Background(), &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: "default", WorkflowExecution: d.RawResponse.GetWorkflowExecutionInfo().GetExecution(), Reason: "operator",
		WorkflowTaskFinishEventId: first, RequestId: "reset-parent-1",
	})
	require.NoError(t, err)
	var t2 Ticket
	require.NoError(t, e.c.GetWorkflow(context.Background(), "approval-parent-reset", reset.GetRunId()).Get(testCtx(t), &t2))
	require.Equal(t, t1, t2)
	requireRuns(t, l, 1, 1)
	stored := e.approval(t, a.OperationKey)
	require.Equal(t, int64(1), stored.Episode)
	require.Equal(t, "alice", stored.DecidedBy)
	var out reconcile.ApprovalOutput
	require.NoError(t, e.c.GetWorkflow(context.Background(), reconcile.ApprovalWorkflowID(a.OperationKey), "").Get(testCtx(t), &out))
	require.True(t, out.Created, "the reset run asked nobody and started no approval workflow: the latest is the first call's")
}

// The approval workflow is reset while two proposals wait on it, one as its parent and one
// through the await activity: the await follows the reset run, so one decision on it releases
// both (one applied, one replayed), and the tool runs once.
func TestE2EApprovalWorkflowResetWithTwoWaiters(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.startAgent(t, "approval-reset-two", 2)
	a := e.pendingApproval(t)
	id := reconcile.ApprovalWorkflowID(a.OperationKey)
	require.Eventually(t, func() bool { return e.awaiting("approval-reset-two") }, 60*time.Second, 100*time.Millisecond,
		"the second proposal waits through the await activity")
	var first int64
	for _, ev := range e.history(t, id).Events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			first = ev.GetEventId()
			break
		}
	}
	d, err := e.c.DescribeWorkflow(context.Background(), id, "")
	require.NoError(t, err)
	_, err = e.c.ResetWorkflowExecution(context.Background(), &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: "default", WorkflowExecution: d.RawResponse.GetWorkflowExecutionInfo().GetExecution(), Reason: "operator",
		WorkflowTaskFinishEventId: first, RequestId: "reset-two-1",
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		rep, err := reconcile.QueryApproval(context.Background(), e.c, a.OperationKey)
		return err == nil && rep.State == reconcile.ApprovalStateWaiting
	}, 30*time.Second, 100*time.Millisecond)
	e.approve(t, a.OperationKey, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []oncekey.ToolResult
	require.NoError(t, run.Get(ctx, &got))
	require.Len(t, got, 2)
	require.ElementsMatch(t, []oncekey.Outcome{oncekey.OutcomeApplied, oncekey.OutcomeReplayed}, []oncekey.Outcome{got[0].Status, got[1].Status},
		"the proposal awaiting the reset approval workflow is released by its decision: %+v", got)
	requireRuns(t, l, 1, 1)
}

// The reconciliation workflow's summary, details and current details show a hostile workflow ID
// and a hostile downstream error (the outcome's reason, from the tool's error) inert, as the
// approval workflow's do.
func TestE2EReconciliationUIShowsHostileStringsInert(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	l.lostText = "502 Bad Gateway " + hostileMarkdown
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	// A workflow ID cannot hold control characters (it travels in a gRPC header).
	wf := "wf **APPROVED by security** [approve here](https://evil.example/a) <img src=x>"
	run := e.start(t, wf, req, 10*time.Second)
	key := e.waitingKey(t)
	id := reconcile.WorkflowID(key)
	desc, err := e.c.DescribeWorkflow(context.Background(), id, "")
	require.NoError(t, err)
	summary, err := desc.GetStaticSummary()
	require.NoError(t, err)
	require.NotContains(t, summary, "\n", "the summary is one line")
	for _, bad := range []string{"**APPROVED", "[approve here](", " <img"} {
		require.NotContains(t, summary, bad)
	}
	require.Contains(t, summary, mdtext.Text(wf))
	details, err := desc.GetStaticDetails()
	require.NoError(t, err)
	requireInertMarkdown(t, "static details", details)
	require.Contains(t, details, "`oncekey resolve "+key+" --tenant default`")
	v, err := e.c.QueryWorkflow(context.Background(), id, "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	requireInertMarkdown(t, "current details", md.GetCurrentDetails())
	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, _ := json.Marshal(landed)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: body, ResolvedBy: "carol"}))
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
}
