package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/failure"
	"github.com/oncekey/oncekey/metrics"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// ErrTypeEscalationTimeout is the application error type of a reconciliation that nobody
// resolved within its EscalationTimeout.
const ErrTypeEscalationTimeout = failure.TypeEscalationTimeout

// Registry is the part of a worker (or a plugin's or replayer's registry) Register needs.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Options configure the registration of the reconciliation and approval workflows.
type Options struct {
	// Registry supplies the tools' declared result types: the UpdateName update's validator
	// refuses an Applied result that does not decode into the tool's. Nil: the validator does not
	// check it (the RecordResolution activity still does, once the update is accepted).
	Registry *oncekey.Registry
	// VersioningBehavior is the workflow type's Worker Deployment Versioning behavior, which a
	// worker with deployment versioning on and no DefaultVersioningBehavior requires. Defaults to
	// workflow.VersioningBehaviorAutoUpgrade: a reconciliation can wait for days, longer than
	// a deployment should be kept alive for it; its changes go behind workflow.GetVersion.
	VersioningBehavior workflow.VersioningBehavior
}

// Register registers the reconciliation and approval workflows on r (see RegisterWithOptions) with
// default Options. Registering them twice on one worker is harmless.
func Register(r Registry) { RegisterWithOptions(r, Options{}) }

// RegisterWithOptions registers the reconciliation workflow on r as reconcile.WorkflowName and the
// approval workflow (Approval) as reconcile.ApprovalWorkflowName, both with o.VersioningBehavior.
// Registering them twice on one worker is harmless.
func RegisterWithOptions(r Registry, o Options) {
	if o.VersioningBehavior == workflow.VersioningBehaviorUnspecified {
		o.VersioningBehavior = workflow.VersioningBehaviorAutoUpgrade
	}
	reg := o.Registry
	r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in decision.Input) (reconcile.Output, error) {
		return reconcileWith(ctx, in, reg)
	}, workflow.RegisterOptions{Name: reconcile.WorkflowName, DisableAlreadyRegisteredCheck: true, VersioningBehavior: o.VersioningBehavior})
	r.RegisterWorkflowWithOptions(Approval, workflow.RegisterOptions{Name: reconcile.ApprovalWorkflowName, DisableAlreadyRegisteredCheck: true, VersioningBehavior: o.VersioningBehavior})
}

// minLeaseWait bounds how often a live claim is inspected again.
const minLeaseWait = time.Second

// Bounds of the wait between inspections while a late claim may still land: the wait starts at
// minClaimWait and doubles up to maxClaimWait, and never runs past Input.ClaimDeadline.
const (
	minClaimWait = time.Second
	maxClaimWait = time.Minute
)

// Reconcile settles the operation in.OperationKey. It inspects the record: no record settles
// NotApplied, once in.ClaimDeadline (if set) has passed; applied, released or failed records
// settle at once; a pending record with a live lease (a zombie attempt still running) is waited
// for; a pending record whose lease ran out is marked unknown. For an unknown record it runs the
// tool's Reconcile hook, if any, and otherwise waits for a Resolution: the reconcile.UpdateName
// update (validated before it is accepted, answered with the Output) or the reconcile.SignalName
// signal (decoded by the workflow itself, so a malformed one is refused in the status query's
// LastInvalidSignal like any invalid one), answering reconcile.QueryName meanwhile. The decision
// is written to the store and returned. A record past its retention (a tombstone) keeps no
// outcome: the workflow then fails with a non-retryable application error of type
// oncekey.ErrTypeExpired. With in.EscalationTimeout set, it fails with an application error of
// type ErrTypeEscalationTimeout when nobody decides in time. After decision.MaxInvalidSignals
// invalid signals it continues as new, keeping its escalation deadline.
//
// Reconcile is the workflow registered by Register, without a result-type check in the
// update's validator (RegisterWithOptions with Options.Registry has one).
func Reconcile(ctx workflow.Context, in decision.Input) (reconcile.Output, error) {
	return reconcileWith(ctx, in, nil)
}

// reconciler is one run of the reconciliation workflow: the protocol of a reconciliation on the
// decision kernel.
type reconciler struct {
	k      decider[reconcile.Resolution, reconcile.Output]
	in     decision.Input
	reg    *oncekey.Registry
	ref    activities.RecordRef
	actx   workflow.Context
	status reconcile.StatusReport
	// epoch is the unknown record's epoch at the last inspection.
	epoch int64
	// mh records the run's metrics; the workflow's handler records nothing while replaying.
	mh client.MetricsHandler
	// uiSet is set once setState has run.
	uiSet bool
	// settledBy is the metrics.TagSettledBy value of the decision (metrics.SettledByRecord
	// until a receipt lookup or a person decides).
	settledBy string
}

