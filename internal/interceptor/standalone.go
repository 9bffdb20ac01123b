package interceptor

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/failure"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/reconcile"
)

// A standalone activity is one a client started with client.ExecuteActivity, outside any
// workflow. There is no workflow side: no step ID or tenant header, no retry loop, no parent to
// start a decision workflow. The worker does what the workflow side does for a workflow's call:
//
//   - the key: oncekey.Operation.Standalone, so the key strategies scope it by the activity ID the
//     worker sees in the activity's info (never a header: oncekey's workflow-side headers on a
//     standalone activity are refused, standaloneHeaders);
//   - an unknown outcome: the worker starts the reconciliation workflow of the key itself and waits
//     for its decision while the attempt lasts, then answers as the decision says through the
//     claim: applied gives the stored result (labelled applied, reason confirmed), not applied
//     runs the body again, failed gives the failure (reconcileStandalone). An attempt that ends
//     before the decision fails with the IndeterminateOutcome error, which reaches the caller
//     because the body and the wait stop a margin before the attempt's deadline (answerInTime);
//     the reconciliation goes on, and a later client.ExecuteActivity under the same ID (or a
//     retry) finds what it decided;
//   - an approval: the worker writes the request (the approval gate, as for any call), starts the
//     approval workflow of the key itself and fails the call at once with the non-retryable
//     oncekey.ApprovalPending error whose details name the request; the caller waits for that
//     workflow (reconcile.ApprovalWorkflowID) and starts the activity again under the same ID
//     (startApproval).
//
// A call scheduled by a workflow never comes here.

// standalone reports whether the call is a standalone activity (not one a workflow scheduled,
// and not a Nexus operation, whose info names no workflow either).
func (c *call) standalone() bool {
	return c.nexusKey == "" && !c.info.IsWorkflowActivity() && !c.info.IsLocalActivity
}

// standaloneActivityID returns the activity ID of a standalone activity, "" for any other call.
func (c *call) standaloneActivityID() string {
	if c.standalone() {
		return c.info.ActivityID
	}
	return ""
}

// standaloneHeaders refuses oncekey's workflow-side headers on a standalone activity: only
// oncekey's workflow side sets them, so on a call no workflow made they come from whoever
// started it, and the key and tenant are the worker's to derive.
func standaloneHeaders(ctx context.Context) error {
	h := tinterceptor.Header(ctx)
	for _, name := range []string{wire.HeaderStepID, wire.HeaderTenant, wire.HeaderFirstActivityID} {
		if h[name] != nil {
			return fmt.Errorf("a standalone activity (client.ExecuteActivity) carries the header %s, which only oncekey's workflow side sets: "+
				"its operation key comes from its activity ID and its tenant from Options.Tenant; remove the client interceptor that sets the header", name)
		}
	}
	return nil
}

// maxStandaloneRounds bounds how many times one attempt of a standalone activity goes through
// the claim after a reconciliation decided (not applied runs the body again, which may end
// unknown again).
const maxStandaloneRounds = 3

// standaloneAnswerMargin is how long before its attempt's deadline a standalone activity stops
// its body and its wait for a decision (answerInTime), at most: a quarter of the attempt's time
// when that is shorter.
const standaloneAnswerMargin = 2 * time.Second

// answerInTime returns ctx with a deadline standaloneAnswerMargin (or a quarter of the attempt's
// time) before the attempt's, for a standalone call: its answer, the non-retryable
// IndeterminateOutcome error of an outcome nobody decided yet, must reach the server before the
// server times the attempt out, else the caller gets Temporal's start-to-close timeout instead.
// A workflow's call needs no margin: the workflow side reads a timeout as an unknown outcome.
func (c *call) answerInTime(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	margin := standaloneAnswerMargin
	if total := c.info.Deadline.Sub(c.info.StartedTime); total > 0 {
		margin = min(margin, total/4)
	}
	return context.WithDeadline(ctx, deadline.Add(-margin))
}

// standaloneStartTimeout bounds the start of a decision workflow from a standalone activity, from
// a context detached from the attempt's (which may be over: a timed-out body).
const standaloneStartTimeout = 15 * time.Second

// settleStandalone is what follows a standalone call's error err: a reconciliation of an unknown
// outcome, or the start of an approval workflow; any other error is returned as it is.
func (c *call) settleStandalone(ctx context.Context, in *tinterceptor.ExecuteActivityInput, err error) (any, error) {
	if c.key == "" {
		return nil, err
	}
	switch row, _ := failure.Of(err); {
	case row.Kind == failure.ApprovalPending:
		return nil, c.startApproval(ctx, err)
	case row.Class == failure.Reconcile && c.handOver:
		return c.reconcileStandalone(ctx, in, err)
	}
	return nil, err
}

