package systemtest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/internal/workflows"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// Tests of the trust rule: everything oncekey decides is derived from what the tool's body
// receives and from requests the worker itself made. The attacker here can write to the
// namespace (start workflows, run a workflow worker of their own, send signals and updates), but
// not to the store.

// headerCopier is a workflow worker interceptor that is not oncekey's: it puts the given header
// fields on every activity its workflows schedule, as an attacker copies an approved call's
// oncekey headers from its history.
type headerCopier struct {
	tinterceptor.WorkerInterceptorBase
	fields map[string]*commonpb.Payload
}

func (h *headerCopier) InterceptWorkflow(ctx workflow.Context, next tinterceptor.WorkflowInboundInterceptor) tinterceptor.WorkflowInboundInterceptor {
	return &copierInbound{WorkflowInboundInterceptorBase: tinterceptor.WorkflowInboundInterceptorBase{Next: next}, h: h}
}

type copierInbound struct {
	tinterceptor.WorkflowInboundInterceptorBase
	h *headerCopier
}

func (c *copierInbound) Init(outbound tinterceptor.WorkflowOutboundInterceptor) error {
	return c.Next.Init(&copierOutbound{WorkflowOutboundInterceptorBase: tinterceptor.WorkflowOutboundInterceptorBase{Next: outbound}, h: c.h})
}

type copierOutbound struct {
	tinterceptor.WorkflowOutboundInterceptorBase
	h *headerCopier
}

func (c *copierOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if hdr := tinterceptor.WorkflowHeader(ctx); hdr != nil {
		for k, v := range c.h.fields {
			hdr[k] = v
		}
	}
	return c.Next.ExecuteActivity(ctx, activityType, args...)
}

// ForgedCallWorkflow schedules CreateTicket with in on the activity worker's task queue, once.
func ForgedCallWorkflow(ctx workflow.Context, in TicketRequest, activityQueue string) (Ticket, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: activityQueue, StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var t Ticket
	err := workflow.ExecuteActivity(ctx, "CreateTicket", in).Get(ctx, &t)
	return t, err
}

// attacker starts a workflow worker without oncekey's interceptor on a task queue of its own,
// putting fields on the activities it schedules, and returns a client to start its workflows.
func (e *e2e) attacker(t *testing.T, fields map[string]*commonpb.Payload) (client.Client, string) {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := e.tq + "-attacker"
	w := sdkworker.New(c, tq, sdkworker.Options{Interceptors: []tinterceptor.WorkerInterceptor{&headerCopier{fields: fields}}})
	w.RegisterWorkflow(ForgedCallWorkflow)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return c, tq
}

// oncekeyHeaders returns the oncekey headers the workflow side writes for a call of CreateTicket
// at step "create_ticket" with in, in tenant "default"; args false leaves out the arguments.
func oncekeyHeaders(t *testing.T, in TicketRequest, args bool) map[string]*commonpb.Payload {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	fields := map[string]*commonpb.Payload{}
	var err error
	fields[wire.HeaderStepID], err = dc.ToPayload("create_ticket")
	require.NoError(t, err)
	fields[wire.HeaderTenant], err = dc.ToPayload("default")
	require.NoError(t, err)
	if args {
		doc, err := oncekey.CanonicalArgs([]any{in})
		require.NoError(t, err)
		fields[wire.HeaderArgs], err = dc.ToPayload(json.RawMessage(doc))
		require.NoError(t, err)
	}
	return fields
}

// futureCall returns the operation key and fingerprint of CreateTicket at step "create_ticket"
// of workflow id with in, as the worker derives them.
func futureCall(t *testing.T, p oncekey.Policy, id string, in TicketRequest) (key, fp string) {
	t.Helper()
	doc, err := oncekey.CanonicalArgs([]any{in})
	require.NoError(t, err)
	op := oncekey.Operation{Namespace: "default", Tenant: "default", WorkflowID: id, StepID: "create_ticket",
		Tool: "CreateTicket", ActivityType: "CreateTicket", Args: []any{in}, ArgsJSON: doc}
	key, err = oncekey.Key(p, op)
	require.NoError(t, err)
	fp, err = oncekey.KeyedFingerprint(p, op, nil)
	require.NoError(t, err)
	return key, fp
}

var evilReq = TicketRequest{Customer: "mallory", Subject: "refund 99999 on Y-1", RequestID: "r-evil"}

