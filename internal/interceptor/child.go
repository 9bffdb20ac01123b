package interceptor

import (
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/mdtext"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/reconcile"
)

// child is the decision workflow of one operation key as the workflow side starts it: the
// reconciliation workflow of an unknown outcome (effectfulLoop) or the approval workflow of a
// call (approvalCall). Both run on the decision kernel (workflows/decision.go); the workflow side
// only starts one and awaits its result.
type child struct {
	// name is the registered workflow type, id its workflow ID, tq its task queue.
	name, id, tq string
	// summary and details are what the Temporal UI shows for it before it runs (Markdown).
	summary, details string
	// attrs are its search attributes at start; nil sets none.
	attrs []temporal.SearchAttributeUpdate
}

// reconcileChild is the reconciliation workflow of key on task queue tq for input in. What the
// Temporal UI shows of it before it runs (its summary and details) says what it settles and how
// a person decides; its current details follow. Values from the workflow go through mdtext.Text.
func reconcileChild(key, tq string, in decision.Input) child {
	c := child{
		name: reconcile.WorkflowName, id: reconcile.WorkflowID(key), tq: tq,
		summary: fmt.Sprintf("oncekey: did %s's effect land? Step %s of %s", mdtext.Text(in.Tool), mdtext.Text(in.StepID), mdtext.Text(in.WorkflowID)),
		details: fmt.Sprintf("The outcome of %s (tenant %s, operation key %s) could not be proven: %s\n\n"+
			"This workflow settles it: the record, the tool's receipt lookup, or a person's decision "+
			"(`%s` with --applied, --not-applied or --failed, or the %s update). "+
			"Its current details say where it stands.", mdtext.Text(in.Tool), mdtext.Text(in.Tenant), key, mdtext.Text(in.Reason),
			shell.Resolve(key).Flag("--tenant", in.Tenant), reconcile.UpdateName),
	}
	if in.WorkflowID == "" {
		// A standalone activity's (its step is "activity/<activity ID>").
		c.summary = fmt.Sprintf("oncekey: did %s's effect land? %s", mdtext.Text(in.Tool), mdtext.Text(in.StepID))
	}
	if in.SearchAttributes {
		c.attrs = decision.SearchAttributes(in, reconcile.StateInspecting, time.Time{})
	}
	return c
}

// approvalChild is the approval workflow of in.OperationKey on task queue tq, with the summary
// and details of approvalTexts and, with in.SearchAttributes, its search attributes.
func approvalChild(tq string, in decision.ApprovalInput) child {
	c := child{name: reconcile.ApprovalWorkflowName, id: reconcile.ApprovalWorkflowID(in.OperationKey), tq: tq}
	c.summary, c.details = approvalTexts(in)
	if in.SearchAttributes {
		c.attrs = decision.ApprovalSearchAttributes(in, decision.SearchStatusRequestingApproval, time.Time{})
	}
	return c
}

// approvalTexts returns the approval workflow's summary and details in the Temporal UI. Every
// call of the operation starts a run, a repeat of a decided one too, which reads the decision and
// asks nobody: they say what the run does either way, and its current details say which it did.
func approvalTexts(in decision.ApprovalInput) (summary, details string) {
	key := in.OperationKey
	summary = fmt.Sprintf("oncekey: approval of %s: %s", mdtext.Text(in.Tool), mdtext.Text(in.Summary))
	details = fmt.Sprintf("The approval of %s (tenant %s, operation key %s): %s\n\n"+
		"It asks a person to approve or deny the call before it runs, or reads the decision already recorded for the key "+
		"(a repeat of an approved or denied call asks nobody). Its current details say which. While it waits, "+
		"approve with `%s`, deny with `%s`, or send the %s update; "+
		"nobody deciding within %s denies it.",
		mdtext.Call(in.Tool, in.StepID, in.WorkflowID), mdtext.Text(in.Tenant), key, mdtext.Text(in.Summary),
		shell.Decide("approve", key, in.Tenant),
		shell.Decide("deny", key, in.Tenant).Placeholder("--reason", "<why>"),
		reconcile.DecideUpdateName, in.Timeout)
	return summary, details
}

// start starts c with input in from ctx; its parent's close leaves it running.
func (c child) start(ctx workflow.Context, in any) workflow.ChildWorkflowFuture {
	opts := workflow.ChildWorkflowOptions{
		WorkflowID:        c.id,
		TaskQueue:         c.tq,
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
		StaticSummary:     c.summary,
		StaticDetails:     c.details,
	}
	if len(c.attrs) > 0 {
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(c.attrs...)
	}
	return workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), c.name, in)
}

// childResult waits for the result of the child f, started from sctx (a context disconnected
// from ctx), into out, or until ctx is cancelled: done is false when the workflow was cancelled
// first (the child goes on without it), else err is the child's.
func childResult(ctx, sctx workflow.Context, f workflow.ChildWorkflowFuture, out any) (done bool, err error) {
	cancelled := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(f, func(f workflow.Future) { done, err = true, f.Get(sctx, out) })
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) { cancelled = true })
	for !done && !cancelled {
		sel.Select(ctx)
	}
	return done, err
}
