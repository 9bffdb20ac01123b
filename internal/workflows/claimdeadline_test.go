package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// With a claim deadline, a missing record is a claim that may still land: the workflow waits,
// answering waiting_for_claim, and settles from the record once the late claim arrives.
func TestLateClaimBeforeClaimDeadlineIsWaitedFor(t *testing.T) {
	env, store := setup(t, nil)
	in := input
	in.ClaimDeadline = env.Now().Add(10 * time.Minute)
	var st reconcile.StatusReport
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(reconcile.QueryName)
		require.NoError(t, err)
		require.NoError(t, v.Get(&st))
		epoch := claim(t, store, "ok1_k", time.Minute)
		_, err = store.Complete(context.Background(), &oncekeystore.CompleteParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: epoch, Status: oncekeystore.StatusApplied})
		require.NoError(t, err)
	}, 3*time.Minute)
	env.ExecuteWorkflow(reconcile.WorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out reconcile.Output
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, reconcile.StateWaitingForClaim, st.State)
	require.True(t, in.ClaimDeadline.Equal(st.ClaimDeadline), "the query names the deadline")
	require.Equal(t, reconcile.Applied, out.Outcome, "the late claim's outcome, not NotApplied")
}

// Once the claim deadline has passed with still no record, nothing ran: NotApplied, as without
// a deadline.
func TestNoRecordPastClaimDeadlineMeansNotApplied(t *testing.T) {
	env, _ := setup(t, nil)
	in := input
	in.ClaimDeadline = env.Now().Add(10 * time.Minute)
	var state reconcile.State
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(reconcile.QueryName)
		require.NoError(t, err)
		var st reconcile.StatusReport
		require.NoError(t, v.Get(&st))
		state = st.State
	}, 9*time.Minute)
	env.ExecuteWorkflow(reconcile.WorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out reconcile.Output
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, reconcile.StateWaitingForClaim, state, "still waiting just before the deadline")
	require.Equal(t, reconcile.NotApplied, out.Outcome)
	require.False(t, env.Now().Before(in.ClaimDeadline), "settled only after the deadline")
}