// reconcileStandalone starts (or joins) the reconciliation workflow of the call's unknown outcome
// and, while the attempt lasts, waits for its decision; then it answers through the claim (see the
// comment at the top of this file). cause is the IndeterminateOutcome error, returned when there
// is no decision to answer with.
func (c *call) reconcileStandalone(ctx context.Context, in *tinterceptor.ExecuteActivityInput, cause error) (any, error) {
	for round := 1; ; round++ {
		rin, tq := c.reconcileInput(cause)
		run, err := c.startDecision(ctx, reconcileChild(c.key, tq, rin), rin)
		if err != nil {
			activity.GetLogger(ctx).Warn("oncekey: the reconciliation of a standalone activity's unknown outcome did not start; find it with `"+
				listUnknownCommand(c.op.Tenant, c.root.storeSchema())+"`", "tool", c.tool, "key_prefix", keyPrefix(c.key), "error", err)
			return nil, cause
		}
		var out reconcile.Output
		if err := c.waitDecision(ctx, run, &out); err != nil {
			// The attempt ended first, or the reconciliation ended without a decision (the record
			// stays unknown; the next call under the activity ID starts a new one).
			return nil, cause
		}
		activity.GetLogger(ctx).Info("oncekey: reconciliation decided a standalone activity's unknown outcome", "tool", c.tool,
			"key_prefix", keyPrefix(c.key), "outcome", out.Outcome)
		c.outcome, c.handOver, c.confirm = "", false, out.Outcome == reconcile.Applied
		res, err := c.run(ctx, in)
		if err == nil || !c.handOver || round == maxStandaloneRounds {
			return res, err
		}
		cause = err
	}
}

// reconcileInput returns the input of the reconciliation workflow of the call's key and the task
// queue it runs on (Options.ReconcileTaskQueue, or the activity's).
func (c *call) reconcileInput(cause error) (decision.Input, string) {
	tq := c.root.opts.ReconcileTaskQueue
	if tq == "" {
		tq = c.info.TaskQueue
	}
	in := decision.Input{
		Tenant:            c.op.Tenant,
		OperationKey:      c.key,
		Tool:              c.tool,
		StepID:            c.op.Step(),
		Reason:            operatorText(cause),
		EscalationTimeout: c.root.opts.EscalationTimeout,
		MetricsTenant:     c.root.opts.MetricsTenantTag,
		SearchAttributes:  c.root.opts.SearchAttributes,
	}
	if c.root.opts.Registry.Routed(c.info.ActivityType.Name) {
		in.ActivityType = c.info.ActivityType.Name // the Route's result type applies to the tool it named
	}
	return in, tq
}

// startApproval starts (or joins) the approval workflow of the request the approval gate wrote,
// named in refusal's details, and returns refusal: the caller acts on the decision (see the
// comment at the top of this file). A workflow that does not start is logged; the request then
// waits in the store until its timeout, and the next call under the activity ID starts it.
func (c *call) startApproval(ctx context.Context, refusal error) error {
	d, ok := oncekey.ErrorDetails(refusal)
	if !ok || d.Approval == nil {
		return refusal
	}
	tq := c.root.opts.ReconcileTaskQueue
	if tq == "" {
		tq = c.info.TaskQueue
	}
	timeout := c.policy.Approval.RequestTimeout()
	ain := decision.ApprovalInput{
		Tenant: c.op.Tenant, OperationKey: c.key, Tool: c.tool, Fingerprint: d.Approval.Fingerprint,
		StepID: c.op.Step(), Summary: d.Approval.Summary,
		Timeout: timeout, Retention: c.policy.Retention, SearchAttributes: c.root.opts.SearchAttributes,
	}
	if _, err := c.startDecision(ctx, approvalChild(tq, ain), ain); err != nil {
		activity.GetLogger(ctx).Warn("oncekey: the approval workflow of a standalone activity did not start; calling it again under the same activity ID starts it",
			"tool", c.tool, "key_prefix", keyPrefix(c.key), "error", err)
	}
	return refusal
}

// startDecision starts the decision workflow w with input in from the worker, or finds the one
// that runs under its ID (every call blocked on the key waits for the same decision). It starts
// from a context detached from the attempt's, so an attempt that is already over still hands its
// key over.
func (c *call) startDecision(ctx context.Context, w child, in any) (client.WorkflowRun, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), standaloneStartTimeout)
	defer cancel()
	opts := client.StartWorkflowOptions{
		ID:                       w.id,
		TaskQueue:                w.tq,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            w.summary,
		StaticDetails:            w.details,
	}
	if len(w.attrs) > 0 {
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(w.attrs...)
	}
	return activity.GetClient(ctx).ExecuteWorkflow(sctx, opts, w.name, in)
}

// waitDecision waits for run's result into out while the attempt lasts, heartbeating for it
// (heartbeats.keepAlive) so that it does not time out on its HeartbeatTimeout.
func (c *call) waitDecision(ctx context.Context, run client.WorkflowRun, out any) error {
	done := make(chan error, 1)
	go func() { done <- run.Get(ctx, out) }()
	t := time.NewTicker(c.bodyHeartbeatInterval())
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			c.hb.keepAlive(ctx)
		}
	}
}