// Issue 24, 1: a workflow worker without the interceptor schedules the tool with an approved
// call's oncekey headers but other real input. The worker derives the call from the input the
// body would receive, finds the header disagrees, and refuses it before anything is claimed: the
// body does not run under the approval given for other arguments.
func TestE2EHeaderOfAnApprovedCallWithOtherInputIsRefused(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	const id = "trust-args"
	// The approved call: asked, then its workflow ends before it runs it; a person approves.
	run := e.start(t, id, req, 10*time.Second)
	a := e.pendingApproval(t)
	require.NoError(t, e.c.TerminateWorkflow(context.Background(), id, run.GetRunID(), "the approved call never runs"))
	e.approve(t, a.OperationKey, "alice")
	requireRuns(t, l, 0, 0)

	// The same workflow ID, run by the attacker's worker with the approved call's headers and
	// other real input.
	c, tq := e.attacker(t, oncekeyHeaders(t, req, true))
	forged, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: tq, WorkflowExecutionTimeout: time.Minute},
		ForgedCallWorkflow, evilReq, e.tq)
	require.NoError(t, err)
	err = forged.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "the forged call is refused")
	require.Equal(t, oncekey.ErrTypeArgsMismatch, appErr.Type(), appErr.Error())
	require.True(t, appErr.NonRetryable())
	require.Contains(t, detail(err), "without oncekey's interceptor")
	requireRuns(t, l, 0, 0)
	_, err = e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: a.OperationKey})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound, "nothing was claimed")
}

// Issue 24, 2: an approval workflow started by hand for a future call's key and fingerprint,
// with a made-up summary, authorises nothing: it says no worker asked, a person's approval sent
// to it lands nowhere, and the real call waits for a request of its own, showing the summary the
// worker derives, and runs once that one is approved.
func TestE2EForgedApprovalWorkflowAuthorisesNothing(t *testing.T) {
	l := newLedger()
	p := approvalPolicy(0)
	e := setupE2E(t, l, p)
	const id = "trust-forged"
	key, fp := futureCall(t, p, id, req)
	forged, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: reconcile.ApprovalWorkflowID(key), TaskQueue: e.tq, WorkflowExecutionTimeout: time.Minute,
	}, reconcile.ApprovalWorkflowName, decision.ApprovalInput{
		Tenant: "default", OperationKey: key, Tool: "CreateTicket", Fingerprint: fp, WorkflowID: id, StepID: "create_ticket",
		Summary: "ticket for acme: a spare toner", Timeout: time.Hour, Retention: time.Hour,
	})
	require.NoError(t, err)
	// A person approves what the forged workflow shows (as soon as it waits, if it ever does).
	_, _ = reconcile.Decide(context.Background(), e.c, key, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "alice"})
	err = forged.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "the forged approval workflow ends without a decision")
	require.Equal(t, activities.ErrTypeNoWorkerRequest, appErr.Type(), appErr.Error())
	require.Contains(t, appErr.Error(), "no worker asked for approval of "+key)
	_, err = e.approvals(t).GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound, "the forged workflow wrote no request")

	// The real call: the worker asks, with its own summary; nothing runs before it is approved.
	run := e.start(t, id, req, 10*time.Second)
	a := e.pendingApproval(t)
	require.Equal(t, key, a.OperationKey)
	require.Equal(t, "ticket for acme: printer on fire", a.Summary)
	require.NotEmpty(t, a.Token)
	rep, err := reconcile.QueryApproval(context.Background(), e.c, key)
	require.NoError(t, err)
	require.Equal(t, a.Summary, rep.Summary, "the approval workflow shows the worker's summary")
	requireRuns(t, l, 0, 0)
	e.approve(t, key, "alice")
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	requireRuns(t, l, 1, 1)
}

