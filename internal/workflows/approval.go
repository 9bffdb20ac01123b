package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/failure"
	"github.com/oncekey/oncekey/metrics"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// TimeoutDecider is who an approval nobody decided within its timeout is recorded as decided by:
// the stores' oncekeystore.ApprovalTimeoutDecider, so a timeout reads the same whether the workflow's
// timer or the store's deadline wrote it.
const TimeoutDecider = oncekeystore.ApprovalTimeoutDecider

// Approval waits for the decision on the request for approval of in.OperationKey that a worker
// made. It reads the request from the store (the RequestApproval activity, which writes nothing):
// with none a worker made it fails at once (activities.ErrTypeNoWorkerRequest), so a decision
// sent to an approval workflow started by anyone else authorises nothing; the person is shown
// the request's summary, as the worker derived it, whatever the input says. An approval found
// decided is returned at once, one asked for other arguments than in.Fingerprint is returned as
// a fingerprint mismatch. A pending one waits for a
// reconcile.Decision: the reconcile.DecideUpdateName update (validated before it is accepted,
// answered with the output) or the reconcile.DecideSignalName signal (decoded by the workflow
// itself, so a malformed one is refused in the query's LastInvalidSignal like any invalid one), or
// its deadline (the store's, from the request), which records it timed out, decided by
// TimeoutDecider. The decision is written to the store (the DecideApproval activity, fenced by the
// episode; one found already decided is returned as it is). It answers reconcile.ApprovalQueryName
// meanwhile, and after decision.MaxInvalidSignals invalid signals it continues as new.
//
// Approval is the workflow RegisterWithOptions registers as reconcile.ApprovalWorkflowName.
func Approval(ctx workflow.Context, in decision.ApprovalInput) (reconcile.ApprovalOutput, error) {
	a := &approver{in: in, report: reconcile.ApprovalReport{
		State: reconcile.ApprovalStateRequesting, Tenant: in.Tenant, OperationKey: in.OperationKey, Tool: in.Tool,
		WorkflowID: in.WorkflowID, StepID: in.StepID, Summary: in.Summary,
	}}
	if c := in.Continued; c != nil {
		a.created = c.Created
		a.report.InvalidSignals = c.InvalidSignals
		a.report.LastInvalidSignal, a.report.LastInvalidRequestID = c.LastInvalidSignal, c.LastInvalidRequestID
	}
	a.k = decider[reconcile.Decision, reconcile.ApprovalOutput]{
		protocol: approvalProtocol, tool: in.Tool, key: in.OperationKey,
		invalid: a.invalid,
		record: func(ctx workflow.Context, d reconcile.Decision) string {
			return a.record(ctx, d.Decision.Status(), d.DecidedBy, d.Reason, d.RequestID, &d)
		},
		requestID: func(d reconcile.Decision) string { return d.RequestID },
		settled:   func() bool { return a.report.State == reconcile.ApprovalStateDecided },
		outcome:   func() string { return string(a.report.Status) },
		waiting: func() (bool, string) {
			return a.report.State == reconcile.ApprovalStateWaiting, string(a.report.State)
		},
		details:        a.details,
		invalidSignals: &a.report.InvalidSignals, lastInvalid: &a.report.LastInvalidSignal, lastInvalidRequestID: &a.report.LastInvalidRequestID,
	}
	a.actx = decisionActivities(ctx, activities.ErrTypeInvalid, activities.ErrTypeForeignRecord, oncekey.ErrTypeConfig)
	return a.k.serve(ctx, func() (reconcile.ApprovalReport, error) { return a.report, nil }, a.run)
}

// approver is one run of the approval workflow: the protocol of an approval on the decision
// kernel.
type approver struct {
	k      decider[reconcile.Decision, reconcile.ApprovalOutput]
	in     decision.ApprovalInput
	actx   workflow.Context
	report reconcile.ApprovalReport
	// created: the episode was pending when this workflow (or the run it continues) read it, so
	// its decision is this workflow's (in histories of the earlier protocol: this workflow asked
	// the episode).
	created bool
	// token is the token of the worker's request the run waits on, which a decision names.
	token string
	// otherArguments: the key's approval was asked for other arguments.
	otherArguments bool
	// upserted is the SearchAttributeStatus value last set (ApprovalInput.SearchAttributes);
	// waitingSince is when the approval was asked, once the run waits for it.
	upserted     string
	waitingSince time.Time
}

