package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/agent"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/internal/workflows"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// agentRegistry names CreateTicket for agent.Call in AgentTicketWorkflow (agent.Call reads only
// whether the tool is known; the workers' registries hold the tests' policies).
var agentRegistry = func() *oncekey.Registry {
	r := oncekey.NewRegistry()
	must(r.Set(newLedger().CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	return r
}()

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// AgentTicketWorkflow proposes CreateTicket as a model would, n times at once (agent.Call, no
// step ID: the call is keyed by its arguments), and returns what the model reads for each.
func AgentTicketWorkflow(ctx workflow.Context, in TicketRequest, n int) ([]oncekey.ToolResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second},
	})
	args, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	out := make([]oncekey.ToolResult, n)
	wg := workflow.NewWaitGroup(ctx)
	for i := range n {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			out[i], _ = agent.Call(ctx, agentRegistry, "CreateTicket", args)
		})
	}
	wg.Wait(ctx)
	return out, nil
}

// approvalPolicy is an Effectful policy that asks for approval, with timeout (0: the default).
func approvalPolicy(timeout time.Duration) oncekey.Policy {
	return oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{
		Timeout: timeout,
		Summary: func(op oncekey.Operation) string {
			var r TicketRequest
			_ = json.Unmarshal(op.ArgsJSON, &r)
			return "ticket for " + r.Customer + ": " + r.Subject
		},
	}}
}

func (e *e2e) approvals(t *testing.T) oncekeystore.ApprovalStore {
	t.Helper()
	s, ok := e.store.(oncekeystore.ApprovalStore)
	require.True(t, ok, "the store keeps approvals")
	return s
}

// pendingApproval waits until exactly one approval is pending and its approval workflow waits for
// a decision, and returns it.
func (e *e2e) pendingApproval(t *testing.T) *oncekeystore.Approval {
	t.Helper()
	var a *oncekeystore.Approval
	require.Eventually(t, func() bool {
		res, err := e.approvals(t).ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending})
		if err != nil || len(res.Approvals) != 1 {
			return false
		}
		a = res.Approvals[0]
		rep, err := reconcile.QueryApproval(context.Background(), e.c, a.OperationKey)
		return err == nil && rep.State == reconcile.ApprovalStateWaiting
	}, 30*time.Second, 100*time.Millisecond, "no approval came to wait for a person")
	return a
}

func (e *e2e) approval(t *testing.T, key string) *oncekeystore.Approval {
	t.Helper()
	a, err := e.approvals(t).GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	return a
}

// approve approves the pending approval of key as by, through reconcile.Decide.
func (e *e2e) approve(t *testing.T, key, by string) *reconcile.ApprovalOutput {
	t.Helper()
	out, err := reconcile.Decide(context.Background(), e.c, key, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: by})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
	return out
}

// requireRuns checks what the downstream saw: effects, and tool bodies run.
func requireRuns(t *testing.T, l *ledger, effects, bodies int) {
	t.Helper()
	e, b := l.counts()
	require.Equal(t, effects, e, "effects downstream")
	require.Equal(t, bodies, b, "tool bodies run")
}

func (e *e2e) startAgent(t *testing.T, id string, n int) client.WorkflowRun {
	t.Helper()
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: id, TaskQueue: e.tq, WorkflowExecutionTimeout: 2 * time.Minute,
	}, AgentTicketWorkflow, req, n)
	require.NoError(t, err)
	return run
}

