package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// heartbeatUntilDone heartbeats every 100 ms (the SDK sends at most one per 0.8 × the heartbeat
// timeout) until ctx ends, records and returns context.Cause(ctx): activity.ErrActivityPaused
// once `temporal activity pause` has reached the body through a heartbeat's answer.
func (l *ledger) heartbeatUntilDone(ctx context.Context) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return l.interruptedBy(ctx)
		case <-t.C:
		}
	}
}

// interruptedBy records and returns context.Cause(ctx) of a body whose context ended.
func (l *ledger) interruptedBy(ctx context.Context) error {
	cause := context.Cause(ctx)
	l.mu.Lock()
	l.interrupted = append(l.interrupted, cause)
	l.mu.Unlock()
	return cause
}

func (l *ledger) interruptions() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.interrupted...)
}

// pauseRunningActivity waits until the workflow id has one pending activity and ready() holds,
// then pauses that activity with the Temporal CLI (`temporal activity pause`) on the test server,
// and keeps its ID in e.pausedActivity.
func (e *e2e) pauseRunningActivity(t *testing.T, id string, ready func() bool) {
	t.Helper()
	e.pausedActivity = e.runningActivity(t, id, ready)
	e.temporalCLI(t, "activity", "pause", "--workflow-id", id, "--activity-id", e.pausedActivity)
}

// temporalCLI runs the Temporal CLI with args against the test server's default namespace.
func (e *e2e) temporalCLI(t *testing.T, args ...string) {
	t.Helper()
	bin := testenv.TemporalBinary()
	if bin == "" {
		testenv.Missing(t, "no Temporal CLI to run `temporal %s`", strings.Join(args, " "))
	}
	args = append(args, "--address", testenv.TemporalHostPort(t), "--namespace", "default", "--identity", "oncekey-test")
	out, err := exec.Command(bin, args...).CombinedOutput()
	require.NoError(t, err, "temporal %s: %s", strings.Join(args, " "), out)
}

// pausable are the call options of a long Effectful body that heartbeats: a start-to-close
// timeout far beyond the test, so only the pause ends it.
var pausable = CallOptions{StartToClose: time.Minute, Heartbeat: time.Second}

// `temporal activity pause` on an Effectful tool whose long body heartbeats and has not sent its
// request downstream yet: the pause reaches the body (its context ends with
// activity.ErrActivityPaused), the body says it did not act (oncekey.NotApplied), so its claim is
// given back and nothing happened downstream. `temporal activity unpause` runs the call again,
// which claims the released record and lands the one effect. Nothing goes to reconciliation.
func TestE2EActivityPauseBeforeTheDownstreamGivesTheClaimBack(t *testing.T) {
	l := newLedger(faultHeartbeatBeforeCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.startWith(t, "activity-pause-before", req, pausable)
	e.pauseRunningActivity(t, "activity-pause-before", func() bool { _, bodies := l.counts(); return bodies == 1 })
	e.pausedBodyGaveItsClaimBack(t, "activity-pause-before", run, l)

	res, err := reconcile.List(context.Background(), e.store, oncekeystore.ListParams{Status: oncekeystore.StatusApplied})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	require.EqualValues(t, 2, res.Records[0].Epoch, "the second run claimed the released record")
	_, err = e.c.DescribeWorkflow(context.Background(), reconcile.WorkflowID(res.Records[0].OperationKey), "")
	var nf *serviceerror.NotFound
	require.True(t, errors.As(err, &nf), "no reconciliation was started: %v", err)
}

// `temporal activity pause` on an Effectful tool whose body already sent its request and the
// downstream committed: the body cannot say the effect did not land, so the outcome is unknown and
// goes to reconciliation; the resolution settles the call with the one effect's result. The tool
// never runs again.
func TestE2EActivityPauseAfterTheDownstreamIsReconciled(t *testing.T) {
	l := newLedger(faultHeartbeatAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.startWith(t, "activity-pause-after", req, pausable)
	e.pauseRunningActivity(t, "activity-pause-after", func() bool { effects, _ := l.counts(); return effects == 1 })

	key := e.waitingKey(t)
	causes := l.interruptions()
	require.Len(t, causes, 1)
	require.ErrorIs(t, causes[0], activity.ErrActivityPaused, "the pause, not a timeout, ended the body")
	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, _ := json.Marshal(landed)
	_, err := reconcile.ResolveOutput(context.Background(), e.c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: body, ResolvedBy: "ada"})
	require.NoError(t, err)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, landed, got)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects, "never a second effect")
	require.Equal(t, 1, bodies, "the body did not run again")
}

