package interceptor

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/failure"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/reconcile"
)

// Defaults of the retry loop the workflow side runs for Effectful tools, matching Temporal's.
const (
	defaultInitialInterval    = time.Second
	defaultBackoffCoefficient = 2.0
	defaultMaxIntervalFactor  = 100
)

type workflowOutbound struct {
	tinterceptor.WorkflowOutboundInterceptorBase
	root *root
}

func workflowTypeName(t *workflow.Type) string {
	if t == nil {
		return ""
	}
	return t.Name
}

// workflowTenant returns the tenant of activities scheduled from ctx.
func (w *workflowOutbound) workflowTenant(ctx workflow.Context) string {
	if t, ok := oncekey.Tenant(ctx); ok {
		return t
	}
	info := workflow.GetInfo(ctx)
	return w.root.tenant(TenantInfo{
		Namespace:    info.Namespace,
		WorkflowID:   info.WorkflowExecution.ID,
		WorkflowType: info.WorkflowType.Name,
		TaskQueue:    info.TaskQueueName,
	})
}

func failedFuture(ctx workflow.Context, err error) workflow.Future {
	f, s := workflow.NewFuture(ctx)
	s.SetError(err)
	return f
}

// resolve names the tool of a call of activityType with args and returns its policy (see
// oncekey.Registry.Resolve), with the call's arguments document. ok is false when nothing is
// claimed for the call: no policy, or a policy that claims nothing. An activity type without a
// Route and without a claimed policy is answered without encoding its arguments.
func (w *workflowOutbound) resolve(activityType string, args []any) (r oncekey.Resolved, doc []byte, ok bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			// A panic in an argument's MarshalJSON or in Route.Tool would fail the workflow task
			// again on every retry: fail the call instead, once.
			r, doc, ok = oncekey.Resolved{}, nil, false
			err = fmt.Errorf("oncekey: %s was not scheduled: an argument's MarshalJSON or the Route's Tool function panicked: %v", activityType, p)
		}
	}()
	reg := w.root.opts.Registry
	routed := reg.Routed(activityType)
	var p oncekey.Policy
	if !routed {
		if p, ok = reg.Policy(activityType); !ok || !p.Effect.Claimed() {
			return oncekey.Resolved{}, nil, false, nil
		}
	}
	if doc, err = oncekey.CanonicalArgs(args); err != nil {
		return oncekey.Resolved{}, nil, false, fmt.Errorf("oncekey: the arguments of %s cannot be encoded exactly, so the call has no key: %w", activityType, err)
	}
	if !routed {
		// The activity type is its own tool, and doc (canonical already) its arguments: what
		// Registry.Resolve would give, without encoding the document again.
		return oncekey.Resolved{Tool: activityType, Policy: p, Args: doc}, doc, true, nil
	}
	r, ok, err = reg.Resolve(activityType, doc)
	if err != nil {
		return oncekey.Resolved{}, nil, false, err
	}
	return r, doc, ok && r.Policy.Effect.Claimed(), nil
}

// reasonRouteUnresolved is Details.Reason of a call whose Route names no tool or no arguments
// for it (*oncekey.RouteError): refused before it is keyed, on either side.
const reasonRouteUnresolved = "route does not resolve"

// resolveReason is the Details.Reason of a call resolve refused: its Route names no tool or no
// arguments for it, or its arguments cannot be encoded.
func resolveReason(err error) string {
	var unrouted *oncekey.RouteError
	if errors.As(err, &unrouted) {
		return reasonRouteUnresolved
	}
	return "arguments not encodable"
}

// argsAsReceivedChangeID is the workflow.GetVersion change ID under which the arguments document
// of a call whose argument is not of the tool's input type (a model's JSON for a struct, as
// agent.Call schedules it) is the document of the argument as the activity worker decodes it,
// the input the body receives, which the worker derives too (oncekey.ExactArgs). Histories
// recorded before it derive keys from the argument as scheduled.
const argsAsReceivedChangeID = "oncekey-args-as-received"

// asReceived returns the call's arguments document as the tool's body receives it, and the tool
// resolved from it: for one argument not of the input type the Registry knows for activityType,
// the argument encoded with the data converter and decoded into that type, made exact by doc
// (integers beyond 2^53) where the two agree. An argument of the input type, or one that does not
// decode or encode (the worker then fails the call before the interceptor, or refuses it), keeps
// doc.
func (w *workflowOutbound) asReceived(ctx workflow.Context, activityType string, args []any, r oncekey.Resolved, doc []byte) (res oncekey.Resolved, out []byte, err error) {
	t, ok := w.root.opts.Registry.InputType(activityType)
	if !ok || len(args) != 1 || args[0] == nil || reflect.TypeOf(args[0]) == t {
		return r, doc, nil
	}
	if workflow.GetVersion(ctx, argsAsReceivedChangeID, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return r, doc, nil
	}
	defer func() {
		if p := recover(); p != nil {
			// The data converter or the input type's MarshalJSON panics: the worker meets the same
			// code and refuses the call, naming it.
			res, out, err = r, doc, nil
		}
	}()
	dc := w.root.opts.DataConverter
	pl, perr := dc.ToPayload(args[0])
	v := reflect.New(t)
	if perr != nil || dc.FromPayload(pl, v.Interface()) != nil {
		return r, doc, nil
	}
	received := []any{v.Elem().Interface()}
	exact, err := oncekey.ExactArgs(activityType, received, doc)
	var mismatch *oncekey.ArgsMismatchError
	if errors.As(err, &mismatch) {
		exact, err = oncekey.CanonicalArgs(received)
	}
	if err != nil {
		return r, doc, fmt.Errorf("oncekey: the arguments of %s, as the worker decodes them, cannot be encoded exactly, so the call has no key: %w", activityType, err)
	}
	if res, _, err = w.root.opts.Registry.Resolve(activityType, exact); err != nil {
		return r, doc, err
	}
	return res, exact, nil
}