// A call that needs approval waits for it; nothing runs before; approved, it runs once.
func TestE2EApprovalApproved(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.start(t, "approval-approve", req, 10*time.Second)
	a := e.pendingApproval(t)
	require.Equal(t, "ticket for acme: printer on fire", a.Summary)
	require.Equal(t, "CreateTicket", a.Tool)
	require.Equal(t, "create_ticket", a.StepID)
	require.Equal(t, int64(1), a.Episode)
	rep, err := reconcile.QueryApproval(context.Background(), e.c, a.OperationKey)
	require.NoError(t, err)
	require.Equal(t, a.Summary, rep.Summary)
	requireRuns(t, l, 0, 0) // nothing runs before the approval

	out, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, reconcile.Decision{
		Decision: reconcile.Approve, Tenant: "default", Episode: 1, DecidedBy: "alice", RequestID: "approve-1",
	})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
	require.Equal(t, "alice", out.DecidedBy)
	require.Equal(t, "approve-1", out.RequestID)
	require.True(t, out.Created, "the request was pending when the approval workflow read it")
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, onlyTicket(t, l), got)
	requireRuns(t, l, 1, 1)
	stored := e.approval(t, a.OperationKey)
	require.Equal(t, oncekeystore.ApprovalApproved, stored.Status)
	require.Equal(t, "alice", stored.DecidedBy)
	require.False(t, stored.DecidedAt.IsZero())

	// The approval is decided: a decision now has no workflow to go to.
	_, err = reconcile.Decide(context.Background(), e.c, a.OperationKey, reconcile.Decision{Decision: reconcile.Deny, Tenant: "default", Reason: "late"})
	require.ErrorIs(t, err, reconcile.ErrNoApproval)
	require.NoError(t, e.replay(t, true, "approval-approve", reconcile.ApprovalWorkflowID(a.OperationKey)))
}

// Denied: nothing runs, and the model reads a rejected result that says to stop. A repeat of the
// operation (a new run under the same workflow ID, the same call) is denied again without asking.
func TestE2EApprovalDenied(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.startAgent(t, "approval-deny", 1)
	a := e.pendingApproval(t)
	out, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, reconcile.Decision{
		Decision: reconcile.Deny, Tenant: "default", DecidedBy: "bob", Reason: "not for this customer",
	})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalDenied, out.Status)
	var got []oncekey.ToolResult
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Len(t, got, 1)
	tr := got[0]
	require.Equal(t, oncekey.OutcomeRejected, tr.Status)
	require.Equal(t, oncekey.NextStop, tr.NextAction)
	require.False(t, tr.SafeToRepeat)
	require.Equal(t, a.OperationKey, tr.OperationKey)
	require.Equal(t, oncekey.ModelText(oncekey.OutcomeRejected, oncekey.NextStop, oncekey.ReasonDenied), tr.Text)
	require.NotContains(t, tr.Text, "bob")
	require.NotContains(t, tr.Text, "not for this customer")
	requireRuns(t, l, 0, 0)
	require.NoError(t, e.replay(t, true, "approval-deny", reconcile.ApprovalWorkflowID(a.OperationKey)))

	again := e.startAgent(t, "approval-deny", 1)
	require.NoError(t, again.Get(testCtx(t), &got))
	require.Equal(t, oncekey.OutcomeRejected, got[0].Status)
	require.Equal(t, oncekey.NextStop, got[0].NextAction)
	stored := e.approval(t, a.OperationKey)
	require.Equal(t, oncekeystore.ApprovalDenied, stored.Status)
	require.Equal(t, int64(1), stored.Episode, "the repeat asked nothing new")
	requireRuns(t, l, 0, 0)
}

// Nobody decides within the timeout: the call is rejected (ask for approval), nothing runs, and
// the store says who timed it out.
func TestE2EApprovalTimedOut(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(2*time.Second))
	run := e.start(t, "approval-timeout", req, 10*time.Second)
	err := run.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, oncekey.ErrTypeApproval, appErr.Type())
	require.Contains(t, detail(err), "nobody approved CreateTicket in time")
	tr := oncekey.Label(nil, err)
	require.Equal(t, oncekey.OutcomeRejected, tr.Status)
	require.Equal(t, oncekey.NextAsk, tr.NextAction)
	requireRuns(t, l, 0, 0)
	res, err := e.approvals(t).ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{})
	require.NoError(t, err)
	require.Len(t, res.Approvals, 1)
	a := res.Approvals[0]
	require.Equal(t, oncekeystore.ApprovalTimedOut, a.Status)
	require.Equal(t, workflows.TimeoutDecider, a.DecidedBy)
	require.NoError(t, e.replay(t, true, "approval-timeout", reconcile.ApprovalWorkflowID(a.OperationKey)))
}

