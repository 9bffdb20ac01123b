package systemtest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/reconcile"
)

// `temporal activity reset` (here its API, ResetActivity) on an Effectful tool whose body already
// reached its downstream and hangs: the attempt it schedules meets the claim, so the effect is
// never repeated; the outcome goes to reconciliation, and the resolution settles the call with
// the one effect's result. (The test does not see whether the server ran a further attempt
// while the first still hung or only after it ended; either way the body ran once.)
func TestE2EActivityResetNeverRepeatsTheEffect(t *testing.T) {
	l := newLedger(faultHangAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful, Lease: time.Second, WaitInFlight: 200 * time.Millisecond})
	run := e.start(t, "activity-reset", req, 4*time.Second)
	ctx := context.Background()
	var activityID string
	require.Eventually(t, func() bool {
		effects, _ := l.counts()
		d, err := e.c.DescribeWorkflow(ctx, "activity-reset", "")
		if err != nil || effects != 1 || len(d.RawResponse.GetPendingActivities()) != 1 {
			return false
		}
		activityID = d.RawResponse.GetPendingActivities()[0].GetActivityId()
		return true
	}, 20*time.Second, 50*time.Millisecond, "the body never reached its downstream")
	_, err := e.c.WorkflowService().ResetActivity(ctx, &workflowservice.ResetActivityRequest{
		Namespace: "default",
		Execution: &commonpb.WorkflowExecution{WorkflowId: "activity-reset"},
		Activity:  &workflowservice.ResetActivityRequest_Id{Id: activityID},
		Identity:  "oncekey-test",
	})
	require.NoError(t, err)
	key := e.waitingKey(t)
	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, _ := json.Marshal(landed)
	_, err = reconcile.ResolveOutput(ctx, e.c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: body, ResolvedBy: "ada"})
	require.NoError(t, err)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, landed, got)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects, "the reset never repeated the effect")
	require.Equal(t, 1, bodies, "the attempts after the reset met the claim; the body did not run again")
}
