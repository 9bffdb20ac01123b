package faults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/faults"
)

// 64 workflows propose the same operation (one business key) at once, served by two worker
// processes. The first claimer is held inside the downstream before it commits until every other
// claimer has met its live claim at least once (and both processes have); then it is let go.
// One tool body runs, one effect lands, and all 64 receive its result.
func TestClaimers64(t *testing.T) {
	const n = 64
	e := newEnv(t, "claimers_64")
	e.child("c1", true)
	e.child("c2", true)
	req := faults.Request{RequestID: "shared", Customer: "acme", Subject: "one ticket for 64 proposals"}
	hold := e.ds.Arm(faults.PointBeforeCommit, req.RequestID)
	defer hold.Release()
	runs := make([]client.WorkflowRun, n)
	for i := range runs {
		runs[i] = e.startCalls(fmt.Sprintf("claimer-%02d", i), faults.CallsInput{
			Calls: []faults.Call{{Tool: faults.ToolCreateShared, Request: req}}, StartToClose: 30 * time.Second,
		})
	}
	hit := e.waitHit(hold)

	// Wait until the other 63 workflows have each finished at least one attempt (in_flight)
	// while the first is held: their first activity (the same activity ID in every run, the
	// workflow code being the same) is no longer pending.
	firstID := firstActivityID(t, e, runs[0].GetID())
	var owner string
	require.Eventually(t, func() bool {
		tried, held := 0, ""
		for _, run := range runs {
			d, err := e.c.DescribeWorkflow(e.ctx(time.Minute), run.GetID(), "")
			if err != nil {
				return false
			}
			first := false
			for _, a := range d.RawResponse.GetPendingActivities() {
				if a.GetActivityId() == firstID {
					first = true
				}
			}
			if first {
				held = run.GetID()
			} else {
				tried++
			}
		}
		owner = held
		return tried == n-1
	}, 5*time.Minute, 500*time.Millisecond, "not every claimer met the live claim")
	byWorker := func(w string) int {
		return e.ds.CountEvents(func(ev faults.WorkerEvent) bool {
			return ev.Worker == w && ev.Outcome == string(oncekey.OutcomeInFlight)
		})
	}
	e.waitEvents(n-1, "in_flight", outcome(faults.ToolCreateShared, oncekey.OutcomeInFlight))
	require.Positive(t, byWorker("c1"), "worker process c1 claimed")
	require.Positive(t, byWorker("c2"), "worker process c2 claimed")
	require.Empty(t, e.ds.EffectsFor(hit.Key))
	hold.Release()

	landed := faults.Receipt{}
	for _, run := range runs {
		out := e.calls(run)
		require.Equal(t, oncekey.OutcomeApplied, out[0].Label.Status, run.GetID())
		if landed.ID == "" {
			landed = out[0].Receipt
		}
		require.Equal(t, landed, out[0].Receipt, "%s got the one result", run.GetID())
	}
	require.Equal(t, 1, e.ds.Bodies(hit.Key), "one body execution")
	require.Equal(t, 1, e.ds.Arrivals(hit.Key))
	require.Len(t, e.ds.EffectsFor(hit.Key), 1)
	e.waitEvents(n-1, "replayed", outcome(faults.ToolCreateShared, oncekey.OutcomeReplayed))
	require.Equal(t, 1, e.ds.CountEvents(outcome(faults.ToolCreateShared, oncekey.OutcomeApplied)))
	e.check(1, 1)
	e.note("64 claimers (owner %s): 1 body, 1 effect %s; in_flight answers c1=%d c2=%d", owner[len(e.tq)+1:], landed.ID, byWorker("c1"), byWorker("c2"))
}

// firstActivityID returns the activity ID of the first activity the workflow scheduled.
func firstActivityID(t *testing.T, e *env, id string) string {
	t.Helper()
	var first string
	require.Eventually(t, func() bool {
		it := e.c.GetWorkflowHistory(e.ctx(time.Minute), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return false
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				first = a.GetActivityId()
				return true
			}
		}
		return false
	}, 3*time.Minute, 100*time.Millisecond)
	return first
}