func (w *workflowOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	r, _, claimed, err := w.resolve(activityType, args)
	if err != nil {
		return failedFuture(ctx, workflowError(err.Error(), oncekey.ErrTypeConfig, nil,
			oncekey.Details{Tool: activityType, Outcome: oncekey.OutcomeRejected, Reason: resolveReason(err)}))
	}
	if claimed {
		return failedFuture(ctx, workflowError(
			fmt.Sprintf("oncekey: %s is %s and cannot run as a local activity: oncekey cannot turn off local-activity retries or reconcile them; call it with workflow.ExecuteActivity", r.Tool, r.Policy.Effect),
			oncekey.ErrTypeConfig, nil, oncekey.Details{Tool: r.Tool, Outcome: oncekey.OutcomeRejected, Reason: "local activity"}))
	}
	return w.Next.ExecuteLocalActivity(ctx, activityType, args...)
}

func (w *workflowOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	r, doc, claimed, err := w.resolve(activityType, args)
	if err != nil {
		return failedFuture(ctx, workflowError(err.Error(), oncekey.ErrTypeConfig, nil,
			oncekey.Details{Tool: activityType, Outcome: oncekey.OutcomeRejected, Reason: resolveReason(err)}))
	}
	if !claimed {
		return w.Next.ExecuteActivity(ctx, activityType, args...)
	}
	if r, doc, err = w.asReceived(ctx, activityType, args, r, doc); err != nil {
		return failedFuture(ctx, workflowError(err.Error(), oncekey.ErrTypeConfig, nil,
			oncekey.Details{Tool: activityType, Outcome: oncekey.OutcomeRejected, Reason: resolveReason(err)}))
	}
	p := r.Policy
	stepID, hasStep := oncekey.StepID(ctx)
	if p.Effect == oncekey.Effectful && p.RequireStepID && !hasStep {
		return failedFuture(ctx, workflowError(
			fmt.Sprintf("oncekey: %s requires an explicit step ID (Policy.RequireStepID): schedule it with ctx = oncekey.WithStepID(ctx, \"<stable step name>\")", r.Tool),
			oncekey.ErrTypeConfig, nil, oncekey.Details{Tool: r.Tool, Outcome: oncekey.OutcomeRejected, Reason: "missing step ID"}))
	}
	tenant := w.workflowTenant(ctx)
	if h := tinterceptor.WorkflowHeader(ctx); h != nil {
		dc := w.root.opts.DataConverter
		if hasStep {
			if pl, err := dc.ToPayload(stepID); err == nil {
				h[wire.HeaderStepID] = pl
			} else {
				return failedFuture(ctx, workflowError("oncekey: encode step ID header: "+err.Error(), oncekey.ErrTypeConfig, err, headerDetails(r.Tool)))
			}
		}
		if pl, err := dc.ToPayload(tenant); err == nil {
			h[wire.HeaderTenant] = pl
		} else {
			return failedFuture(ctx, workflowError("oncekey: encode tenant header: "+err.Error(), oncekey.ErrTypeConfig, err, headerDetails(r.Tool)))
		}
		if pl, err := dc.ToPayload(json.RawMessage(doc)); err == nil {
			h[wire.HeaderArgs] = pl
		} else {
			return failedFuture(ctx, workflowError("oncekey: encode arguments header: "+err.Error(), oncekey.ErrTypeConfig, err, headerDetails(r.Tool)))
		}
		if err := w.root.bindHeaders(ctx, h, activityType, doc); err != nil {
			return failedFuture(ctx, workflowError("oncekey: encode binding header: "+err.Error(), oncekey.ErrTypeConfig, err, headerDetails(r.Tool)))
		}
		if isCheck(ctx) {
			// The check after a timeout (checkAfterTimeout): read the record, run nothing.
			pl, err := dc.ToPayload(true)
			if err != nil {
				return failedFuture(ctx, workflowError("oncekey: encode check header: "+err.Error(), oncekey.ErrTypeConfig, err, headerDetails(r.Tool)))
			}
			h[wire.HeaderCheck] = pl
			return w.Next.ExecuteActivity(ctx, activityType, args...)
		}
	}
	c := scheduled{w: w, tool: activityType, name: r.Tool, toolArgs: r.Args, argsDoc: doc, policy: p, args: args, tenant: tenant, stepID: stepID}
	// schedule schedules the call from ctx: as it is for an Idempotent tool (Temporal retries it,
	// and the record is read after a last attempt that timed out), through the retry loop for an
	// Effectful one.
	schedule := func(ctx workflow.Context) workflow.Future {
		if p.Effect != oncekey.Effectful {
			return c.checkAfterTimeout(ctx, w.Next.ExecuteActivity(ctx, activityType, args...))
		}
		l := &effectfulLoop{
			scheduled: c, namespace: workflow.GetInfo(ctx).Namespace, opts: workflow.GetActivityOptions(ctx), start: workflow.Now(ctx),
		}
		// The first attempt is scheduled now, so commands keep the order the workflow code gave them.
		first := w.Next.ExecuteActivity(l.attemptContext(ctx), activityType, args...)
		f, s := workflow.NewFuture(ctx)
		workflow.Go(ctx, func(gctx workflow.Context) { l.run(gctx, first, s) })
		return f
	}
	if p.Approval != nil {
		a := &approvalCall{scheduled: c}
		a.edit = func(ctx workflow.Context, doc json.RawMessage, original string) workflow.Future {
			// The call a person approved with edited arguments: the same tool, scheduled with
			// them, pointing the worker at the original's approval (which the worker reads).
			if r.Tool != activityType || len(args) != 1 {
				return failedFuture(ctx, workflowError(fmt.Sprintf(
					"oncekey: %s was approved with edited arguments, but its activity takes its arguments in another shape (a Route, or several arguments); nothing ran", r.Tool),
					oncekey.ErrTypeConfig, nil, oncekey.Details{Tenant: tenant, OperationKey: original, Tool: r.Tool, Outcome: oncekey.OutcomeRejected, Reason: "edit not schedulable"}))
			}
			if h := tinterceptor.WorkflowHeader(ctx); h != nil {
				dc := w.root.opts.DataConverter
				for _, hv := range []struct {
					name string
					v    any
				}{{wire.HeaderArgs, doc}, {wire.HeaderEditOf, original}} {
					name := hv.name
					pl, err := dc.ToPayload(hv.v)
					if err != nil {
						return failedFuture(ctx, workflowError("oncekey: encode header "+name+": "+err.Error(), oncekey.ErrTypeConfig, err, headerDetails(r.Tool)))
					}
					h[name] = pl
				}
				if err := w.root.bindHeaders(ctx, h, activityType, doc); err != nil {
					return failedFuture(ctx, workflowError("oncekey: encode binding header: "+err.Error(), oncekey.ErrTypeConfig, err, headerDetails(r.Tool)))
				}
			}
			edited := c
			edited.toolArgs, edited.argsDoc, edited.args = doc, doc, []any{doc}
			if p.Effect != oncekey.Effectful {
				return w.Next.ExecuteActivity(ctx, activityType, doc)
			}
			l := &effectfulLoop{scheduled: edited, namespace: workflow.GetInfo(ctx).Namespace, opts: workflow.GetActivityOptions(ctx), start: workflow.Now(ctx)}
			first := w.Next.ExecuteActivity(l.attemptContext(ctx), activityType, doc)
			f, s := workflow.NewFuture(ctx)
			workflow.Go(ctx, func(gctx workflow.Context) { l.run(gctx, first, s) })
			return f
		}
		switch workflow.GetVersion(ctx, approvalChangeID, workflow.DefaultVersion, approvalByWorkerVersion) {
		case approvalByWorkerVersion:
			return a.viaWorker(ctx, schedule)
		case 1:
			return a.first(ctx, schedule)
		}
	}
	return schedule(ctx)
}