// The worker stops while the call waits for approval; a new worker takes over, the call still
// waits, and an approval then gives one effect.
func TestE2EApprovalSurvivesWorkerRestart(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.start(t, "approval-restart", req, 10*time.Second)
	a := e.pendingApproval(t)
	e.w.Stop()
	d, err := e.c.DescribeWorkflow(context.Background(), reconcile.ApprovalWorkflowID(a.OperationKey), "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.RawResponse.GetWorkflowExecutionInfo().GetStatus())
	e.startWorker(t)
	require.Equal(t, a.OperationKey, e.pendingApproval(t).OperationKey, "still waiting, on the same approval")
	requireRuns(t, l, 0, 0)
	e.approve(t, a.OperationKey, "carol")
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	requireRuns(t, l, 1, 1)
	require.NoError(t, e.replay(t, true, "approval-restart", reconcile.ApprovalWorkflowID(a.OperationKey)))
}

// A repeat of an approved and applied call replays its result without asking again: the
// approval workflow finds the approval decided (Created false), and the claim path replays.
func TestE2EApprovalRepeatReplays(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	first := e.start(t, "approval-repeat", req, 10*time.Second)
	a := e.pendingApproval(t)
	e.approve(t, a.OperationKey, "dave")
	var t1, t2 Ticket
	require.NoError(t, first.Get(testCtx(t), &t1))
	second := e.start(t, "approval-repeat", req, 10*time.Second)
	require.NoError(t, second.Get(testCtx(t), &t2))
	require.Equal(t, t1, t2)
	var out reconcile.ApprovalOutput
	require.NoError(t, e.c.GetWorkflow(context.Background(), reconcile.ApprovalWorkflowID(a.OperationKey), "").Get(testCtx(t), &out))
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
	// The repeat found the approval and asked nothing: the latest approval workflow run is still
	// the first call's, which waited for the decision.
	require.True(t, out.Created, "the repeat started no approval workflow")
	require.Equal(t, "dave", out.DecidedBy)
	// The repeat's run reads like what it did, not like a request waiting for someone.
	desc, err := e.c.DescribeWorkflow(context.Background(), reconcile.ApprovalWorkflowID(a.OperationKey), "")
	require.NoError(t, err)
	summary, err := desc.GetStaticSummary()
	require.NoError(t, err)
	details, err := desc.GetStaticDetails()
	require.NoError(t, err)
	require.Equal(t, "oncekey: approval of CreateTicket: "+a.Summary, summary)
	require.Contains(t, details, "or reads the decision already recorded for the key")
	require.NotContains(t, details, "waits for a person's approval")
	stored := e.approval(t, a.OperationKey)
	require.Equal(t, int64(1), stored.Episode)
	require.Equal(t, a.RequestedAt, stored.RequestedAt)
	requireRuns(t, l, 1, 1)
	require.Contains(t, e.outcomes(), oncekey.OutcomeReplayed)
}

// A model proposes the same call twice while its approval is pending: both wait on the one
// approval (one approval workflow), one decision releases both, and the tool runs once.
func TestE2EApprovalSharedByReproposal(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.startAgent(t, "approval-shared", 2)
	a := e.pendingApproval(t)
	// The second proposal found the approval workflow running and waits for it.
	require.Eventually(t, func() bool { return e.awaiting("approval-shared") }, 30*time.Second, 100*time.Millisecond)
	e.approve(t, a.OperationKey, "erin")
	var got []oncekey.ToolResult
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Len(t, got, 2)
	statuses := []oncekey.Outcome{got[0].Status, got[1].Status}
	require.ElementsMatch(t, []oncekey.Outcome{oncekey.OutcomeApplied, oncekey.OutcomeReplayed}, statuses)
	require.Equal(t, got[0].Result, got[1].Result)
	requireRuns(t, l, 1, 1)
	starts := 0
	for _, ev := range e.history(t, "approval-shared").Events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED {
			starts++
		}
	}
	require.Equal(t, 1, starts, "one approval workflow")
	require.NoError(t, e.replay(t, true, "approval-shared", reconcile.ApprovalWorkflowID(a.OperationKey)))
}