// `temporal activity pause` on an Effectful tool whose long body never heartbeats and waits for
// its context to end before it sends its request downstream: oncekey's heartbeats (with the
// lease renewal) bring the body the pause, the body says it did not act, and its claim is given
// back; `temporal activity unpause` runs the call again, which lands the one effect. With a
// HeartbeatTimeout the SDK sends a heartbeat at most every 0.8 × it; without one, every
// worker.Options.DefaultHeartbeatThrottleInterval (30 s by default; 500 ms here, so the test is
// short).
func TestE2EActivityPauseReachesABodyThatNeverHeartbeats(t *testing.T) {
	for _, tc := range []struct {
		name      string
		heartbeat time.Duration
		// throttle, if set, is the worker's DefaultHeartbeatThrottleInterval.
		throttle time.Duration
		// maxThrottle, if set, is the worker's MaxHeartbeatThrottleInterval (the throttle is
		// 0.8 × HeartbeatTimeout, capped by it).
		maxThrottle time.Duration
	}{
		// A HeartbeatTimeout well above the throttle, so that a loaded machine does not time the
		// attempt out between two heartbeats.
		{name: "heartbeat-timeout", heartbeat: 6 * time.Second, maxThrottle: 500 * time.Millisecond},
		{name: "no-heartbeat-timeout", throttle: 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(faultWaitBeforeCommit)
			e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful, Lease: 1500 * time.Millisecond})
			if tc.throttle > 0 || tc.maxThrottle > 0 {
				e.w.Stop()
				e.startWorkerWith(t, sdkworker.Options{DefaultHeartbeatThrottleInterval: tc.throttle, MaxHeartbeatThrottleInterval: tc.maxThrottle})
			}
			id := "pause-never-heartbeats-" + tc.name
			run := e.startWith(t, id, req, CallOptions{StartToClose: time.Minute, Heartbeat: tc.heartbeat})
			e.pauseRunningActivity(t, id, func() bool { _, bodies := l.counts(); return bodies == 1 })
			e.pausedBodyGaveItsClaimBack(t, id, run, l)
		})
	}
}

// progress is what a body records as its heartbeat details.
type progress struct {
	Stage string `json:"stage"`
	Done  int    `json:"done"`
}

var bodyProgress = progress{Stage: "validated", Done: 3}

// heartbeatProgress decodes the heartbeat details of a pending activity as a progress (zero when
// it has none).
func heartbeatProgress(a *workflowpb.PendingActivityInfo) progress {
	var p progress
	if a.GetHeartbeatDetails() != nil {
		_ = converter.GetDefaultDataConverter().FromPayloads(a.GetHeartbeatDetails(), &p)
	}
	return p
}

// A long Effectful body that heartbeats its progress once and then never again keeps that
// progress on the server while oncekey heartbeats for it: DescribeWorkflow shows the pending
// activity's last heartbeat time moving on (oncekey's heartbeats, which also keep it from its
// 2 s HeartbeatTimeout) and its heartbeat details still the body's.
func TestE2EBodyHeartbeatKeepsTheBodysDetails(t *testing.T) {
	l := newLedger(faultProgressBeforeGate)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful, Lease: 1500 * time.Millisecond})
	// Heartbeats at most every 500 ms (the throttle) against a 6 s HeartbeatTimeout, so that a
	// loaded machine does not time the attempt out between two of them.
	e.w.Stop()
	e.startWorkerWith(t, sdkworker.Options{MaxHeartbeatThrottleInterval: 500 * time.Millisecond})
	run := e.startWith(t, "body-heartbeat-details", req, CallOptions{StartToClose: time.Minute, Heartbeat: 6 * time.Second})
	var first time.Time
	require.Eventually(t, func() bool {
		a, ok := e.pendingActivity(t, "body-heartbeat-details")
		if !ok || heartbeatProgress(a) != bodyProgress {
			return false
		}
		first = a.GetLastHeartbeatTime().AsTime()
		return true
	}, 20*time.Second, 50*time.Millisecond, "the body's heartbeat never reached the server")
	// Watch the pending activity until oncekey has heartbeated for it several times; stop at the
	// first sight of anything else (checked after the wait, on the test's goroutine).
	var (
		beats   int
		problem string
	)
	last := first
	require.Eventually(t, func() bool {
		a, ok := e.pendingActivity(t, "body-heartbeat-details")
		switch {
		case !ok:
			problem = "the activity ended while the body waited"
		case heartbeatProgress(a) != bodyProgress:
			problem = fmt.Sprintf("the body's heartbeat details were replaced: %+v", heartbeatProgress(a))
		case a.GetAttempt() != 1:
			problem = fmt.Sprintf("attempt %d: the first timed out", a.GetAttempt())
		}
		if problem != "" {
			return true
		}
		if at := a.GetLastHeartbeatTime().AsTime(); at.After(last) {
			beats++
			last = at
		}
		return beats >= 3 && last.Sub(first) > 3*time.Second
	}, 30*time.Second, 100*time.Millisecond, "oncekey did not heartbeat for the body")
	require.Empty(t, problem)
	close(l.gate)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, "T-1", got.ID)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
}