// rerunKeyChangeID is the workflow.GetVersion change ID under which re-runs of a call without a
// step ID carry the first attempt's activity ID (wire.HeaderFirstActivityID). Histories
// recorded before it have no marker and replay with the earlier derivation (each re-run keyed by
// its own activity ID).
const rerunKeyChangeID = "oncekey-rerun-first-activity-id"

// scheduled is one call of a tool as the workflow side schedules it, for the retry loop of an Effectful
// tool (effectfulLoop) and for the approval of a call (approvalCall).
type scheduled struct {
	w *workflowOutbound
	// tool is the activity type scheduled; name is the tool's name (the activity type, or what
	// its Route named) and toolArgs its arguments document in canonical JSON.
	tool     string
	name     string
	toolArgs json.RawMessage
	// argsDoc is the arguments document the wire.HeaderArgs header carries (the whole of the
	// activity's arguments, where toolArgs is the part a Route names), which a header binding
	// digests.
	argsDoc json.RawMessage
	policy  oncekey.Policy
	args    []any
	tenant  string
	stepID  string
}

// effectfulLoop runs an Effectful tool's retries in workflow code, with the user's RetryPolicy,
// and hands unknown outcomes to reconciliation.
type effectfulLoop struct {
	scheduled
	namespace string
	opts      workflow.ActivityOptions
	start     time.Time

	// firstActivityID is the activity ID of the first attempt, known once it has failed.
	firstActivityID string
	// rerunChecked: the version of the re-run keying has been read; rerunKeyed: re-runs carry
	// firstActivityID, so each has the first attempt's operation key.
	rerunChecked, rerunKeyed bool
	// reconciledKey is the operation key the last reconciliation was for.
	reconciledKey string
	// cancelChecked: the version of reconciliation on cancel has been read; cancelOwned: the
	// reconciliation child is started and kept apart from the workflow's cancellation.
	cancelChecked, cancelOwned bool
	// appliedChecked: the version of the applied-decision re-run has been read; appliedRerun: an
	// Applied reconciliation re-runs the step instead of handing the decision's result over.
	appliedChecked, appliedRerun bool
	// verifyRuns counts the re-runs made after Applied decisions (see maxVerifyRuns).
	verifyRuns int
}

// appliedThroughClaimChangeID is the workflow.GetVersion change ID under which a reconciliation
// that settles Applied makes the workflow run the step once more rather than hand the decided
// result to the call: the record's result then reaches the call only through the claim path,
// which refuses a call whose fingerprint differs from the record's (an attempt with other
// arguments that timed out before it claimed) or that Policy.Authorize no longer allows.
// Histories recorded before it replay with the earlier behaviour.
const appliedThroughClaimChangeID = "oncekey-applied-through-claim"

// maxVerifyRuns bounds the re-runs after Applied decisions in one call: a re-run that keeps
// timing out before it answers (a slow Policy.Authorize) must not loop for ever.
const maxVerifyRuns = 3

// appliedThroughClaim reports whether an Applied decision re-runs the step; read once per call.
func (l *effectfulLoop) appliedThroughClaim(ctx workflow.Context) bool {
	if !l.appliedChecked {
		l.appliedChecked = true
		l.appliedRerun = workflow.GetVersion(ctx, appliedThroughClaimChangeID, workflow.DefaultVersion, 1) == 1
	}
	return l.appliedRerun
}

// confirmedOutcomeChangeID is the workflow.GetVersion change ID under which the result of a call
// that reconciliation settled as applied reaches the workflow as applied with the reason
// confirmed (wire.MetadataReason) instead of as the replay the re-run through the claim path
// made of it: for the call it is its own effect, confirmed by a check. Histories recorded before
// it replay with the earlier labels.
const confirmedOutcomeChangeID = "oncekey-confirmed-outcome"

// confirmedOutcome reports whether a reconciled call's result is labelled confirmed; read when
// such a result arrives.
func (l *effectfulLoop) confirmedOutcome(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, confirmedOutcomeChangeID, workflow.DefaultVersion, 1) == 1
}