// Issue 24, 3: a call of the same key with other arguments, scheduled around the interceptor
// and refused for want of approval, leaves nothing that blocks the legitimate call: no operation
// record, and once its own request is denied, the real call is asked for, approved and runs
// exactly once.
func TestE2ERefusedCallDoesNotBlockTheApprovedCall(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	const id = "trust-refused"
	c, tq := e.attacker(t, oncekeyHeaders(t, evilReq, false))
	forged, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: tq, WorkflowExecutionTimeout: time.Minute},
		ForgedCallWorkflow, evilReq, e.tq)
	require.NoError(t, err)
	err = forged.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "the call without approval is refused")
	require.Contains(t, []string{oncekey.ErrTypeApproval, oncekey.ErrTypeApprovalPending}, appErr.Type(), appErr.Error())
	requireRuns(t, l, 0, 0)
	key, _ := futureCall(t, approvalPolicy(0), id, req)
	_, err = e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound, "the refused call left no operation record")
	// Its request, if the worker made one, shows what it would have done; a person denies it.
	if ap, err := e.approvals(t).GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key}); err == nil {
		require.Equal(t, "ticket for mallory: refund 99999 on Y-1", ap.Summary)
		_, err := e.approvals(t).DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: "default", OperationKey: key,
			Episode: ap.Episode, Token: ap.Token, Status: oncekeystore.ApprovalDenied, DecidedBy: "alice", Reason: "not ours", Retention: time.Hour})
		require.NoError(t, err)
	}

	// The real call, same workflow ID and step: asked, approved, run once.
	run := e.start(t, id, req, 10*time.Second)
	a := e.pendingApproval(t)
	require.Equal(t, key, a.OperationKey)
	require.Equal(t, "ticket for acme: printer on fire", a.Summary)
	e.approve(t, key, "alice")
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	requireRuns(t, l, 1, 1)
}

// Issue 24, F1: a request nobody waits on holds the key no longer than its deadline. A workflow
// worker without the interceptor schedules the tool with other arguments under the legitimate
// call's key: the worker writes a pending request for them and refuses, and no approval workflow
// is ever started to time it out or to take a denial. Past its deadline (the store's clock) the
// store reads it as timed out, and the legitimate call asks anew, is approved and runs once.
func TestE2EAbandonedRequestHoldsTheKeyOnlyUntilItsDeadline(t *testing.T) {
	require.Equal(t, workflows.TimeoutDecider, oncekeystore.ApprovalTimeoutDecider, "a timeout reads the same, recorded or read")
	l := newLedger()
	p := approvalPolicy(6 * time.Second) // the legitimate call's request has as long to be approved
	e := setupE2E(t, l, p)
	const id = "trust-abandoned"
	c, tq := e.attacker(t, oncekeyHeaders(t, evilReq, false))
	forged, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: tq, WorkflowExecutionTimeout: time.Minute},
		ForgedCallWorkflow, evilReq, e.tq)
	require.NoError(t, err)
	err = forged.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "the call without approval is refused")
	require.Equal(t, oncekey.ErrTypeApprovalPending, appErr.Type(), appErr.Error())
	requireRuns(t, l, 0, 0)

	key, _ := futureCall(t, p, id, req)
	_, evilFP := futureCall(t, p, id, evilReq)
	held := e.approval(t, key)
	require.Equal(t, oncekeystore.ApprovalPending, held.Status)
	require.Equal(t, evilFP, held.Fingerprint, "the key holds a request for the attacker's arguments")
	_, err = e.c.DescribeWorkflow(context.Background(), reconcile.ApprovalWorkflowID(key), "")
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf, "no approval workflow waits on it: nothing would ever time it out or take a denial")

	// Its deadline passes with nobody deciding: it reads as timed out.
	require.Eventually(t, func() bool { return e.approval(t, key).Status == oncekeystore.ApprovalTimedOut },
		30*time.Second, 100*time.Millisecond, "the request never timed out after its deadline %s", held.Deadline)
	out := e.approval(t, key)
	require.Equal(t, oncekeystore.ApprovalTimeoutDecider, out.DecidedBy)
	require.True(t, out.DecidedAt.Equal(held.Deadline), "timed out at its deadline")
	waiting, err := e.approvals(t).ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending})
	require.NoError(t, err)
	require.Empty(t, waiting.Approvals, "nothing is shown as waiting for a person")

	// The real call, same workflow ID and step: asked anew, approved, run once.
	run := e.start(t, id, req, 10*time.Second)
	a := e.pendingApproval(t)
	require.Equal(t, key, a.OperationKey)
	require.Equal(t, held.Episode+1, a.Episode)
	require.Equal(t, "ticket for acme: printer on fire", a.Summary)
	e.approve(t, key, "alice")
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	requireRuns(t, l, 1, 1)
}
