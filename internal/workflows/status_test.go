package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// Once a person's decision settles an unknown record, the status query says what the record is
// now, not what it was at the last inspection, and drops the refusal of an earlier signal.
func TestStatusAfterResolutionIsTheSettledRecord(t *testing.T) {
	env, store := setup(t, nil)
	epoch := claim(t, store, "ok1_k", time.Minute)
	_, err := store.MarkUnknown(context.Background(), &oncekeystore.MarkUnknownParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: epoch})
	require.NoError(t, err)
	status := func() reconcile.StatusReport {
		v, err := env.QueryWorkflow(reconcile.QueryName)
		require.NoError(t, err)
		var st reconcile.StatusReport
		require.NoError(t, v.Get(&st))
		return st
	}
	var waiting reconcile.StatusReport
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Tenant: "other", ResolvedBy: "gina", RequestID: "r1"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		waiting = status()
		env.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied, ResolvedBy: "gina", RequestID: "r2"})
	}, 2*time.Minute)
	out := run(t, env)
	require.Equal(t, reconcile.NotApplied, out.Outcome)

	require.Equal(t, reconcile.StateWaiting, waiting.State)
	require.Equal(t, oncekeystore.StatusUnknown, waiting.RecordStatus)
	require.Contains(t, waiting.LastInvalidSignal, "tenant", "the refused signal shows while the workflow waits")
	require.Equal(t, "r1", waiting.LastInvalidRequestID)

	settled := status()
	require.Equal(t, reconcile.StateResolved, settled.State)
	require.Equal(t, reconcile.NotApplied, settled.Outcome)
	require.Equal(t, oncekeystore.StatusReleased, settled.RecordStatus, "the record was released by the decision")
	require.Empty(t, settled.LastInvalidSignal)
	require.Empty(t, settled.LastInvalidRequestID)
	rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, settled.RecordStatus, rec.Status, "the query agrees with the store")
}