// confirmed returns raw, the replayed result of a call reconciliation (or the check after a
// timeout) settled as applied, as applied with the reason confirmed, keeping its operation key
// and effect reference. A result without oncekey's metadata is returned as it is.
func confirmed(raw converter.RawValue) converter.RawValue {
	p := raw.Payload()
	if p == nil || p.GetMetadata()[wire.MetadataOutcome] == nil {
		return raw
	}
	inner := proto.Clone(p).(*commonpb.Payload)
	inner.Metadata[wire.MetadataOutcome] = []byte(oncekey.OutcomeApplied)
	inner.Metadata[wire.MetadataReason] = []byte(oncekey.ReasonConfirmed)
	return converter.NewRawValue(inner)
}

// decisionTaskQueue is the task queue of oncekey's own workflows and activities started from the
// workflow of ctx: Options.ReconcileTaskQueue, or the workflow's.
func (r *root) decisionTaskQueue(ctx workflow.Context) string {
	if tq := r.opts.ReconcileTaskQueue; tq != "" {
		return tq
	}
	return workflow.GetInfo(ctx).TaskQueueName
}

// handOffChangeID is the workflow.GetVersion change ID under which the asynchronous completion of
// an Effectful call (a result without oncekey's metadata: it reached Temporal from
// client.CompleteActivity, not from the worker) makes the workflow run the SettleHandOff activity.
// It is read only when such a result arrives, which before it could not happen (the worker
// refused the hand-off), so histories recorded before it replay unchanged.
const handOffChangeID = "oncekey-settle-hand-off"

func (l *effectfulLoop) settlesHandOffs(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, handOffChangeID, workflow.DefaultVersion, 1) == 1
}

// completedAsync reports whether raw, an Effectful call's result, was completed from outside the
// worker: oncekey labels every result its worker returns.
func completedAsync(raw converter.RawValue) bool {
	// No payload at all is a completion without a result (CompleteActivity with nil): the
	// worker labels even an empty result.
	return raw.Payload().GetMetadata()[wire.MetadataOutcome] == nil
}

// failedAsync reports whether err, an Effectful call's failure, may have been completed from
// outside the worker: an application error whose type is not one of oncekey's (the worker gives
// an "oncekey."-prefixed type for every failure of an Effectful tool; the prefix, not the table
// of types, decides, so that a history replays the same under a later table), or a cancellation
// the workflow did not ask for.
func failedAsync(err error) bool {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return false
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return !strings.HasPrefix(appErr.Type(), "oncekey.")
	}
	return temporal.IsCanceledError(err)
}

// settleHandOff runs the SettleHandOff activity for the call's record, which waits for the
// completion (a result, a failure or a cancellation) the workflow just got: a worker reads that completion from the history and settles
// the record with it, so a repeat replays what the workflow got. It does not fail the call: the
// workflow has its result, and a record left waiting is settled by the next repeat's claim or,
// after the activity's deadline, reconciled.
func (l *effectfulLoop) settleHandOff(ctx workflow.Context) {
	logger := workflow.GetLogger(ctx)
	key, err := l.operationKey(ctx, nil)
	if err != nil {
		logger.Warn("oncekey: an asynchronous completion reached the workflow, and the call's operation key could not be derived to settle its record; a repeat's claim settles it",
			"tool", l.name, "error", err)
		return
	}
	tq := l.w.root.decisionTaskQueue(ctx)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:                "oncekey: record the asynchronous completion of " + l.name,
		TaskQueue:              tq,
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		// Bounded: the workflow has its result, and a worker without oncekey's activities must
		// not hold it long.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second, MaximumAttempts: 4},
	})
	var out activities.SettleHandOffOutput
	if err := workflow.ExecuteActivity(actx, activities.SettleHandOffName, activities.RecordRef{Tenant: l.tenant, OperationKey: key, Tool: l.name}).Get(ctx, &out); err != nil {
		logger.Warn("oncekey: the record of an asynchronously completed call was not settled; a repeat's claim settles it",
			"tool", l.name, "operation_key", key, "error", err)
		return
	}
	logger.Info("oncekey: asynchronous completion recorded", "tool", l.name, "operation_key", key, "status", out.Status, "note", out.Note)
}

// reconcileOnCancelChangeID is the workflow.GetVersion change ID under which the reconciliation
// child is started from a disconnected context, so that cancelling the workflow neither cancels
// the child nor keeps it from starting, and under which a workflow cancelled while an Effectful
// attempt is in progress still hands the attempt to reconciliation. Histories recorded before it
// have no marker and replay with the earlier behaviour.
const reconcileOnCancelChangeID = "oncekey-reconcile-on-cancel"

// ownsOnCancel reports whether reconciliation outlives the workflow's cancellation; the decision
// is read once per call through workflow.GetVersion.
func (l *effectfulLoop) ownsOnCancel(ctx workflow.Context) bool {
	if !l.cancelChecked {
		l.cancelChecked = true
		l.cancelOwned = workflow.GetVersion(ctx, reconcileOnCancelChangeID, workflow.DefaultVersion, 1) == 1
	}
	return l.cancelOwned
}

// attemptContext returns ctx with the user's activity options, except that Temporal makes one
// attempt only, within what is left of the schedule-to-close budget.
func (l *effectfulLoop) attemptContext(ctx workflow.Context) workflow.Context {
	ao := l.opts
	rp := &temporal.RetryPolicy{}
	if ao.RetryPolicy != nil {
		*rp = *ao.RetryPolicy
	}
	rp.MaximumAttempts = 1
	ao.RetryPolicy = rp
	if ao.ScheduleToCloseTimeout > 0 {
		ao.ScheduleToCloseTimeout = max(l.start.Add(l.opts.ScheduleToCloseTimeout).Sub(workflow.Now(ctx)), time.Millisecond)
	}
	return workflow.WithActivityOptions(ctx, ao)
}