// A decision for another tenant, or for an episode that is not the pending one, is refused by
// the update's validator (and, as a signal, counted and shown in the query); the approval keeps
// waiting and the documented signal JSON then approves it.
func TestE2EApprovalRefusesWrongTenantAndStaleEpisode(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.start(t, "approval-refused", req, 10*time.Second)
	a := e.pendingApproval(t)
	var refused *reconcile.DecisionRefusedError
	_, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, reconcile.Decision{Decision: reconcile.Approve, Tenant: "mallory"})
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, "another tenant")
	_, err = reconcile.Decide(context.Background(), e.c, a.OperationKey, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", Episode: 2})
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, "episode 2")
	require.Equal(t, oncekeystore.ApprovalPending, e.approval(t, a.OperationKey).Status)

	id := reconcile.ApprovalWorkflowID(a.OperationKey)
	require.NoError(t, e.c.SignalWorkflow(context.Background(), id, "", reconcile.DecideSignalName,
		map[string]any{"decision": "approve", "tenant": "mallory", "request_id": "sig-1"}))
	require.Eventually(t, func() bool {
		rep, err := reconcile.QueryApproval(context.Background(), e.c, a.OperationKey)
		return err == nil && rep.LastInvalidRequestID == "sig-1" && rep.InvalidSignals == 1
	}, 30*time.Second, 100*time.Millisecond)
	requireRuns(t, l, 0, 0)

	require.NoError(t, e.c.SignalWorkflow(context.Background(), id, "", reconcile.DecideSignalName,
		map[string]any{"decision": "approve", "tenant": "default", "episode": 1, "decided_by": "frank", "request_id": "sig-2"}))
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	requireRuns(t, l, 1, 1)
	require.Equal(t, "frank", e.approval(t, a.OperationKey).DecidedBy)
}

// The workflow is cancelled while its call waits for approval: it ends cancelled at once,
// nothing runs, and the approval workflow goes on without it (a decision is still recorded, for
// the operation's next call).
func TestE2EApprovalCancelledWhileWaiting(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.start(t, "approval-cancelled", req, 10*time.Second)
	a := e.pendingApproval(t)
	require.NoError(t, e.c.CancelWorkflow(context.Background(), "approval-cancelled", ""))
	var canceled *temporal.CanceledError
	require.ErrorAs(t, run.Get(testCtx(t), nil), &canceled)
	e.approve(t, a.OperationKey, "gina")
	require.Equal(t, oncekeystore.ApprovalApproved, e.approval(t, a.OperationKey).Status)
	requireRuns(t, l, 0, 0)
	require.NoError(t, e.replay(t, true, "approval-cancelled", reconcile.ApprovalWorkflowID(a.OperationKey)))
}

// SecondCall is what SameStepOtherArgumentsWorkflow saw of its second call: the model's result
// and the error's application error type.
type SecondCall struct {
	Result  oncekey.ToolResult
	ErrType string
}

// SameStepOtherArgumentsWorkflow creates a ticket for req at step "t" and, on the signal "go"
// while that call may still wait, one for another subject at the same step; it returns what it
// saw of the second at once, leaving the first to wait.
func SameStepOtherArgumentsWorkflow(ctx workflow.Context) (SecondCall, error) {
	ctx = oncekey.WithStepID(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second}), "t")
	workflow.ExecuteActivity(ctx, "CreateTicket", req)
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
	other := req
	other.Subject = "another subject"
	var t Ticket
	err := workflow.ExecuteActivity(ctx, "CreateTicket", other).Get(ctx, &t)
	out := SecondCall{Result: oncekey.Label(t, err)}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		out.ErrType = appErr.Type()
	}
	return out, nil
}