func (a *approver) run(ctx workflow.Context) (reconcile.ApprovalOutput, error) {
	a.setState(ctx, reconcile.ApprovalStateRequesting)
	var ans activities.ApprovalAnswer
	if err := workflow.ExecuteActivity(a.actx, activities.RequestApprovalName, a.in).Get(ctx, &ans); err != nil {
		return reconcile.ApprovalOutput{}, err
	}
	a.created = a.created || ans.Created
	a.take(ans)
	// The request is the worker's: its summary, not the input's, is what a person decides on.
	a.token = ans.Token
	if ans.Token != "" {
		a.report.Summary = ans.Summary
	}
	if ans.Fingerprint != a.in.Fingerprint {
		// The key's approval is another call's: nothing is asked or decided for this one.
		out := ans.ApprovalOutput
		out.FingerprintMismatch = true
		a.otherArguments = true
		a.setState(ctx, reconcile.ApprovalStateDecided)
		return out, nil
	}
	if ans.Status.Decided() {
		return a.done(ctx, ans, ""), nil
	}
	a.created = true
	a.setState(ctx, reconcile.ApprovalStateWaiting)
	if a.in.EscalateAfter > 0 {
		// Only inputs with an escalation start this timer: histories without one replay unchanged.
		workflow.Go(ctx, a.escalate)
	}
	return a.k.wait(ctx, decisionWait[reconcile.ApprovalOutput]{
		hasDeadline: true, deadline: a.report.Deadline,
		expire: func(ctx workflow.Context) (reconcile.ApprovalOutput, error) {
			a.k.busy = true
			a.record(ctx, oncekeystore.ApprovalTimedOut, TimeoutDecider, a.timeoutReason(), "", nil)
			a.k.busy = false
			return a.k.out, a.k.err
		},
		continueAsNew: func(ctx workflow.Context) error {
			next := a.in
			next.Continued = &decision.ApprovalContinued{
				Created:              a.created,
				InvalidSignals:       a.report.InvalidSignals,
				LastInvalidSignal:    a.report.LastInvalidSignal,
				LastInvalidRequestID: a.report.LastInvalidRequestID,
			}
			workflow.GetLogger(ctx).Warn("oncekey: continuing the approval as new after too many invalid signals", "tool", a.in.Tool,
				"key_prefix", prefix(a.in.OperationKey), "invalid_signals", a.report.InvalidSignals)
			return workflow.NewContinueAsNewError(ctx, reconcile.ApprovalWorkflowName, next)
		},
	})
}

// take copies the approval's state into the query's report.
func (a *approver) take(ans activities.ApprovalAnswer) {
	r := &a.report
	r.Status, r.Episode, r.RequestedAt, r.Deadline = ans.Status, ans.Episode, ans.RequestedAt, ans.Deadline
	r.DecidedBy, r.DecidedAt, r.Reason = ans.DecidedBy, ans.DecidedAt, ans.Reason
	r.Message, r.ChangesRequested, r.EditedAs = ans.Message, ans.ChangesRequested, ans.EditedAs
}

// done settles the run with the decided answer; requestID is the Decision's that was recorded.
func (a *approver) done(ctx workflow.Context, ans activities.ApprovalAnswer, requestID string) reconcile.ApprovalOutput {
	a.take(ans)
	out := ans.ApprovalOutput
	out.Created, out.RequestID = a.created, requestID
	// A refusal before the decision is no longer news once the approval is decided.
	a.report.LastInvalidSignal, a.report.LastInvalidRequestID = "", ""
	a.setState(ctx, reconcile.ApprovalStateDecided)
	workflow.GetLogger(ctx).Info("oncekey: approval decided", "tool", a.in.Tool, "key_prefix", prefix(a.in.OperationKey),
		"status", string(out.Status), "decided_by", out.DecidedBy)
	return out
}

// invalid returns why d cannot decide the pending approval, or "".
func (a *approver) invalid(d reconcile.Decision) string {
	if err := d.Validate(); err != nil {
		return err.Error()
	}
	if d.Tenant != a.in.Tenant {
		return fmt.Sprintf("the decision names tenant %q but the approval belongs to another tenant", d.Tenant)
	}
	if d.Episode != 0 && d.Episode != a.report.Episode {
		return fmt.Sprintf("the decision is for episode %d, but the pending request is episode %d: nothing was decided; "+
			"decide for episode %d if it still needs a decision", d.Episode, a.report.Episode, a.report.Episode)
	}
	return ""
}