func (l *effectfulLoop) retryPolicy() temporal.RetryPolicy {
	rp := temporal.RetryPolicy{}
	if l.opts.RetryPolicy != nil {
		rp = *l.opts.RetryPolicy
	}
	if rp.InitialInterval <= 0 {
		rp.InitialInterval = defaultInitialInterval
	}
	if rp.BackoffCoefficient < 1 {
		rp.BackoffCoefficient = defaultBackoffCoefficient
	}
	if rp.MaximumInterval <= 0 {
		rp.MaximumInterval = defaultMaxIntervalFactor * rp.InitialInterval
	}
	return rp
}

// backoff returns the delay before attempt n+1 after n attempts.
func backoff(rp temporal.RetryPolicy, n int) time.Duration {
	d := float64(rp.InitialInterval) * math.Pow(rp.BackoffCoefficient, float64(n-1))
	if d > float64(rp.MaximumInterval) || math.IsInf(d, 0) || math.IsNaN(d) {
		return rp.MaximumInterval
	}
	return time.Duration(d)
}

type failureClass int

const (
	classFail failureClass = iota
	classRetry
	classReconcile
)

// classify decides what an attempt's failure means, from the failure alone (history), so
// replay takes the same path.
func classify(err error) (failureClass, time.Duration) {
	var toErr *temporal.TimeoutError
	if errors.As(err, &toErr) {
		switch toErr.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
			return classRetry, 0 // never started: nothing ran
		case enumspb.TIMEOUT_TYPE_START_TO_CLOSE, enumspb.TIMEOUT_TYPE_HEARTBEAT, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE:
			return classReconcile, 0
		}
		return classFail, 0
	}
	switch row, appErr := failure.Of(err); row.Class {
	case failure.RetryIfRetryable:
		if !appErr.NonRetryable() {
			return classRetry, appErr.NextRetryDelay()
		}
	case failure.Retry:
		return classRetry, appErr.NextRetryDelay()
	case failure.Reconcile:
		return classReconcile, 0
	}
	return classFail, 0
}

func (l *effectfulLoop) run(ctx workflow.Context, fut workflow.Future, s workflow.Settable) {
	rp := l.retryPolicy()
	attempt := 1
	logger := workflow.GetLogger(ctx)
	for {
		var raw converter.RawValue
		err := fut.Get(ctx, &raw)
		if err == nil {
			if completedAsync(raw) && l.settlesHandOffs(ctx) {
				l.settleHandOff(ctx)
			}
			if l.verifyRuns > 0 && l.confirmedOutcome(ctx) {
				// The re-run after an Applied decision replayed the record reconciliation settled:
				// for this call that is its own effect, confirmed by the check, not a replay.
				raw = confirmed(raw)
			}
			l.settleRaw(s, raw)
			return
		}
		if attempt == 1 {
			var actErr *temporal.ActivityError
			if errors.As(err, &actErr) {
				l.firstActivityID = actErr.ActivityID()
			}
		}
		if ctx.Err() == nil && failedAsync(err) && l.settlesHandOffs(ctx) {
			l.settleHandOff(ctx)
		}
		if ctx.Err() != nil && temporal.IsCanceledError(err) && l.ownsOnCancel(ctx) {
			// The workflow was cancelled while the attempt was scheduled or running: the attempt
			// may still run and end unknown after the workflow is gone. Give it an owner.
			l.handOffOnCancel(ctx, err)
			s.SetError(err)
			return
		}
		class, delay := classify(err)
		if class == classReconcile {
			out, rerr := l.reconcile(ctx, err)
			if rerr != nil {
				s.SetError(rerr)
				return
			}
			switch out.Outcome {
			case reconcile.Applied:
				if l.appliedThroughClaim(ctx) {
					// The decision names the record, not this call: run the step again, so that the
					// claim path compares this call's fingerprint with the record's and runs
					// Policy.Authorize before the stored result is replayed to it.
					l.verifyRuns++
					if l.verifyRuns > maxVerifyRuns {
						s.SetError(workflowError(
							fmt.Sprintf("oncekey: %s was reconciled as applied, but running the step again to check this call against the record did not finish in %d tries: %v", l.tool, maxVerifyRuns, err),
							oncekey.ErrTypeIndeterminate, err, oncekey.Details{Tenant: l.tenant, Tool: l.tool, Outcome: oncekey.OutcomeUnknown, Reason: "applied decision not checked"}))
						return
					}
					logger.Info("oncekey: reconciled as applied; running the step again so that the claim path replays the record", "tool", l.tool)
					if kerr := l.keepFirstKey(ctx); kerr != nil {
						s.SetError(kerr)
						return
					}
					fut = l.w.Next.ExecuteActivity(l.attemptContext(ctx), l.tool, l.args...)
					continue
				}
				ps, perr := payloadsOf(out.Result)
				if perr != nil {
					s.SetError(workflowError("oncekey: resolved result of "+l.name+" does not decode: "+perr.Error(), oncekey.ErrTypeIndeterminate, perr,
						oncekey.Details{Tenant: l.tenant, OperationKey: l.reconciledKey, Tool: l.name, Outcome: oncekey.OutcomeUnknown, Reason: "resolved result not decodable"}))
					return
				}
				// The effect landed in an earlier attempt of this call: the result carries the outcome
				// applied, with the operation key and effect reference, like a fresh one (and, under
				// confirmedOutcomeChangeID, the reason confirmed).
				reason := ""
				if l.confirmedOutcome(ctx) {
					reason = oncekey.ReasonConfirmed
				}
				if ps = withOutcome(l.w.root.opts.DataConverter, ps, resultMeta{outcome: oncekey.OutcomeApplied, key: l.reconciledKey, ref: out.EffectReference, reason: reason}); ps == nil {
					s.SetValue(nil)
				} else {
					s.SetValue(ps)
				}
				return
			case reconcile.NotApplied:
				logger.Info("oncekey: reconciled as not applied; running the tool again", "tool", l.name)
				err = newError("oncekey: "+l.name+" was reconciled as not applied", oncekey.ErrTypeNotApplied, temporal.ApplicationErrorOptions{},
					oncekey.Details{Tenant: l.tenant, OperationKey: l.reconciledKey, Tool: l.name, Outcome: oncekey.OutcomeFailed, Reason: "reconciled as not applied"})
				// Run again after the user's backoff, inside the attempt bounds: a tool that keeps
				// ending unknown and keeps being proven not applied must not loop without a pause.
				delay = 0
			default:
				msg := out.Failure
				if msg == "" {
					msg = "resolved as failed"
				}
				s.SetError(workflowError(
					fmt.Sprintf("oncekey: %s was reconciled as failed: %s", l.name, msg), oncekey.ErrTypeFailed, nil,
					oncekey.Details{Tenant: l.tenant, OperationKey: l.reconciledKey, Tool: l.name, Outcome: oncekey.OutcomeFailed, Reason: "reconciled as failed"}))
				return
			}
		} else if class != classRetry {
			s.SetError(err)
			return
		}
		if l.nonRetryableType(err) || (rp.MaximumAttempts > 0 && attempt >= int(rp.MaximumAttempts)) {
			s.SetError(err)
			return
		}
		if delay <= 0 {
			delay = backoff(rp, attempt)
		}
		if l.opts.ScheduleToCloseTimeout > 0 && !workflow.Now(ctx).Add(delay).Before(l.start.Add(l.opts.ScheduleToCloseTimeout)) {
			s.SetError(err)
			return
		}
		if delay > time.Nanosecond {
			if serr := workflow.Sleep(ctx, delay); serr != nil {
				s.SetError(serr)
				return
			}
		}
		if err := l.keepFirstKey(ctx); err != nil {
			s.SetError(err)
			return
		}
		attempt++
		fut = l.w.Next.ExecuteActivity(l.attemptContext(ctx), l.tool, l.args...)
	}
}