// A call at the same step with other arguments, made while the step's approval is pending, is
// refused at once as a fingerprint mismatch (the pending approval was asked for other
// arguments), not held until that approval is decided; nothing runs, and the first call still
// waits on its approval.
func TestE2EApprovalOtherArgumentsWhilePendingFailsFast(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "approval-other-args-pending", TaskQueue: e.tq, WorkflowExecutionTimeout: 2 * time.Minute},
		SameStepOtherArgumentsWorkflow)
	require.NoError(t, err)
	a := e.pendingApproval(t)
	require.NoError(t, e.c.SignalWorkflow(context.Background(), "approval-other-args-pending", "", "go", nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var second SecondCall
	require.NoError(t, run.Get(ctx, &second), "the second call is answered without a decision on the first's approval")
	require.Equal(t, oncekey.ErrTypeFingerprintMismatch, second.ErrType)
	require.Equal(t, oncekey.OutcomeConflict, second.Result.Status)
	require.False(t, second.Result.SafeToRepeat)
	requireRuns(t, l, 0, 0)
	require.Equal(t, oncekeystore.ApprovalPending, e.approval(t, a.OperationKey).Status, "the first call's approval still waits")
	require.NoError(t, e.replay(t, true, "approval-other-args-pending", reconcile.ApprovalWorkflowID(a.OperationKey)))
	require.NoError(t, e.c.TerminateWorkflow(context.Background(), reconcile.ApprovalWorkflowID(a.OperationKey), "", "test done"))
}

// TwoStepsWorkflow creates a ticket at step "a", waits for the signal "go", then creates one at
// step "b", and returns what the model would read of the second.
func TwoStepsWorkflow(ctx workflow.Context) (oncekey.ToolResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	if err := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "a"), "CreateTicket", req).Get(ctx, nil); err != nil {
		return oncekey.ToolResult{}, err
	}
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
	var t Ticket
	err := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "b"), "CreateTicket", req).Get(ctx, &t)
	return oncekey.Label(t, err), nil
}

// A tool gets an approval policy while a workflow that has called it runs: the workflow's
// replay has fixed its version without the approval wait, so its next call of the tool is
// scheduled without asking, and the worker refuses it (nothing runs) rather than let it through.
func TestE2EApprovalAddedToARunningWorkflowFailsClosed(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	e.w.Stop()
	start := func(p oncekey.Policy) {
		reg := oncekey.NewRegistry()
		require.NoError(t, reg.Set(l.CreateTicket, p))
		plugin, err := worker.NewPlugin(worker.Options{Store: e.store, Registry: reg})
		require.NoError(t, err)
		c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: []client.Plugin{plugin}})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		w := sdkworker.New(c, e.tq, sdkworker.Options{})
		w.RegisterWorkflow(TwoStepsWorkflow)
		w.RegisterActivity(l.CreateTicket)
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
		e.w = w
	}
	start(oncekey.Policy{Effect: oncekey.Effectful})
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "approval-added", TaskQueue: e.tq, WorkflowExecutionTimeout: time.Minute}, TwoStepsWorkflow)
	require.NoError(t, err)
	// The first step completed (not only its effect: stopping the worker between the effect and
	// the completion would cancel the attempt), so the second step is the one the new policy meets.
	require.Eventually(t, func() bool {
		for _, ev := range e.history(t, "approval-added").Events {
			if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED {
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond)
	e.w.Stop()
	start(approvalPolicy(0))
	require.NoError(t, e.c.SignalWorkflow(context.Background(), "approval-added", "", "go", nil))
	var tr oncekey.ToolResult
	require.NoError(t, run.Get(testCtx(t), &tr))
	require.Equal(t, oncekey.OutcomeRejected, tr.Status)
	require.Equal(t, oncekey.NextAsk, tr.NextAction)
	requireRuns(t, l, 1, 1)
	// The worker asked (it writes the request for any call that needs approval), but this run
	// does not wait for it: it keeps its earlier behaviour, and the call is refused.
	res, err := e.approvals(t).ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{})
	require.NoError(t, err)
	require.Len(t, res.Approvals, 1)
	require.Equal(t, oncekeystore.ApprovalPending, res.Approvals[0].Status)
	require.NotEmpty(t, res.Approvals[0].Token)
}

// hideApprovals is a store that keeps no approvals.
type hideApprovals struct{ oncekeystore.Store }

// A worker whose registry asks for approval over a store that keeps none does not start, with
// an error naming the store and the tool.
func TestPluginRefusesApprovalWithoutApprovalStore(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Temporal dev server")
	}
	t.Parallel()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(newLedger().CreateTicket, approvalPolicy(0)))
	store := hideApprovals{memstore.New(nil)}
	opts := worker.Options{Store: store, Registry: reg}
	plugin, err := worker.NewPlugin(opts)
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	w := sdkworker.New(c, "oncekey-e2e-"+t.Name(), sdkworker.Options{})
	w.RegisterWorkflow(TicketWorkflow)
	err = w.Start()
	require.Error(t, err)
	require.ErrorIs(t, err, worker.ErrConfig)
	require.Contains(t, err.Error(), "CreateTicket")
	require.Contains(t, err.Error(), "systemtest_test.hideApprovals")
	if err == nil {
		w.Stop()
	}

	var r registryOnly
	require.ErrorIs(t, worker.Register(&r, opts), worker.ErrConfig)
	require.NoError(t, worker.Register(&r, worker.Options{Store: memstore.New(nil), Registry: reg}))
}

