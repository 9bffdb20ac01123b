package interceptor

import (
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
)

// checkAfterTimeoutChangeID is the workflow.GetVersion change ID under which an Idempotent or
// Transactional call whose last attempt ended in a timeout is followed by a check of its record
// (checkAfterTimeout). Histories recorded before it replay with the timeout as the call's error.
const checkAfterTimeoutChangeID = "oncekey-check-after-timeout"

// checkKey marks the workflow context of the check's ExecuteActivity.
type checkKey struct{}

// isCheck reports whether ctx schedules the check of a record (checkAfterTimeout).
func isCheck(ctx workflow.Context) bool {
	v, _ := ctx.Value(checkKey{}).(bool)
	return v
}

// checkAfterTimeout returns the future of an Idempotent or Transactional call scheduled as f.
// It is f's result and error, except when Temporal's retries of the call end in a timeout after
// the tool may have started (start-to-close, heartbeat or schedule-to-close): the record, not
// the timeout, knows whether the effect landed. The step is then scheduled once more as a check
// (wire.HeaderCheck), which the worker answers from the record through the claim path without
// running the tool, as the Effectful loop's re-run after an Applied decision does
// (appliedThroughClaimChangeID): an applied record's result reaches the call as applied, reason
// confirmed; a free record is answered with a retryable NotApplied error (nothing landed,
// repeating is safe); a pending one with InFlight. The check waits for a pending record as long as
// the timed-out attempt's lease can keep it (checkWait: the lease and 5 s), with a
// start-to-close timeout to match (checkTimeout), so a body that overran its timeout is waited
// for: its transaction commits (applied) or its lease runs out and the check takes the record
// over (NotApplied). A check that ends without oncekey's answer (no worker took it, or its worker
// died) leaves the first timeout as the call's error, and so does a key that depends on the
// activity ID (the check is a new activity with an ID of its own).
func (c scheduled) checkAfterTimeout(ctx workflow.Context, f workflow.Future) workflow.Future {
	if c.policy.KeyOnly {
		// A key-only tool keeps no record to read: its timeout stays the call's error.
		return f
	}
	if workflow.GetVersion(ctx, checkAfterTimeoutChangeID, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return f
	}
	out, s := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		var raw converter.RawValue
		err := f.Get(gctx, &raw)
		if err == nil {
			c.settleRaw(s, raw)
			return
		}
		if !timedOutAfterStart(err) || gctx.Err() != nil || !c.keyWithoutActivityID(gctx) {
			s.SetError(err)
			return
		}
		workflow.GetLogger(gctx).Info("oncekey: the call's last attempt timed out; reading its record", "tool", c.name)
		ao := workflow.GetActivityOptions(gctx)
		rp := &temporal.RetryPolicy{}
		if ao.RetryPolicy != nil {
			*rp = *ao.RetryPolicy
		}
		rp.MaximumAttempts = 1
		ao.RetryPolicy = rp
		// The timed-out attempt's body may still hold the record (and, for a Transactional tool,
		// its transaction) until its lease runs out: the check waits for that on the worker
		// (checkWait), and gets the time to, whatever the call's own timeouts.
		need := checkTimeout(c.policy)
		ao.StartToCloseTimeout = max(ao.StartToCloseTimeout, need)
		if ao.ScheduleToCloseTimeout > 0 {
			ao.ScheduleToCloseTimeout = max(ao.ScheduleToCloseTimeout, need)
		}
		cctx := workflow.WithValue(workflow.WithActivityOptions(gctx, ao), checkKey{}, true)
		var checked converter.RawValue
		cerr := workflow.ExecuteActivity(cctx, c.tool, c.args...).Get(gctx, &checked)
		switch _, answered := oncekey.ErrorDetails(cerr); {
		case cerr == nil:
			c.settleRaw(s, confirmed(checked))
		case answered:
			s.SetError(cerr)
		default:
			s.SetError(err)
		}
	})
	return out
}

// checkMargin is what the check waits beyond the lease (checkWait): the polls' backoff, and the
// store's clock against the worker's. checkSlack is the check's time beyond its wait: the claim,
// the release, the answer.
const (
	checkMargin = 5 * time.Second
	checkSlack  = 10 * time.Second
)

// checkWait is how long the check of a call with policy p waits on the worker for a pending
// record to settle or become free: the lease of the attempt that timed out (which stopped
// renewing it when it timed out, so the record is settled or free by then), and checkMargin.
func checkWait(p oncekey.Policy) time.Duration {
	lease := p.Lease
	if lease <= 0 {
		lease = oncekey.DefaultLease
	}
	return lease + checkMargin
}

// checkTimeout is the start-to-close timeout of the check (at least): its wait and checkSlack.
func checkTimeout(p oncekey.Policy) time.Duration { return checkWait(p) + checkSlack }

// timedOutAfterStart reports whether err is a timeout of an activity that may have started its
// tool: start-to-close, heartbeat or schedule-to-close (not schedule-to-start).
func timedOutAfterStart(err error) bool {
	var toErr *temporal.TimeoutError
	if !errors.As(err, &toErr) {
		return false
	}
	switch toErr.TimeoutType() {
	case enumspb.TIMEOUT_TYPE_START_TO_CLOSE, enumspb.TIMEOUT_TYPE_HEARTBEAT, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE:
		return true
	}
	return false
}

// keyWithoutActivityID reports whether the call's operation key does not depend on the activity
// ID, so that the check (a new activity) claims the call's own record.
func (c scheduled) keyWithoutActivityID(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	op := oncekey.Operation{Namespace: info.Namespace, Tenant: c.tenant, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		StepID: c.stepID, Tool: c.name, ActivityType: c.tool, Args: c.args, ArgsJSON: c.toolArgs}
	ok, err := recorded(ctx, func() (ok bool) {
		defer func() {
			if recover() != nil {
				ok = false // a panicking key function: the worker refuses the call too
			}
		}()
		_, err := keyWithoutActivityID(c.policy, op)
		return err == nil
	})
	return err == nil && ok
}