// pausedBodyGaveItsClaimBack checks what follows a pause that reached the body of workflow id
// before its downstream: the body gave its claim back and nothing happened downstream; Temporal
// keeps the activity paused (the dev server does so even on its last attempt) until `temporal
// activity unpause`, which runs the call again and lands the one effect.
func (e *e2e) pausedBodyGaveItsClaimBack(t *testing.T, id string, run client.WorkflowRun, l *ledger) {
	t.Helper()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		res, err := reconcile.List(ctx, e.store, oncekeystore.ListParams{Status: oncekeystore.StatusReleased})
		return err == nil && len(res.Records) == 1
	}, 20*time.Second, 50*time.Millisecond, "the paused body did not give its claim back")
	effects, _ := l.counts()
	require.Zero(t, effects)
	require.Eventually(t, func() bool {
		a, ok := e.pendingActivity(t, id)
		return ok && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_PAUSED
	}, 20*time.Second, 50*time.Millisecond, "the activity is not paused")
	e.temporalCLI(t, "activity", "unpause", "--workflow-id", id, "--activity-id", e.pausedActivity)

	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, "T-1", got.ID)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects, "one effect downstream")
	require.Equal(t, 2, bodies, "the paused body gave its claim back and the call ran again")
	causes := l.interruptions()
	require.Len(t, causes, 1)
	require.ErrorIs(t, causes[0], activity.ErrActivityPaused, "the pause, not a timeout, ended the body")
	require.Equal(t, []oncekey.Outcome{oncekey.OutcomeFailed, oncekey.OutcomeApplied}, e.outcomes(),
		"the paused attempt released its claim (not applied), the next one applied")
}

// pendingActivity returns the one pending activity of the workflow id, if it has one.
func (e *e2e) pendingActivity(t *testing.T, id string) (*workflowpb.PendingActivityInfo, bool) {
	t.Helper()
	d, err := e.c.DescribeWorkflow(context.Background(), id, "")
	if err != nil || len(d.RawResponse.GetPendingActivities()) != 1 {
		return nil, false
	}
	return d.RawResponse.GetPendingActivities()[0], true
}

// The next attempt of an Idempotent tool starts with the progress its first attempt heartbeated
// (Temporal hands an attempt the last heartbeat details). Its body never heartbeats and waits
// before its downstream: oncekey heartbeats for it with the first attempt's details, sent again
// unchanged, so the server keeps them and a pause still reaches the body, which gives its claim
// back; unpaused, the call runs once.
func TestE2EActivityPauseReachesARetryThatStartedWithDetails(t *testing.T) {
	l := newLedger(faultProgressThenFail, faultWaitBeforeCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Idempotent, Lease: 1500 * time.Millisecond})
	e.w.Stop()
	e.startWorkerWith(t, sdkworker.Options{MaxHeartbeatThrottleInterval: 500 * time.Millisecond})
	id := "pause-retry-with-details"
	run := e.startWith(t, id, req, CallOptions{StartToClose: time.Minute, Heartbeat: 6 * time.Second})
	// The second attempt runs and oncekey heartbeats for it: its last heartbeat time moves on
	// while the details stay the first attempt's.
	var seen time.Time
	require.Eventually(t, func() bool {
		a, ok := e.pendingActivity(t, id)
		if !ok || a.GetAttempt() != 2 {
			return false
		}
		_, bodies := l.counts()
		require.Equal(t, bodyProgress, heartbeatProgress(a), "the first attempt's details are kept")
		at := a.GetLastHeartbeatTime().AsTime()
		if seen.IsZero() && bodies == 2 {
			seen = at
			return false
		}
		return !seen.IsZero() && at.After(seen)
	}, 30*time.Second, 100*time.Millisecond, "oncekey did not heartbeat for the second attempt")

	e.pauseRunningActivity(t, id, func() bool { return true })
	require.Eventually(t, func() bool { return len(l.interruptions()) == 1 }, 20*time.Second, 50*time.Millisecond,
		"the pause did not reach the second attempt's body")
	require.ErrorIs(t, l.interruptions()[0], activity.ErrActivityPaused)
	require.Eventually(t, func() bool {
		a, ok := e.pendingActivity(t, id)
		return ok && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_PAUSED
	}, 20*time.Second, 50*time.Millisecond, "the activity is not paused")
	effects, _ := l.counts()
	require.Zero(t, effects)
	e.temporalCLI(t, "activity", "unpause", "--workflow-id", id, "--activity-id", e.pausedActivity)

	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, "T-1", got.ID)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects, "one effect downstream")
	require.Equal(t, 3, bodies)
}
