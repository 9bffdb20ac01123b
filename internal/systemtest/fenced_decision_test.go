package systemtest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// The same not-applied decision delivered twice (a retry after "not confirmed in time", a second
// person on call) must not land on the next unknown episode of the key: the first delivery
// releases the claim, the tool runs again and commits, its answer is lost (unknown again, epoch
// 2); the second delivery names epoch 1 and is refused. The downstream counts one effect.
func TestTwiceDeliveredDecisionLandsOnce(t *testing.T) {
	l := newLedger(faultErrBeforeCommit, faultLostAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.start(t, "twice-delivered", req, 10*time.Second)
	key := e.waitingKey(t)
	st, err := reconcile.Status(context.Background(), e.c, key)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Epoch)

	decision := reconcile.Resolution{Epoch: st.Epoch, Outcome: reconcile.NotApplied, ResolvedBy: "ana", Note: "nothing downstream", RequestID: "decision-1"}
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, decision))

	// The tool runs again, commits, and its answer is lost: unknown again at epoch 2.
	require.Eventually(t, func() bool {
		st, err = reconcile.Status(context.Background(), e.c, key)
		return err == nil && st.State == reconcile.StateWaiting && st.Epoch == 2
	}, 30*time.Second, 100*time.Millisecond, "the second episode did not come to wait for a person")
	effects, _ := l.counts()
	require.Equal(t, 1, effects)

	// The first decision, delivered again as it was sent (tenant included), is refused as stale.
	decision.Tenant = "default"
	require.NoError(t, e.c.SignalWorkflow(context.Background(), reconcile.WorkflowID(key), "", reconcile.SignalName, decision))
	require.Eventually(t, func() bool {
		st, err = reconcile.Status(context.Background(), e.c, key)
		return err == nil && st.LastInvalidRequestID == decision.RequestID
	}, 30*time.Second, 100*time.Millisecond, "the stale decision was not refused")
	require.Contains(t, st.LastInvalidSignal, "moved on")
	require.Equal(t, reconcile.StateWaiting, st.State)
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)
	require.Equal(t, int64(2), rec.Epoch)

	// Through the Go API the same stale decision is a *RefusedError.
	var refused *reconcile.RefusedError
	decision.RequestID = ""
	require.ErrorAs(t, reconcile.Resolve(context.Background(), e.c, "default", key, decision), &refused)
	require.Contains(t, refused.Reason, "moved on")

	// A decision for epoch 2 settles it.
	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, _ := json.Marshal(landed)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Epoch: 2, Outcome: reconcile.Applied, Result: body, EffectReference: landed.ID, ResolvedBy: "ana"}))
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, landed, got)
	effects, _ = l.counts()
	require.Equal(t, 1, effects, "the downstream saw one effect")
}

// reconcile.Resolve reports when the decision recorded is not the one it sent: here the same
// outcome was written to the store first (as `oncekey resolve --direct` does), so the workflow
// hands back that settlement, and Resolve says another resolution won instead of returning nil.
func TestResolveReportsAnotherResolutionWon(t *testing.T) {
	l := newLedger(faultErrBeforeCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.start(t, "another-won", req, 10*time.Second)
	key := e.waitingKey(t)
	_, err := reconcile.Record(context.Background(), e.store, nil, "default", key, reconcile.Resolution{
		Epoch: 1, Outcome: reconcile.NotApplied, ResolvedBy: "bob (oncekey-cli --direct)"})
	require.NoError(t, err)

	err = reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied, ResolvedBy: "ana"})
	var refused *reconcile.RefusedError
	require.ErrorAs(t, err, &refused)
	require.NotNil(t, refused.SettledAs)
	require.Equal(t, "bob (oncekey-cli --direct)", refused.SettledAs.ResolvedBy)
	require.Contains(t, refused.Reason, "another resolution")

	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	effects, _ := l.counts()
	require.Equal(t, 1, effects)
}
