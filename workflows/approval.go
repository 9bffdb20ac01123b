package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/activities"
	"github.com/oncekey/oncekey/reconcile"
)

// TimeoutDecider is who an approval nobody decided within its timeout is recorded as decided by.
const TimeoutDecider = "oncekey (approval timeout)"

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
// meanwhile, and after reconcile.MaxInvalidSignals invalid signals it continues as new.
//
// Approval is the workflow RegisterWithOptions registers as reconcile.ApprovalWorkflowName.
func Approval(ctx workflow.Context, in reconcile.ApprovalInput) (reconcile.ApprovalOutput, error) {
	a := &approver{in: in, report: reconcile.ApprovalReport{
		State: reconcile.ApprovalStateRequesting, Tenant: in.Tenant, OperationKey: in.OperationKey, Tool: in.Tool,
		WorkflowID: in.WorkflowID, StepID: in.StepID, Summary: in.Summary,
	}}
	if c := in.Continued; c != nil {
		a.created = c.Created
		a.report.InvalidSignals = c.InvalidSignals
		a.report.LastInvalidSignal, a.report.LastInvalidRequestID = c.LastInvalidSignal, c.LastInvalidRequestID
	}
	a.decidedF, a.decidedS = workflow.NewFuture(ctx)
	a.actx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypeInvalid, activities.ErrTypeForeignRecord, oncekey.ErrTypeConfig},
		},
	})
	if err := workflow.SetQueryHandlerWithOptions(ctx, reconcile.ApprovalQueryName, func() (reconcile.ApprovalReport, error) {
		return a.report, nil
	}, workflow.QueryHandlerOptions{Description: approvalQueryDescription}); err != nil {
		return reconcile.ApprovalOutput{}, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, reconcile.DecideUpdateName, a.update, workflow.UpdateHandlerOptions{
		Validator:   a.validate,
		Description: "Approve or deny the call: a reconcile.Decision (decision approve or deny, tenant, episode, reason); answers with the approval's output.",
	}); err != nil {
		return reconcile.ApprovalOutput{}, err
	}
	out, err := a.run(ctx)
	// An update being answered finishes before the workflow does.
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	return out, err
}

// approver is one run of the approval workflow.
type approver struct {
	in     reconcile.ApprovalInput
	actx   workflow.Context
	report reconcile.ApprovalReport
	// created: the episode was pending when this workflow (or the run it continues) read it, so
	// its decision is this workflow's (in histories of the earlier protocol: this workflow asked
	// the episode).
	created bool
	// token is the token of the worker's request the run waits on, which a decision names.
	token string
	// busy: a decision is being recorded (by the update handler or the signal loop).
	busy bool
	// decided is set once a decision or a terminal error settled the run.
	decided    bool
	decidedOut reconcile.ApprovalOutput
	decidedErr error
	decidedF   workflow.Future
	decidedS   workflow.Settable
	// invalidThisRun counts the invalid signals of this run.
	invalidThisRun int
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
		out := ans.Output()
		out.FingerprintMismatch = true
		a.otherArguments = true
		a.setState(ctx, reconcile.ApprovalStateDecided)
		return out, nil
	}
	if ans.Status.Decided() {
		return a.done(ctx, ans, ""), nil
	}
	a.created = true
	return a.wait(ctx)
}

// take copies the approval's state into the query's report.
func (a *approver) take(ans activities.ApprovalAnswer) {
	r := &a.report
	r.Status, r.Episode, r.RequestedAt, r.Deadline = ans.Status, ans.Episode, ans.RequestedAt, ans.Deadline
	r.DecidedBy, r.DecidedAt, r.Reason = ans.DecidedBy, ans.DecidedAt, ans.Reason
}

// done settles the run with the decided answer; requestID is the Decision's that was recorded.
func (a *approver) done(ctx workflow.Context, ans activities.ApprovalAnswer, requestID string) reconcile.ApprovalOutput {
	a.take(ans)
	out := ans.Output()
	out.Created, out.RequestID = a.created, requestID
	// A refusal before the decision is no longer news once the approval is decided.
	a.report.LastInvalidSignal, a.report.LastInvalidRequestID = "", ""
	a.setState(ctx, reconcile.ApprovalStateDecided)
	workflow.GetLogger(ctx).Info("oncekey: approval decided", "tool", a.in.Tool, "key_prefix", prefix(a.in.OperationKey),
		"status", string(out.Status), "decided_by", out.DecidedBy)
	return out
}