// record writes a decision with the DecideApproval activity; d is the person's decision, whose
// message for the model and edited arguments go with it (nil for a timeout). It returns why the
// decision was refused ("" when the run is decided: by this decision, by one found recorded, or
// ended by an error).
func (a *approver) record(ctx workflow.Context, status oncekeystore.ApprovalStatus, by, reason, requestID string, d *reconcile.Decision) string {
	in := activities.DecideApprovalInput{
		Tenant: a.in.Tenant, OperationKey: a.in.OperationKey, Tool: a.in.Tool, Episode: a.report.Episode, Token: a.token,
		Status: status, DecidedBy: by, Reason: reason, Retention: a.in.Retention, SignatureRefusedType: true,
	}
	if d != nil {
		in.Message, in.ChangesRequested, in.Arguments, in.Signature = d.Message, d.Decision == reconcile.RequestChanges, d.Arguments, d.Signature
	}
	var ans activities.ApprovalAnswer
	err := workflow.ExecuteActivity(a.actx, activities.DecideApprovalName, in).Get(ctx, &ans)
	if err != nil {
		if row, appErr := failure.Of(err); refusedFor(row.Kind) && status != oncekeystore.ApprovalTimedOut {
			return a.k.refusedBy(row.Kind, appErr)
		}
		a.k.decide(reconcile.ApprovalOutput{}, err)
		return ""
	}
	if !ans.Conflict && ans.Waiting() {
		// A partial approval: recorded, and the request waits for another signer.
		out := ans.ApprovalOutput
		out.Created, out.RequestID = a.created, requestID
		a.k.answered, a.k.hasAnswer = out, true
		workflow.GetLogger(ctx).Info("oncekey: partial approval recorded; waiting for another signer", "tool", a.in.Tool,
			"key_prefix", prefix(a.in.OperationKey), "signers", out.Signers, "signers_required", out.SignersRequired)
		return ""
	}
	if ans.Conflict {
		requestID = "" // decided before this decision, by another
	}
	if !ans.Conflict && a.k.decided && a.k.err == nil && a.k.out.RequestID == "" {
		// Two decisions accepted at once each ran DecideApproval: this one was written, but the
		// other's answer (a conflict with this very write) completed first and settled the run
		// without a request ID. The output names the decision that was recorded, so its sender
		// is told it was, and the other that it lost.
		a.k.out.RequestID = requestID
		return ""
	}
	a.k.decide(a.done(ctx, ans, requestID), nil)
	return ""
}

// timeoutReason is the reason a timeout is recorded with: how long nobody decided, and the
// escalation when there was one.
func (a *approver) timeoutReason() string {
	if e := a.report.Escalated; e != nil {
		return fmt.Sprintf("nobody decided within %s; escalated to %s at %s, nobody decided within %s more",
			a.in.EscalateAfter, e.To, stamp(e.At), a.in.Timeout-a.in.EscalateAfter)
	}
	return fmt.Sprintf("nobody decided within %s", a.in.Timeout)
}

// escalate waits until the request has waited ApprovalInput.EscalateAfter (from its request, on
// the store's clock as the deadline is) and, if it still waits, escalates it to EscalateTo: the
// query's report and the current details say so, the memo "oncekey_escalated" records it in
// history, and metrics.ApprovalsEscalated counts it. The request keeps waiting until its deadline.
func (a *approver) escalate(ctx workflow.Context) {
	if d := a.report.RequestedAt.Add(a.in.EscalateAfter).Sub(workflow.Now(ctx)); d > 0 {
		if err := workflow.Sleep(ctx, d); err != nil {
			return
		}
	}
	if a.k.decided || a.report.State != reconcile.ApprovalStateWaiting {
		return
	}
	e := &reconcile.ApprovalEscalated{To: a.in.EscalateTo, At: workflow.Now(ctx).UTC(),
		Reason: fmt.Sprintf("nobody decided within %s", a.in.EscalateAfter)}
	a.report.Escalated = e
	workflow.SetCurrentDetails(ctx, a.details())
	if err := workflow.UpsertMemo(ctx, map[string]any{"oncekey_escalated": e}); err != nil {
		workflow.GetLogger(ctx).Warn("oncekey: could not record the escalation in the memo", "error", err)
	}
	metrics.Tagged(workflow.GetMetricsHandler(ctx), a.in.Tool, a.in.Tenant, false).Counter(metrics.ApprovalsEscalated).Inc(1)
	workflow.GetLogger(ctx).Warn("oncekey: approval escalated", "tool", a.in.Tool, "key_prefix", prefix(a.in.OperationKey),
		"to", e.To, "reason", e.Reason)
}