// keepFirstKey makes the next re-run of a call without an explicit step ID carry the first
// attempt's activity ID in its headers, so that the worker derives the first attempt's default
// step and operation key for it. The decision is read once per workflow through
// workflow.GetVersion, so histories recorded before it replay unchanged.
func (l *effectfulLoop) keepFirstKey(ctx workflow.Context) error {
	if l.firstActivityID == "" {
		return nil
	}
	if l.stepID != "" {
		// The step ID names the operation, so the header changes no key; it tells the worker of a
		// tool whose policy refuses repeats (OnHitFailFast) that this is the call's own re-run.
		// Headers are not part of replay's command matching, so no version marker is needed.
		if l.policy.OnHit != oncekey.OnHitFailFast {
			return nil
		}
		return l.firstActivityHeader(ctx)
	}
	if !l.rerunChecked {
		l.rerunChecked = true
		l.rerunKeyed = workflow.GetVersion(ctx, rerunKeyChangeID, workflow.DefaultVersion, 1) == 1
	}
	if !l.rerunKeyed {
		return nil
	}
	return l.firstActivityHeader(ctx)
}

// firstActivityHeader puts the first attempt's activity ID into the next attempt's headers
// (wire.HeaderFirstActivityID), and binds them again (Options.HeaderKeys).
func (l *effectfulLoop) firstActivityHeader(ctx workflow.Context) error {
	h := tinterceptor.WorkflowHeader(ctx)
	if h == nil {
		return nil
	}
	pl, err := l.w.root.opts.DataConverter.ToPayload(l.firstActivityID)
	if err != nil {
		return workflowError("oncekey: encode first activity ID header: "+err.Error(), oncekey.ErrTypeConfig, err, headerDetails(l.name))
	}
	h[wire.HeaderFirstActivityID] = pl
	if err := l.w.root.bindHeaders(ctx, h, l.tool, l.argsDoc); err != nil {
		return workflowError("oncekey: encode binding header: "+err.Error(), oncekey.ErrTypeConfig, err, headerDetails(l.name))
	}
	return nil
}

func (l *effectfulLoop) nonRetryableType(err error) bool {
	return l.opts.RetryPolicy != nil && failure.TypeIn(err, l.opts.RetryPolicy.NonRetryableErrorTypes)
}

// settleRaw settles s with the attempt's result payloads, re-encoded through the data converter
// so a codec applies again; Get on the returned future decodes them into the caller's type.
func (c scheduled) settleRaw(s workflow.Settable, raw converter.RawValue) {
	if raw.Payload() == nil {
		s.SetValue(nil)
		return
	}
	ps, err := c.w.root.opts.DataConverter.ToPayloads(raw)
	if err != nil {
		s.SetError(err)
		return
	}
	s.SetValue(ps)
}

// operation returns the failed attempt's operation as the activity side saw it: a re-run of a
// call without a step ID has its first attempt's default step.
func (l *effectfulLoop) operation(ctx workflow.Context, err error) oncekey.Operation {
	info := workflow.GetInfo(ctx)
	op := oncekey.Operation{
		Namespace:    info.Namespace,
		Tenant:       l.tenant,
		WorkflowID:   info.WorkflowExecution.ID,
		RunID:        info.WorkflowExecution.RunID,
		StepID:       l.stepID,
		Tool:         l.name,
		ActivityType: l.tool,
		Args:         l.args,
		ArgsJSON:     l.toolArgs,
	}
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) {
		op.ActivityID = actErr.ActivityID()
	}
	if l.rerunKeyed {
		op.FirstActivityID = l.firstActivityID
	}
	return op
}

// operationKey finds the key of the failed attempt: from the error's details, or derived like
// the activity side derives it (a timeout carries no details), recorded in history (see
// recordedKey).
func (l *effectfulLoop) operationKey(ctx workflow.Context, err error) (string, error) {
	if d, ok := oncekey.ErrorDetails(err); ok && d.OperationKey != "" {
		return d.OperationKey, nil
	}
	return l.recordedKey(ctx, func() (string, error) { return oncekey.Key(l.policy, l.operation(ctx, err)) })
}

// keyInHistoryChangeID is the workflow.GetVersion change ID under which an operation key the
// workflow side derives itself is recorded in history with workflow.SideEffect when first
// derived. The key digests the namespace, the workflow ID and (by default) the tenant, which is
// the namespace; the SDK's replayers run under a namespace and workflow ID of their own, so a key
// derived again under them would start another reconciliation child than the history holds.
// Histories recorded before it have no marker and derive the key again.
const keyInHistoryChangeID = "oncekey-key-in-history"