func reconcileWith(ctx workflow.Context, in decision.Input, reg *oncekey.Registry) (reconcile.Output, error) {
	r := &reconciler{
		in:  in,
		reg: reg,
		ref: activities.RecordRef{Tenant: in.Tenant, OperationKey: in.OperationKey, Tool: in.Tool},
		status: reconcile.StatusReport{
			State:         reconcile.StateInspecting,
			Tenant:        in.Tenant,
			OperationKey:  in.OperationKey,
			Tool:          in.Tool,
			WorkflowID:    in.WorkflowID,
			StepID:        in.StepID,
			Reason:        in.Reason,
			ClaimDeadline: in.ClaimDeadline,
		},
	}
	r.mh = metrics.Tagged(workflow.GetMetricsHandler(ctx), in.Tool, in.Tenant, in.MetricsTenant)
	r.settledBy = metrics.SettledByRecord
	if in.Continued == nil { // a run continued as new was counted when it started
		r.mh.Counter(metrics.ReconciliationsStarted).Inc(1)
	}
	if c := in.Continued; c != nil {
		r.status.InvalidSignals = c.InvalidSignals
		r.status.LastInvalidSignal, r.status.LastInvalidRequestID = c.LastInvalidSignal, c.LastInvalidRequestID
	}
	r.k = decider[reconcile.Resolution, reconcile.Output]{
		protocol: resolutionProtocol, tool: in.Tool, key: in.OperationKey,
		invalid:        r.invalid,
		check:          r.resultProblem,
		record:         r.record,
		requestID:      func(res reconcile.Resolution) string { return res.RequestID },
		settled:        func() bool { return r.status.State == reconcile.StateResolved },
		outcome:        func() string { return string(r.status.Outcome) },
		waiting:        func() (bool, string) { return r.status.State == reconcile.StateWaiting, string(r.status.State) },
		details:        r.details,
		invalidSignals: &r.status.InvalidSignals, lastInvalid: &r.status.LastInvalidSignal, lastInvalidRequestID: &r.status.LastInvalidRequestID,
	}
	r.actx = decisionActivities(ctx, activities.ErrTypeInvalid)
	return r.k.serve(ctx, func() (reconcile.StatusReport, error) { return r.status, nil }, r.run)
}

func (r *reconciler) done(ctx workflow.Context, out reconcile.Output) (reconcile.Output, error) {
	r.mh.WithTags(map[string]string{metrics.TagOutcome: string(out.Outcome), metrics.TagSettledBy: r.settledBy}).Counter(metrics.ReconciliationsSettled).Inc(1)
	if r.settledBy == metrics.SettledByPerson {
		r.mh.Timer(metrics.UnknownWait).Record(workflow.Now(ctx).Sub(r.status.WaitingSince))
	}
	r.status.Outcome = out.Outcome
	r.status.RecordStatus = settledStatus(r.status.RecordStatus, out.Outcome)
	// A refusal before the decision is no longer news once the operation is settled.
	r.status.LastInvalidSignal, r.status.LastInvalidRequestID = "", ""
	r.setState(ctx, reconcile.StateResolved)
	workflow.GetLogger(ctx).Info("oncekey: reconciled", "tool", r.in.Tool, "key_prefix", prefix(r.in.OperationKey), "outcome", string(out.Outcome), "resolved_by", out.ResolvedBy)
	return out, nil
}

