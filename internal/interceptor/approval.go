package interceptor

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/approvaledit"
	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/failure"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// approvalChangeID is the workflow.GetVersion change ID of approvals on the workflow side.
// Histories recorded before it schedule the call at once; version 1 derived the request in the
// workflow and started the approval workflow before it scheduled the call (first, kept for the
// histories that recorded it); approvalByWorkerVersion schedules the call, and waits for a
// decision only on a request the worker made (viaWorker).
const (
	approvalChangeID        = "oncekey-approval"
	approvalByWorkerVersion = 2
)

// maxApprovalRounds bounds how many times one call is scheduled again after an approval: a call
// the worker keeps asking about (its summary changed under it) fails with the worker's refusal
// rather than loop.
const maxApprovalRounds = 3

// Details.Reason of the approval refusals, which Label reads to tell a denial (stop) from the
// others (ask for approval).
const (
	reasonApprovalDenied   = "approval denied"
	reasonApprovalTimedOut = "approval timed out"
	reasonNotApproved      = "not approved"
	reasonChangesRequested = "changes requested"
	// reasonApprovalReplaced: the call's approval was replaced by an edit, and this call (a
	// repeat, or one that joined the approval workflow) does not have the edited arguments.
	reasonApprovalReplaced = "approval replaced"
)

// approvalCall is a call whose policy asks for approval, on the workflow side: it asks, waits
// for the decision, and schedules the call only once approved.
type approvalCall struct {
	scheduled
	// edit schedules the call a person approved with edited arguments doc (canonical JSON) in
	// place of the call whose operation key is original.
	edit func(ctx workflow.Context, doc json.RawMessage, original string) workflow.Future
}