// derivedKey is the value recordedKey records.
type derivedKey struct {
	Key string `json:"key,omitempty"`
	Err string `json:"err,omitempty"`
}

// recordedKey returns derive's key, recorded in history when first derived (keyInHistoryChangeID).
func (l *effectfulLoop) recordedKey(ctx workflow.Context, derive func() (string, error)) (string, error) {
	if workflow.GetVersion(ctx, keyInHistoryChangeID, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return derive()
	}
	got, err := recorded(ctx, func() derivedKey {
		k, err := derive()
		if err != nil {
			return derivedKey{Err: err.Error()}
		}
		return derivedKey{Key: k}
	})
	if err != nil {
		return "", err
	}
	if got.Err != "" {
		return "", errors.New(got.Err)
	}
	return got.Key, nil
}

// recorded returns derive's value, recorded in history with workflow.SideEffect when first
// derived: a replay reads it from there.
func recorded[T any](ctx workflow.Context, derive func() T) (T, error) {
	var got T
	err := workflow.SideEffect(ctx, func(workflow.Context) any { return derive() }).Get(&got)
	return got, err
}

// reconcileInput returns the input of the reconciliation workflow of the operation key, and
// the task queue it runs on.
func (l *effectfulLoop) reconcileInput(ctx workflow.Context, key string, cause error) (decision.Input, string) {
	info := workflow.GetInfo(ctx)
	tq := l.w.root.decisionTaskQueue(ctx)
	in := decision.Input{
		Tenant:            l.tenant,
		OperationKey:      key,
		Tool:              l.name,
		WorkflowID:        info.WorkflowExecution.ID,
		StepID:            l.stepID,
		Reason:            operatorText(cause),
		EscalationTimeout: l.w.root.opts.EscalationTimeout,
		MetricsTenant:     l.w.root.opts.MetricsTenantTag,
		SearchAttributes:  l.w.root.opts.SearchAttributes,
	}
	if l.w.root.opts.Registry.Routed(l.tool) {
		in.ActivityType = l.tool // the Route's result type applies to the tool it named
	}
	if op := l.operation(ctx, cause); in.StepID == "" && op.ActivityID != "" {
		in.StepID = op.Step()
	}
	return in, tq
}

// startReconcile starts the reconciliation workflow of key from ctx; its parent's close leaves
// it running.
func (l *effectfulLoop) startReconcile(ctx workflow.Context, key, tq string, in decision.Input) workflow.ChildWorkflowFuture {
	return reconcileChild(key, tq, in).start(ctx, in)
}

// handOffOnCancel starts the reconciliation workflow of an attempt the cancelled workflow no
// longer waits for, from a disconnected context, and waits only until it has started (or
// another workflow's reconciliation of the key is found running). An attempt that never
// claimed finds nothing to reconcile; one that ends applied settles it without a person.
func (l *effectfulLoop) handOffOnCancel(ctx workflow.Context, cause error) {
	logger := workflow.GetLogger(ctx)
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	key, ok := l.keyOnCancel(dctx, cause)
	if !ok {
		logger.Warn("oncekey: workflow cancelled while an Effectful call without a step ID was in progress; its operation key is unknown here, so an unknown outcome is left to `"+listUnknownCommand(l.tenant, l.w.root.storeSchema())+"`",
			"tool", l.name)
		return
	}
	in, tq := l.reconcileInput(dctx, key, cause)
	in.Reason = "the workflow was cancelled while " + l.name + " was in progress"
	in.ClaimDeadline = l.claimDeadline(ctx)
	logger.Info("oncekey: workflow cancelled during an Effectful call; reconciling", "tool", l.name, "key_prefix", keyPrefix(key), "reconcile_workflow_id", reconcile.WorkflowID(key))
	child := l.startReconcile(dctx, key, tq, in)
	if err := child.GetChildWorkflowExecution().Get(dctx, nil); err != nil && !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		logger.Warn("oncekey: reconciliation of a cancelled call did not start; find it with `"+listUnknownCommand(l.tenant, l.w.root.storeSchema())+"`",
			"tool", l.name, "key_prefix", keyPrefix(key), "error", err)
	}
}

// claimDeadline returns the latest time the attempt in progress at the workflow's cancellation
// may still claim its key: the end of its schedule-to-close budget or, if earlier, now plus its
// start-to-close timeout (an attempt not started by the cancellation never starts), plus the
// policy's lease as margin for a claim already on its way to the store.
func (l *effectfulLoop) claimDeadline(ctx workflow.Context) time.Time {
	now := workflow.Now(ctx)
	var end time.Time
	if l.opts.ScheduleToCloseTimeout > 0 {
		end = l.start.Add(l.opts.ScheduleToCloseTimeout)
	}
	if l.opts.StartToCloseTimeout > 0 {
		if e := now.Add(l.opts.StartToCloseTimeout); end.IsZero() || e.Before(end) {
			end = e
		}
	}
	if end.IsZero() {
		end = now
	}
	lease := l.policy.Lease
	if lease <= 0 {
		lease = oncekey.DefaultLease
	}
	return end.Add(lease)
}

// keyOnCancel returns the operation key of the attempt in progress when the workflow was
// cancelled. A cancellation carries no activity ID, so a key that depends on it (an ExplicitKey
// function reading Operation.ActivityID) cannot be derived: ok is false then. The default key of a
// call without a step ID does not depend on it.
func (l *effectfulLoop) keyOnCancel(ctx workflow.Context, cause error) (string, bool) {
	op := l.operation(ctx, cause)
	if l.stepID == "" && op.ActivityID == "" && op.FirstActivityID == "" {
		key, err := l.recordedKey(ctx, func() (string, error) { return keyWithoutActivityID(l.policy, op) })
		return key, err == nil
	}
	key, err := l.operationKey(ctx, cause)
	return key, err == nil
}