func (r *reconciler) run(ctx workflow.Context) (reconcile.Output, error) {
	in := r.in
	// Inspect until the record is unknown (or settled).
	claimWait := minClaimWait
	for {
		r.setState(ctx, reconcile.StateInspecting)
		var rec activities.Inspection
		if err := workflow.ExecuteActivity(r.actx, activities.InspectName, r.ref).Get(ctx, &rec); err != nil {
			return reconcile.Output{}, err
		}
		r.status.RecordStatus = rec.Status
		r.epoch, r.status.Epoch = rec.Epoch, rec.Epoch
		if !rec.Found {
			if now := workflow.Now(ctx); now.Before(in.ClaimDeadline) {
				// The attempt handed over may not have claimed yet: wait for a late claim.
				r.setState(ctx, reconcile.StateWaitingForClaim)
				wait := min(claimWait, in.ClaimDeadline.Sub(now))
				claimWait = min(2*claimWait, maxClaimWait)
				if err := workflow.Sleep(ctx, wait); err != nil {
					return reconcile.Output{}, err
				}
				continue
			}
			// No claim was ever recorded: the tool's body never started, so nothing happened.
			return r.done(ctx, reconcile.Output{Outcome: reconcile.NotApplied, ResolvedBy: "oncekey", Note: "no claim was recorded for the key; the tool never ran"})
		}
		switch rec.Status {
		case oncekeystore.StatusApplied, oncekeystore.StatusReleased, oncekeystore.StatusFailed:
			out := activities.OutputOf(&oncekeystore.Record{
				Status: rec.Status, Result: rec.Result, Failure: []byte(rec.Failure),
				EffectReference: rec.EffectReference, ResolvedBy: rec.ResolvedBy, Note: rec.Note,
			})
			if out.ResolvedBy == "" {
				out.ResolvedBy = "oncekey"
			}
			return r.done(ctx, out)
		case oncekeystore.StatusExpired:
			// A tombstone keeps no outcome: what happened is unknown, and no decision can be recorded.
			return reconcile.Output{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("oncekey: the record of %s (key %s) is past its retention (a tombstone): its outcome is unknown and can no longer be resolved", in.Tool, in.OperationKey),
				oncekey.ErrTypeExpired, nil)
		case oncekeystore.StatusPending:
			if !rec.LeaseExpired {
				r.setState(ctx, reconcile.StateWaitingForLease)
				if err := workflow.Sleep(ctx, max(rec.LeaseRemaining, minLeaseWait)); err != nil {
					return reconcile.Output{}, err
				}
				continue
			}
			var after activities.Inspection
			if err := workflow.ExecuteActivity(r.actx, activities.MarkUnknownName, activities.MarkUnknownInput{
				RecordRef: r.ref, Epoch: rec.Epoch, Reason: "lease expired; owner gone: " + in.Reason,
			}).Get(ctx, &after); err != nil {
				return reconcile.Output{}, err
			}
			continue
		}
		break // unknown
	}

	// The tool's automatic receipt lookup, if it has one; a run continued as new has done it.
	if in.Continued == nil {
		if out, ok := r.lookupReceipt(ctx); ok {
			r.settledBy = metrics.SettledByReceipt
			return r.done(ctx, out)
		}
	}
	return r.wait(ctx)
}

// lookupReceipt runs the tool's receipt lookup; ok reports a decision.
func (r *reconciler) lookupReceipt(ctx workflow.Context) (reconcile.Output, bool) {
	in := r.in
	r.setState(ctx, reconcile.StateReceiptLookup)
	var receipt activities.ReceiptOutput
	rctx := workflow.WithActivityOptions(r.actx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 5,
			NonRetryableErrorTypes: []string{activities.ErrTypeInvalid},
		},
	})
	err := workflow.ExecuteActivity(rctx, activities.LookupReceiptName, activities.ReceiptInput{Request: oncekey.ReconcileRequest{
		Tenant: in.Tenant, OperationKey: in.OperationKey, Tool: in.Tool, WorkflowID: in.WorkflowID, StepID: in.StepID,
	}, Epoch: r.epoch}).Get(ctx, &receipt)
	if err != nil {
		workflow.GetLogger(ctx).Warn("oncekey: receipt lookup failed; waiting for a person", "tool", in.Tool, "key_prefix", prefix(in.OperationKey), "error", err)
		return reconcile.Output{}, false
	}
	return receipt.Output, receipt.Decided
}

// boundedInvalidChangeID is the workflow.GetVersion change ID under which a run that took
// decision.MaxInvalidSignals invalid signals continues as new. Histories recorded before it
// have no marker and replay without continuing.
const boundedInvalidChangeID = "oncekey-reconcile-bounded-invalid-signals"