// wait waits for a person's decision (the update handler's, or a signal) or the deadline.
func (a *approver) wait(ctx workflow.Context) (reconcile.ApprovalOutput, error) {
	a.setState(ctx, reconcile.ApprovalStateWaiting)
	signals := workflow.GetSignalChannelWithOptions(ctx, reconcile.DecideSignalName, workflow.SignalChannelOptions{Description: decideSignalDescription})
	deadline := workflow.NewTimer(ctx, max(a.report.Deadline.Sub(workflow.Now(ctx)), time.Millisecond))
	for {
		var (
			raw     converter.RawValue
			got     bool
			expired bool
		)
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) {
			// A RawValue always decodes, so the SDK never drops a signal here; it is decoded below.
			c.Receive(ctx, &raw)
			got = true
		})
		sel.AddFuture(a.decidedF, func(workflow.Future) {})
		sel.AddFuture(deadline, func(workflow.Future) { expired = true })
		sel.Select(ctx)
		if a.decided {
			return a.decidedOut, a.decidedErr
		}
		if expired {
			// A decision being recorded by the update handler finishes first: it may decide.
			if err := workflow.Await(ctx, func() bool { return !a.busy }); err != nil {
				return reconcile.ApprovalOutput{}, err
			}
			if !a.decided {
				a.record(ctx, oncekey.ApprovalTimedOut, TimeoutDecider,
					fmt.Sprintf("nobody decided within %s", a.in.Timeout), "")
			}
			return a.decidedOut, a.decidedErr
		}
		if !got {
			continue
		}
		if a.takeSignal(ctx, raw) {
			return a.decidedOut, a.decidedErr
		}
		if a.invalidThisRun >= reconcile.MaxInvalidSignals {
			// Signals already delivered are taken before the run ends; a valid one still decides.
			if drainSignals(signals, func(raw converter.RawValue) bool { return a.takeSignal(ctx, raw) }) {
				return a.decidedOut, a.decidedErr
			}
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return reconcile.ApprovalOutput{}, err
			}
			if a.decided {
				return a.decidedOut, a.decidedErr
			}
			next := a.in
			next.Continued = &reconcile.ApprovalContinued{
				Created:              a.created,
				InvalidSignals:       a.report.InvalidSignals,
				LastInvalidSignal:    a.report.LastInvalidSignal,
				LastInvalidRequestID: a.report.LastInvalidRequestID,
			}
			workflow.GetLogger(ctx).Warn("oncekey: continuing the approval as new after too many invalid signals", "tool", a.in.Tool,
				"key_prefix", prefix(a.in.OperationKey), "invalid_signals", a.report.InvalidSignals)
			return reconcile.ApprovalOutput{}, workflow.NewContinueAsNewError(ctx, reconcile.ApprovalWorkflowName, next)
		}
	}
}

