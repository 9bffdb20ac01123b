package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/activities"
	"github.com/oncekey/oncekey/reconcile"
)

// ErrTypeEscalationTimeout is the application error type of a reconciliation that nobody
// resolved within its EscalationTimeout.
const ErrTypeEscalationTimeout = "oncekey.EscalationTimeout"

// Registry is the part of a worker (or a plugin's or replayer's registry) Register needs.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Register registers the reconciliation workflow on r as reconcile.WorkflowName. Registering it
// twice on one worker is harmless.
func Register(r Registry) {
	r.RegisterWorkflowWithOptions(Reconcile, workflow.RegisterOptions{Name: reconcile.WorkflowName, DisableAlreadyRegisteredCheck: true})
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
// settle at once; a pending record with a live lease (a zombie attempt still
// running) is waited for; a pending record whose lease ran out is marked unknown. For an unknown
// record it runs the tool's Reconcile hook, if any, and otherwise waits for the
// reconcile.SignalName signal, answering reconcile.QueryName meanwhile. The decision is written to
// the store and returned. A record past its retention (a tombstone) keeps no outcome: the workflow
// then fails with a non-retryable application error of type oncekey.ErrTypeExpired. With in.EscalationTimeout set, it fails with an application error of
// type ErrTypeEscalationTimeout when nobody decides in time.
func Reconcile(ctx workflow.Context, in reconcile.Input) (reconcile.Output, error) {
	logger := workflow.GetLogger(ctx)
	status := reconcile.StatusReport{
		State:         reconcile.StateInspecting,
		Tenant:        in.Tenant,
		OperationKey:  in.OperationKey,
		Tool:          in.Tool,
		WorkflowID:    in.WorkflowID,
		StepID:        in.StepID,
		Reason:        in.Reason,
		ClaimDeadline: in.ClaimDeadline,
	}
	if err := workflow.SetQueryHandler(ctx, reconcile.QueryName, func() (reconcile.StatusReport, error) {
		return status, nil
	}); err != nil {
		return reconcile.Output{}, err
	}
	ref := activities.RecordRef{Tenant: in.Tenant, OperationKey: in.OperationKey}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypeInvalid},
		},
	})
	done := func(out reconcile.Output) (reconcile.Output, error) {
		status.State, status.Outcome = reconcile.StateResolved, out.Outcome
		status.RecordStatus = settledStatus(status.RecordStatus, out.Outcome)
		// A refusal before the decision is no longer news once the operation is settled.
		status.LastInvalidSignal, status.LastInvalidRequestID = "", ""
		logger.Info("oncekey: reconciled", "tool", in.Tool, "key_prefix", prefix(in.OperationKey), "outcome", string(out.Outcome), "resolved_by", out.ResolvedBy)
		return out, nil
	}

	// Inspect until the record is unknown (or settled).
	claimWait := minClaimWait
	for {
		status.State = reconcile.StateInspecting
		var rec activities.Inspection
		if err := workflow.ExecuteActivity(actx, activities.InspectName, ref).Get(ctx, &rec); err != nil {
			return reconcile.Output{}, err
		}
		status.RecordStatus = rec.Status
		if !rec.Found {
			if now := workflow.Now(ctx); now.Before(in.ClaimDeadline) {
				// The attempt handed over may not have claimed yet: wait for a late claim.
				status.State = reconcile.StateWaitingForClaim
				wait := min(claimWait, in.ClaimDeadline.Sub(now))
				claimWait = min(2*claimWait, maxClaimWait)
				if err := workflow.Sleep(ctx, wait); err != nil {
					return reconcile.Output{}, err
				}
				continue
			}
			// No claim was ever recorded: the tool's body never started, so nothing happened.
			return done(reconcile.Output{Outcome: reconcile.NotApplied, ResolvedBy: "oncekey", Note: "no claim was recorded for the key; the tool never ran"})
		}
		switch rec.Status {
		case oncekey.StatusApplied, oncekey.StatusReleased, oncekey.StatusFailed:
			out := activities.OutputOf(&oncekey.Record{
				Status: rec.Status, Result: rec.Result, Failure: []byte(rec.Failure),
				EffectReference: rec.EffectReference, ResolvedBy: rec.ResolvedBy, Note: rec.Note,
			})
			if out.ResolvedBy == "" {
				out.ResolvedBy = "oncekey"
			}
			return done(out)
		case oncekey.StatusExpired:
			// A tombstone keeps no outcome: what happened is unknown, and no decision can be recorded.
			return reconcile.Output{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("oncekey: the record of %s (key %s) is past its retention (a tombstone): its outcome is unknown and can no longer be resolved", in.Tool, in.OperationKey),
				oncekey.ErrTypeExpired, nil)
		case oncekey.StatusPending:
			if !rec.LeaseExpired {
				status.State = reconcile.StateWaitingForLease
				if err := workflow.Sleep(ctx, max(rec.LeaseRemaining, minLeaseWait)); err != nil {
					return reconcile.Output{}, err
				}
				continue
			}
			var after activities.Inspection
			if err := workflow.ExecuteActivity(actx, activities.MarkUnknownName, activities.MarkUnknownInput{
				RecordRef: ref, Epoch: rec.Epoch, Reason: "lease expired; owner gone: " + in.Reason,
			}).Get(ctx, &after); err != nil {
				return reconcile.Output{}, err
			}
			continue
		}
		break // unknown
	}

	// The tool's automatic receipt lookup, if it has one.
	status.State = reconcile.StateReceiptLookup
	var receipt activities.ReceiptOutput
	rctx := workflow.WithActivityOptions(actx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 5,
			NonRetryableErrorTypes: []string{activities.ErrTypeInvalid},
		},
	})
	err := workflow.ExecuteActivity(rctx, activities.LookupReceiptName, activities.ReceiptInput{Request: oncekey.ReconcileRequest{
		Tenant: in.Tenant, OperationKey: in.OperationKey, Tool: in.Tool, WorkflowID: in.WorkflowID, StepID: in.StepID,
	}}).Get(ctx, &receipt)
	if err != nil {
		logger.Warn("oncekey: receipt lookup failed; waiting for a person", "tool", in.Tool, "key_prefix", prefix(in.OperationKey), "error", err)
	} else if receipt.Decided {
		return done(receipt.Output)
	}

	// Wait for a person.
	status.State = reconcile.StateWaiting
	status.WaitingSince = workflow.Now(ctx)
	signals := workflow.GetSignalChannel(ctx, reconcile.SignalName)
	var escalation workflow.Future
	if in.EscalationTimeout > 0 {
		escalation = workflow.NewTimer(ctx, in.EscalationTimeout)
	}
	for {
		var (
			r         reconcile.Resolution
			got       bool
			escalated bool
		)
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, &r)
			got = true
		})
		if escalation != nil {
			sel.AddFuture(escalation, func(workflow.Future) { escalated = true })
		}
		sel.Select(ctx)
		if escalated && !got {
			return reconcile.Output{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("oncekey: nobody resolved the outcome of %s (key %s) within the escalation timeout of %s; the record stays unknown",
					in.Tool, in.OperationKey, in.EscalationTimeout), ErrTypeEscalationTimeout, nil)
		}
		if reason := invalid(r, in); reason != "" {
			status.LastInvalidSignal, status.LastInvalidRequestID = reason, r.RequestID
			logger.Warn("oncekey: ignored an invalid resolution", "tool", in.Tool, "key_prefix", prefix(in.OperationKey), "reason", reason)
			continue
		}
		var out reconcile.Output
		err := workflow.ExecuteActivity(actx, activities.RecordResolutionName, activities.RecordInput{RecordRef: ref, Tool: in.Tool, Resolution: r}).Get(ctx, &out)
		if err != nil {
			var appErr *temporal.ApplicationError
			if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeInvalid {
				status.LastInvalidSignal, status.LastInvalidRequestID = appErr.Error(), r.RequestID
				logger.Warn("oncekey: resolution refused", "tool", in.Tool, "key_prefix", prefix(in.OperationKey), "reason", appErr.Error())
				continue
			}
			return reconcile.Output{}, err
		}
		return done(out)
	}
}

// settledStatus is the record's status once a reconciliation settled it with outcome: the status
// the decision wrote over an unknown (or lease-expired pending) record, else the status last
// inspected (a settled record, or none).
func settledStatus(inspected oncekey.Status, outcome reconcile.ResolutionOutcome) oncekey.Status {
	if inspected != oncekey.StatusUnknown && inspected != oncekey.StatusPending {
		return inspected
	}
	switch outcome {
	case reconcile.Applied:
		return oncekey.StatusApplied
	case reconcile.NotApplied:
		return oncekey.StatusReleased
	}
	return oncekey.StatusFailed
}

// invalid returns why r cannot settle the operation in, or "".
func invalid(r reconcile.Resolution, in reconcile.Input) string {
	if err := r.Validate(); err != nil {
		return err.Error()
	}
	if r.Tenant != "" && r.Tenant != in.Tenant {
		return fmt.Sprintf("the resolution names tenant %q but the operation belongs to another tenant", r.Tenant)
	}
	return ""
}

func prefix(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}