// errKeyNeedsActivityID: the operation key depends on the activity ID, which the workflow side does
// not know for the call (before it is scheduled, or after a cancellation).
var errKeyNeedsActivityID = errors.New("the key depends on the activity ID")

// keyWithoutActivityID returns op's key under p when it does not depend on the activity ID: it is
// derived with two activity IDs, and differing keys are errKeyNeedsActivityID. The default key of
// a call without a step ID does not depend on it; an ExplicitKey function may.
func keyWithoutActivityID(p oncekey.Policy, op oncekey.Operation) (string, error) {
	a, b := op, op
	a.ActivityID, b.ActivityID = "1", "2"
	ka, erra := oncekey.Key(p, a)
	kb, errb := oncekey.Key(p, b)
	switch {
	case erra != nil:
		return "", erra
	case errb != nil || ka != kb:
		return "", errKeyNeedsActivityID
	}
	return ka, nil
}

// reconcile hands the operation to its reconciliation workflow and waits for the decision.
func (l *effectfulLoop) reconcile(ctx workflow.Context, cause error) (reconcile.Output, error) {
	logger := workflow.GetLogger(ctx)
	key, err := l.operationKey(ctx, cause)
	l.reconciledKey = key
	if err != nil {
		return reconcile.Output{}, workflowError(
			fmt.Sprintf("oncekey: the outcome of %s is unknown and its operation key cannot be derived (%v): %s", l.name, err, operatorText(cause)),
			oncekey.ErrTypeIndeterminate, cause, oncekey.Details{Tenant: l.tenant, Tool: l.name, Outcome: oncekey.OutcomeUnknown, Reason: "no key"})
	}
	in, tq := l.reconcileInput(ctx, key, cause)
	id := reconcile.WorkflowID(key)
	logger.Info("oncekey: outcome unknown; reconciling", "tool", l.name, "key_prefix", keyPrefix(key), "reconcile_workflow_id", id)
	// Under reconcileOnCancelChangeID the child starts from a disconnected context: it starts
	// even if the workflow is already cancelled, and the workflow's cancellation is not passed
	// on to it, so the unknown outcome keeps an owner after the workflow is gone.
	owned := l.ownsOnCancel(ctx)
	sctx := ctx
	if owned {
		sctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	child := l.startReconcile(sctx, key, tq, in)
	var out reconcile.Output
	if err := child.GetChildWorkflowExecution().Get(sctx, nil); err != nil {
		if !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			return out, l.reconcileFailed(key, err)
		}
		// Another workflow blocked on the same key started the investigation: wait for its
		// decision, which releases every workflow blocked on the key.
		return l.await(ctx, tq, key, id)
	}
	if owned {
		done, cerr := childResult(ctx, sctx, child, &out)
		if !done {
			// The workflow was cancelled: the reconciliation goes on without it.
			return out, temporal.NewCanceledError()
		}
		if cerr != nil {
			return out, l.reconcileFailed(key, cerr)
		}
		return out, nil
	}
	if err := child.Get(ctx, &out); err != nil {
		return out, l.reconcileFailed(key, err)
	}
	return out, nil
}

func (l *effectfulLoop) await(ctx workflow.Context, tq, key, id string) (reconcile.Output, error) {
	res, err := awaitWorkflow(ctx, tq, "", activities.AwaitInput{WorkflowID: id, Record: activities.RecordRef{Tenant: l.tenant, OperationKey: key, Tool: l.tool}})
	if err != nil {
		if l.cancelOwned && ctx.Err() != nil {
			// The workflow was cancelled; the running reconciliation owns the key.
			return reconcile.Output{}, temporal.NewCanceledError()
		}
		return reconcile.Output{}, l.reconcileFailed(key, err)
	}
	if res.Err != "" {
		return reconcile.Output{}, l.reconcileFailed(key, errors.New(res.Err))
	}
	return res.Output, nil
}

// awaitWorkflow waits, with the AwaitReconciliation activity on task queue tq, for the workflow
// in names (another workflow's reconciliation or approval workflow of a key) to close. summary,
// if not "", is the activity's summary in the Temporal UI (it names the wait; the activity type
// is the same for both).
func awaitWorkflow(ctx workflow.Context, tq, summary string, in activities.AwaitInput) (activities.AwaitOutput, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		TaskQueue:           tq,
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	for {
		var res activities.AwaitOutput
		if err := workflow.ExecuteActivity(actx, activities.AwaitReconciliationName, in).Get(ctx, &res); err != nil {
			return res, err
		}
		if res.Done {
			return res, nil
		}
	}
}

// listUnknownCommand returns the `oncekey list` command that finds tenant's unknown outcomes in
// the store's schema ("" for the search_path), every value quoted with shell.Word.
func listUnknownCommand(tenant, schema string) string {
	return shell.ListUnknown().Flag("--tenant", tenant).FlagIf("--schema", schema).String()
}

func (l *effectfulLoop) reconcileFailed(key string, err error) error {
	// The reconciliation workflow has ended, so a resolution now has nobody to go to; running the
	// step again finds the record unknown and starts a new one.
	e := &oncekey.IndeterminateOutcomeError{Namespace: l.namespace, Tenant: l.tenant, OperationKey: key, Tool: l.name,
		Schema: l.w.root.storeSchema(), Unowned: true,
		Cause: fmt.Errorf("reconciliation did not decide (%w) and none waits for the key now: run the step again to start a new one", err)}
	return workflowError(e.Error(), oncekey.ErrTypeIndeterminate, err,
		oncekey.Details{Tenant: l.tenant, OperationKey: key, Tool: l.name, Outcome: oncekey.OutcomeUnknown, Reason: "reconciliation failed"})
}

// headerDetails are the details of the error of a call of tool whose oncekey header did not
// encode (the data converter refused the value).
func headerDetails(tool string) oncekey.Details {
	return oncekey.Details{Tool: tool, Outcome: oncekey.OutcomeRejected, Reason: "header not encodable"}
}