// takeSignal handles one signal payload: a valid decision is recorded, anything else is refused
// in the query's report. It reports whether the run is decided.
func (a *approver) takeSignal(ctx workflow.Context, raw converter.RawValue) bool {
	d, reason := signalJSON[reconcile.Decision](raw, strictSignals(ctx), "decision", "reconcile.Decision")
	if reason == "" {
		reason = a.invalid(d)
	}
	if reason == "" {
		if reason = a.record(ctx, d.Decision.Status(), d.DecidedBy, d.Reason, d.RequestID); reason == "" {
			return true
		}
	}
	a.report.LastInvalidSignal, a.report.LastInvalidRequestID = reason, d.RequestID
	a.report.InvalidSignals++
	a.invalidThisRun++
	workflow.SetCurrentDetails(ctx, a.details())
	workflow.GetLogger(ctx).Warn("oncekey: ignored an invalid approval decision signal", "tool", a.in.Tool, "key_prefix", prefix(a.in.OperationKey), "reason", reason)
	return a.decided
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

// record writes a decision with the DecideApproval activity. It returns why the decision was
// refused ("" when the run is decided: by this decision, by one found recorded, or ended by an
// error).
func (a *approver) record(ctx workflow.Context, status oncekey.ApprovalStatus, by, reason, requestID string) string {
	a.busy = true
	defer func() { a.busy = false }()
	var ans activities.ApprovalAnswer
	err := workflow.ExecuteActivity(a.actx, activities.DecideApprovalName, activities.DecideApprovalInput{
		Tenant: a.in.Tenant, OperationKey: a.in.OperationKey, Tool: a.in.Tool, Episode: a.report.Episode, Token: a.token,
		Status: status, DecidedBy: by, Reason: reason, Retention: a.in.Retention,
	}).Get(ctx, &ans)
	if err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeInvalid && status != oncekey.ApprovalTimedOut {
			return appErr.Error()
		}
		a.decide(reconcile.ApprovalOutput{}, err)
		return ""
	}
	if ans.Conflict {
		requestID = "" // decided before this decision, by another
	}
	a.decide(a.done(ctx, ans, requestID), nil)
	return ""
}

// decide settles the run with out or err.
func (a *approver) decide(out reconcile.ApprovalOutput, err error) {
	if a.decided {
		return
	}
	a.decided, a.decidedOut, a.decidedErr = true, out, err
	a.decidedS.Set(nil, nil)
}

// validate is the DecideUpdateName update's validator: it refuses, with nothing written to
// history, a decision the workflow cannot take now or could never record, or whose JSON is not
// exactly a reconcile.Decision (a member it does not have, such as "decidedBy" for
// "decided_by", is named in the refusal, not dropped).
func (a *approver) validate(ctx workflow.Context, raw json.RawMessage) error {
	d, reason := decodeStrict[reconcile.Decision](raw, "the update", "decision", "reconcile.Decision")
	if reason != "" {
		return temporal.NewNonRetryableApplicationError(reason, reconcile.ErrTypeDecisionRefused, nil)
	}
	switch {
	case a.decided || a.report.State == reconcile.ApprovalStateDecided:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("nothing to decide: the approval is already %s", a.report.Status), reconcile.ErrTypeNotPending, nil)
	case a.busy:
		return temporal.NewNonRetryableApplicationError("another decision is being recorded; check the approval query, then try again if it was refused", reconcile.ErrTypeNotPending, nil)
	case a.report.State != reconcile.ApprovalStateWaiting:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("nothing to decide yet: the approval workflow is %s", a.report.State), reconcile.ErrTypeNotPending, nil)
	}
	if reason := a.invalid(d); reason != "" {
		return temporal.NewNonRetryableApplicationError(reason, reconcile.ErrTypeDecisionRefused, nil)
	}
	return nil
}

// update is the DecideUpdateName update's handler: it records an accepted decision and answers
// with the run's output. A decision the store refuses fails the update (type
// reconcile.ErrTypeDecisionRefused) and the workflow keeps waiting.
//
// It takes the raw JSON, as the validator does, and decodes it as the SDK decoded the
// reconcile.Decision it took before: the validator refused anything else before it was accepted,
// and an update accepted before the validator was strict replays as it ran.
func (a *approver) update(ctx workflow.Context, raw json.RawMessage) (reconcile.ApprovalOutput, error) {
	var d reconcile.Decision
	if err := json.Unmarshal(raw, &d); err != nil {
		return reconcile.ApprovalOutput{}, temporal.NewNonRetryableApplicationError("the decision does not decode into reconcile.Decision: "+err.Error(), reconcile.ErrTypeDecisionRefused, nil)
	}
	if refused := a.record(ctx, d.Decision.Status(), d.DecidedBy, d.Reason, d.RequestID); refused != "" {
		return reconcile.ApprovalOutput{}, temporal.NewNonRetryableApplicationError(refused, reconcile.ErrTypeDecisionRefused, nil)
	}
	return a.decidedOut, a.decidedErr
}