// wait waits for a person's resolution: the update handler's decision, a signal, or the
// escalation timer.
func (r *reconciler) wait(ctx workflow.Context) (reconcile.Output, error) {
	in := r.in
	r.status.WaitingSince = workflow.Now(ctx)
	var deadline time.Time
	if in.EscalationTimeout > 0 {
		deadline = r.status.WaitingSince.Add(in.EscalationTimeout)
	}
	if c := in.Continued; c != nil {
		r.status.WaitingSince, deadline = c.WaitingSince, c.EscalationDeadline
	}
	r.setState(ctx, reconcile.StateWaiting)
	return r.k.wait(ctx, decisionWait[reconcile.Output]{
		hasDeadline: !deadline.IsZero(), deadline: deadline,
		expire: func(ctx workflow.Context) (reconcile.Output, error) {
			r.mh.Counter(metrics.ReconciliationsEscalated).Inc(1)
			return reconcile.Output{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("oncekey: nobody resolved the outcome of %s (key %s) within the escalation timeout of %s; the record stays unknown",
					in.Tool, in.OperationKey, in.EscalationTimeout), ErrTypeEscalationTimeout, nil)
		},
		bounded: func(ctx workflow.Context) bool {
			return workflow.GetVersion(ctx, boundedInvalidChangeID, workflow.DefaultVersion, 1) == 1
		},
		continueAsNew: func(ctx workflow.Context) error {
			next := in
			next.Continued = &decision.Continued{
				WaitingSince:         r.status.WaitingSince,
				EscalationDeadline:   deadline,
				InvalidSignals:       r.status.InvalidSignals,
				LastInvalidSignal:    r.status.LastInvalidSignal,
				LastInvalidRequestID: r.status.LastInvalidRequestID,
			}
			workflow.GetLogger(ctx).Warn("oncekey: continuing the reconciliation as new after too many invalid signals", "tool", in.Tool, "key_prefix", prefix(in.OperationKey), "invalid_signals", r.status.InvalidSignals)
			return workflow.NewContinueAsNewError(ctx, reconcile.WorkflowName, next)
		},
	})
}

// record writes res with the RecordResolution activity. It returns why the resolution was
// refused ("" when the run is decided: settled by res, or by another way, or ended by an error
// such as a tombstone).
func (r *reconciler) record(ctx workflow.Context, res reconcile.Resolution) string {
	var out reconcile.Output
	err := workflow.ExecuteActivity(r.actx, activities.RecordResolutionName, activities.RecordInput{RecordRef: r.ref, Tool: r.in.Tool, ActivityType: r.in.ActivityType, Resolution: res,
		SignatureRefusedType: true}).Get(ctx, &out)
	if err != nil {
		if row, appErr := failure.Of(err); refusedFor(row.Kind) {
			return r.k.refusedBy(row.Kind, appErr)
		}
		r.k.decide(reconcile.Output{}, err)
		return ""
	}
	r.settledBy = metrics.SettledByPerson
	if !r.k.decided {
		out, err = r.done(ctx, out)
	}
	r.k.decide(out, err)
	return ""
}

// settledStatus is the record's status once a reconciliation settled it with outcome: the status
// the decision wrote over an unknown (or lease-expired pending) record, else the status last
// inspected (a settled record, or none).
func settledStatus(inspected oncekeystore.Status, outcome reconcile.ResolutionOutcome) oncekeystore.Status {
	if inspected != oncekeystore.StatusUnknown && inspected != oncekeystore.StatusPending {
		return inspected
	}
	switch outcome {
	case reconcile.Applied:
		return oncekeystore.StatusApplied
	case reconcile.NotApplied:
		return oncekeystore.StatusReleased
	}
	return oncekeystore.StatusFailed
}

// invalid returns why res cannot settle the operation, or "".
func (r *reconciler) invalid(res reconcile.Resolution) string {
	if err := res.Validate(); err != nil {
		return err.Error()
	}
	if res.Tenant != "" && res.Tenant != r.in.Tenant {
		return fmt.Sprintf("the resolution names tenant %q but the operation belongs to another tenant", res.Tenant)
	}
	if res.Epoch != r.epoch {
		return (&oncekeystore.StaleDecisionError{OperationKey: r.in.OperationKey, Epoch: res.Epoch, Current: r.epoch, Status: oncekeystore.StatusUnknown}).Error()
	}
	return ""
}

// resultProblem says why an Applied result does not decode into the tool's result type
// (oncekey.Registry.CheckResult), or "" (also when the type is unknown).
func (r *reconciler) resultProblem(res reconcile.Resolution) string {
	if res.Outcome != reconcile.Applied {
		return ""
	}
	if err := r.reg.CheckResult(r.in.ActivityType, r.in.Tool, res.Result); err != nil {
		return err.Error()
	}
	return ""
}