// registryOnly is a worker registry that registers nothing.
type registryOnly struct{ sdkworker.Registry }

func (*registryOnly) RegisterWorkflowWithOptions(any, workflow.RegisterOptions) {}
func (*registryOnly) RegisterActivityWithOptions(any, activity.RegisterOptions) {}

// On the dev server, a decision with a member reconcile.Decision does not have ("decidedBy", as
// a hand-written Temporal CLI input might have it) is refused by the update, naming it, and as a
// signal in the approval query; nothing is recorded, and the call still waits for a correct one.
func TestE2EApprovalDecisionWithUnknownMemberIsRefused(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.start(t, "approval-unknown-member", req, 10*time.Second)
	a := e.pendingApproval(t)
	id := reconcile.ApprovalWorkflowID(a.OperationKey)
	ctx := testCtx(t)
	bad := map[string]any{"decision": "approve", "tenant": "default", "decidedBy": "ada"}
	h, err := e.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: reconcile.DecideUpdateName,
		Args: []any{bad}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, reconcile.ErrTypeDecisionRefused, appErr.Type())
	require.Contains(t, appErr.Error(), `unknown member "decidedBy" (did you mean "decided_by"?)`)

	bad["request_id"] = "sig-1"
	require.NoError(t, e.c.SignalWorkflow(ctx, id, "", reconcile.DecideSignalName, bad))
	require.Eventually(t, func() bool {
		rep, err := reconcile.QueryApproval(ctx, e.c, a.OperationKey)
		return err == nil && rep.LastInvalidRequestID == "sig-1"
	}, 20*time.Second, 100*time.Millisecond)
	rep, err := reconcile.QueryApproval(ctx, e.c, a.OperationKey)
	require.NoError(t, err)
	require.Contains(t, rep.LastInvalidSignal, `unknown member "decidedBy"`)
	require.Equal(t, oncekeystore.ApprovalPending, e.approval(t, a.OperationKey).Status)
	requireRuns(t, l, 0, 0)

	e.approve(t, a.OperationKey, "ada")
	require.NoError(t, run.Get(ctx, nil))
	require.Equal(t, "ada", e.approval(t, a.OperationKey).DecidedBy)
	requireRuns(t, l, 1, 1)
	require.NoError(t, e.replay(t, true, "approval-unknown-member", id))
}