// approvalRequest is what the workflow side derives for an approval, recorded in history in one
// SideEffect: whether the call needs approval, its operation key, its fingerprint and the summary
// the approver sees; Err when they cannot be derived.
type approvalRequest struct {
	Required    bool   `json:"required,omitempty"`
	Key         string `json:"key,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Summary     string `json:"summary,omitempty"`
	Err         string `json:"err,omitempty"`
}

// viaWorker returns the future of the call: it schedules the call with schedule at once, and
// when the worker refuses it with oncekey.ErrTypeApprovalPending (the worker wrote a request for
// approval, with the summary it derived, and did not run the body), it starts the key's approval
// workflow (or joins the one that runs), waits for the decision and, approved, schedules the call
// again: the worker then finds the approval and runs it. Denied, timed out, or ended without a
// decision, the future fails as for first; every other outcome of an attempt is the call's.
func (a *approvalCall) viaWorker(ctx workflow.Context, schedule func(workflow.Context) workflow.Future) workflow.Future {
	// The first attempt is scheduled now, so commands keep the order the workflow code gave them.
	fut := schedule(ctx)
	f, s := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		for round := 0; ; round++ {
			err := fut.Get(gctx, nil)
			req, pending := pendingRequest(err)
			if !pending || round >= maxApprovalRounds {
				s.Chain(fut)
				return
			}
			in, tq := a.input(gctx, req)
			out, err := a.decision(gctx, tq, in, req)
			if err != nil {
				s.SetError(err)
				return
			}
			if out.Status == oncekeystore.ApprovalReplaced {
				workflow.GetLogger(gctx).Info("oncekey: approved with edited arguments; scheduling the edit", "tool", a.name,
					"key_prefix", keyPrefix(req.Key), "edit_key_prefix", keyPrefix(out.EditedAs), "decided_by", out.DecidedBy)
				a.settleEdit(gctx, s, a.edit(gctx, out.Arguments, req.Key), out.Arguments)
				return
			}
			workflow.GetLogger(gctx).Info("oncekey: approved; scheduling the call again", "tool", a.name, "key_prefix", keyPrefix(req.Key), "decided_by", out.DecidedBy)
			fut = schedule(gctx)
		}
	})
	return f
}

// settleEdit settles s with the outcome of fut, the call scheduled with a person's edited
// arguments doc: its result labelled edited (wire.MetadataReason), with the arguments it ran
// with and the members the person changed (but those Policy.Exclude leaves out of the call's
// identity), or its error as it is.
func (a *approvalCall) settleEdit(ctx workflow.Context, s workflow.Settable, fut workflow.Future, doc json.RawMessage) {
	var raw converter.RawValue
	if err := fut.Get(ctx, &raw); err != nil {
		s.SetError(err)
		return
	}
	if p := raw.Payload(); p != nil && p.GetMetadata()[wire.MetadataOutcome] != nil {
		inner := proto.Clone(p).(*commonpb.Payload)
		inner.Metadata[wire.MetadataReason] = []byte(oncekey.ReasonEdited)
		inner.Metadata[wire.MetadataArguments] = doc
		var changed []string
		for _, m := range approvaledit.ChangedMembers(a.toolArgs, doc) {
			if !slices.Contains(a.policy.Exclude, m) { // an excluded member is not part of the call
				changed = append(changed, m)
			}
		}
		inner.Metadata[wire.MetadataChanged] = []byte(strings.Join(changed, ","))
		raw = converter.NewRawValue(inner)
	}
	a.settleRaw(s, raw)
}

// pendingRequest returns the request a worker made for an attempt it refused with
// oncekey.ErrTypeApprovalPending (from the error's Details), and whether err is that refusal.
func pendingRequest(err error) (approvalRequest, bool) {
	if !failure.Is(err, failure.ApprovalPending) {
		return approvalRequest{}, false
	}
	d, ok := oncekey.ErrorDetails(err)
	if !ok || d.Approval == nil || d.OperationKey == "" {
		return approvalRequest{}, false
	}
	return approvalRequest{Required: true, Key: d.OperationKey, Fingerprint: d.Approval.Fingerprint, Summary: d.Approval.Summary}, true
}

// first returns the future of the call: it asks for approval (when ApprovalPolicy.Required says
// so) and schedules the call with schedule once approved; denied, timed out or refused, the
// future fails and nothing is scheduled.
func (a *approvalCall) first(ctx workflow.Context, schedule func(workflow.Context) workflow.Future) workflow.Future {
	req, err := recorded(ctx, a.request(ctx))
	if err == nil && req.Err != "" {
		err = errors.New(req.Err)
	}
	if err != nil {
		return failedFuture(ctx, workflowError(fmt.Sprintf("oncekey: %s was not scheduled: %v", a.name, err),
			oncekey.ErrTypeConfig, nil, oncekey.Details{Tenant: a.tenant, Tool: a.name, Outcome: oncekey.OutcomeRejected, Reason: "approval not asked"}))
	}
	if !req.Required {
		return schedule(ctx)
	}
	in, tq := a.input(ctx, req)
	f, s := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		out, err := a.decision(gctx, tq, in, req)
		if err != nil {
			s.SetError(err)
			return
		}
		if out.Status == oncekeystore.ApprovalReplaced {
			a.settleEdit(gctx, s, a.edit(gctx, out.Arguments, req.Key), out.Arguments)
			return
		}
		workflow.GetLogger(gctx).Info("oncekey: approved; scheduling the call", "tool", a.name, "key_prefix", keyPrefix(req.Key), "decided_by", out.DecidedBy)
		s.Chain(schedule(gctx))
	})
	return f
}

// request returns the function that derives the approval request. A panic in the user's code it
// runs (ApprovalPolicy.Required or Summary, a Key function, an argument's MarshalJSON) is an error.
func (a *approvalCall) request(ctx workflow.Context) func() approvalRequest {
	info := workflow.GetInfo(ctx)
	op := oncekey.Operation{
		Namespace: info.Namespace, Tenant: a.tenant, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		StepID: a.stepID, Tool: a.name, ActivityType: a.tool, Args: a.args, ArgsJSON: a.toolArgs,
	}
	return func() (req approvalRequest) {
		hook := "ApprovalPolicy.Required"
		defer func() {
			if p := recover(); p != nil {
				req = approvalRequest{Err: fmt.Sprintf("%s panicked: %v; nothing was asked, and the call is not retried (the bug is in that code, not in the tool)", hook, p)}
			}
		}()
		if f := a.policy.Approval.Required; f != nil && !f(op) {
			return approvalRequest{}
		}
		hook = "Policy.Key"
		key, err := keyWithoutActivityID(a.policy, op)
		if errors.Is(err, errKeyNeedsActivityID) {
			return approvalRequest{Err: "approval needs a key that does not depend on the activity ID: give the call a step ID (oncekey.WithStepID)"}
		}
		if err != nil {
			return approvalRequest{Err: err.Error()}
		}
		hook = "an argument's MarshalJSON (encoding the arguments for the fingerprint)"
		fp, err := oncekey.KeyedFingerprint(a.policy, op, a.w.root.opts.FingerprintSecret)
		if err != nil {
			return approvalRequest{Err: err.Error()}
		}
		hook = "ApprovalPolicy.Summary"
		// The worker derives its summary with the same function (call.prepare): the approval
		// authorises the call only when the two agree.
		return approvalRequest{Required: true, Key: key, Fingerprint: fp, Summary: approvaledit.ApprovalSummary(a.policy.Approval, op)}
	}
}

// decision starts the key's approval workflow on task queue tq with in (or joins the one that
// runs), waits for its decision on req and returns it; an error when it did not approve
// (a.refusal), or when it could not be waited for. It is started from a disconnected context, like
// a reconciliation: cancelling the workflow neither cancels the request nor keeps it from
// starting, and the approval outlives it.
func (a *approvalCall) decision(ctx workflow.Context, tq string, in decision.ApprovalInput, req approvalRequest) (reconcile.ApprovalOutput, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	child := a.start(dctx, tq, in)
	out, err := a.wait(ctx, dctx, child, tq, req)
	if err == nil {
		err = a.refusal(req, out)
	}
	return out, err
}

// input returns the approval workflow's input and the task queue it runs on (Options.
// ReconcileTaskQueue, or the workflow's).
func (a *approvalCall) input(ctx workflow.Context, req approvalRequest) (decision.ApprovalInput, string) {
	info := workflow.GetInfo(ctx)
	tq := a.w.root.decisionTaskQueue(ctx)
	in := decision.ApprovalInput{
		Tenant: a.tenant, OperationKey: req.Key, Tool: a.name, Fingerprint: req.Fingerprint,
		WorkflowID: info.WorkflowExecution.ID, StepID: a.stepID, Summary: req.Summary,
		Timeout: a.policy.Approval.RequestTimeout(), Retention: a.policy.Retention, SearchAttributes: a.w.root.opts.SearchAttributes,
	}
	if e := a.policy.Approval.Escalation; e != nil {
		in.EscalateAfter, in.EscalateTo = in.Timeout-e.Timeout, e.To
	}
	return in, tq
}

// start starts the approval workflow of in.OperationKey from ctx; its parent's close leaves it
// running.
func (a *approvalCall) start(ctx workflow.Context, tq string, in decision.ApprovalInput) workflow.ChildWorkflowFuture {
	return approvalChild(tq, in).start(ctx, in)
}

// wait waits for the approval workflow's decision: its result, or, when the key's approval
// workflow was already running (another call waits on the same approval), that workflow's
// decision as the store has it once it closes; an approval the store holds for another
// fingerprint is answered at once, so a call of other arguments is refused without waiting. A
// cancelled workflow stops waiting; the approval workflow goes on without it.
func (a *approvalCall) wait(ctx, dctx workflow.Context, child workflow.ChildWorkflowFuture, tq string, req approvalRequest) (reconcile.ApprovalOutput, error) {
	key := req.Key
	id := reconcile.ApprovalWorkflowID(key)
	if err := child.GetChildWorkflowExecution().Get(dctx, nil); err != nil {
		if !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			return reconcile.ApprovalOutput{}, a.undecided(key, err)
		}
		res, err := awaitWorkflow(ctx, tq, "oncekey: waits for the approval of "+a.name+" ("+id+")",
			activities.AwaitInput{WorkflowID: id, Approval: activities.RecordRef{Tenant: a.tenant, OperationKey: key, Tool: a.name}, Fingerprint: req.Fingerprint})
		switch {
		case err != nil && ctx.Err() != nil:
			return reconcile.ApprovalOutput{}, temporal.NewCanceledError()
		case err != nil:
			return reconcile.ApprovalOutput{}, a.undecided(key, err)
		case res.Err != "" || res.Approval == nil:
			return reconcile.ApprovalOutput{}, a.undecided(key, errors.New(res.Err))
		}
		return *res.Approval, nil
	}
	var out reconcile.ApprovalOutput
	done, cerr := childResult(ctx, dctx, child, &out)
	switch {
	case !done:
		return out, temporal.NewCanceledError()
	case cerr != nil:
		return out, a.undecided(key, cerr)
	}
	return out, nil
}

// undecided is the call's error when its approval workflow ended without a decision. Ended by
// a refusal that asking again meets the same way (undecidedRefusal), it says what to fix;
// otherwise (terminated, timed out, the approval gone) to call again, which asks anew.
func (a *approvalCall) undecided(key string, err error) error {
	id := reconcile.ApprovalWorkflowID(key)
	var msg string
	switch undecidedRefusal(err) {
	case failure.ForeignRecord:
		msg = fmt.Sprintf("oncekey: the approval workflow %s refused to ask for %s (%v); nothing ran, and calling it again is refused the same way. "+
			"The key's approval is another tool's or namespace's: give this call a step ID of its own (oncekey.WithStepID), or see whose it is with `%s`",
			id, a.name, err, shell.Show(key).Flag("--tenant", a.tenant))
	case failure.Config:
		msg = fmt.Sprintf("oncekey: the approval workflow %s could not ask for %s (%v); nothing ran, and calling it again fails the same way. "+
			"Fix what the error names on the workers of the approval workflow's task queue, then call it again",
			id, a.name, err)
	default:
		msg = fmt.Sprintf("oncekey: the approval workflow %s of %s ended without a decision (%v); nothing ran: call it again to ask anew",
			id, a.name, err)
	}
	return workflowError(msg, oncekey.ErrTypeApproval, err,
		oncekey.Details{Tenant: a.tenant, OperationKey: key, Tool: a.name, Outcome: oncekey.OutcomeRejected, Reason: reasonNotApproved})
}

// undecidedRefusal returns the kind of the application error in err's chain that asking again
// cannot get past: failure.ForeignRecord (the key's approval is another namespace's or tool's)
// or failure.Config (a store without approvals, a request the store refuses as given);
// failure.None for anything else.
func undecidedRefusal(err error) failure.Kind {
	for err != nil {
		row, appErr := failure.Of(err)
		if appErr == nil {
			return failure.None
		}
		switch row.Kind {
		case failure.ForeignRecord, failure.Config:
			return row.Kind
		}
		err = appErr.Unwrap()
	}
	return failure.None
}

// refusal returns nil for an approved call of req's fingerprint, else the call's error: a
// fingerprint mismatch (the key's approval was asked for other arguments) or the approval
// refused (denied, timed out), both non-retryable.
func (a *approvalCall) refusal(req approvalRequest, out reconcile.ApprovalOutput) error {
	d := oncekey.Details{Tenant: a.tenant, OperationKey: req.Key, Tool: a.name, Outcome: oncekey.OutcomeRejected}
	if out.FingerprintMismatch || (out.Fingerprint != "" && out.Fingerprint != req.Fingerprint) {
		e := &oncekey.FingerprintMismatchError{OperationKey: req.Key, Tool: a.name, Stored: out.Fingerprint, Got: req.Fingerprint}
		d.Reason = "fingerprint mismatch"
		return workflowError(e.Error(), oncekey.ErrTypeFingerprintMismatch, nil, d)
	}
	if out.Status == oncekeystore.ApprovalApproved || (out.Status == oncekeystore.ApprovalReplaced && len(out.Arguments) > 0 && a.edit != nil) {
		return nil
	}
	d.ModelMessage = out.Message
	switch out.Status {
	case oncekeystore.ApprovalDenied:
		d.Reason = reasonApprovalDenied
		if out.ChangesRequested {
			d.Reason = reasonChangesRequested
		}
	case oncekeystore.ApprovalReplaced:
		d.Reason = reasonApprovalReplaced
	case oncekeystore.ApprovalTimedOut:
		d.Reason = reasonApprovalTimedOut
	default:
		d.Reason = reasonNotApproved
	}
	e := &oncekey.ApprovalRequiredError{Tenant: a.tenant, OperationKey: req.Key, Tool: a.name, Status: out.Status,
		Episode: out.Episode, DecidedBy: out.DecidedBy, Reason: out.Reason, EditedAs: out.EditedAs}
	return workflowError(e.Error(), oncekey.ErrTypeApproval, nil, d)
}
