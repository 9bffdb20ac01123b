package interceptor_test

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

// A Verify hook that panics runs after the effect landed: the outcome is unknown and must go to
// reconciliation, not surface as a plain failure (which a caller reads as "no effect").
func TestAdversarialVerifyPanicAfterEffectIsReconciled(t *testing.T) {
	ds := newDownstream()
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful, Verify: func(ctx context.Context, op oncekey.Operation, result any) error {
		panic("verify hook bug")
	}})
	resolved := Ticket{ID: "T-1", Customer: "acme", Subject: "printer on fire", Seq: 1}
	body, _ := json.Marshal(resolved)
	resolveLater(t, s, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: body, ResolvedBy: "dana"}, func(st reconcile.StatusReport) {
		require.Contains(t, st.Reason, "panicked")
	})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err, "the call was reconciled as applied")
	require.Equal(t, resolved, out[0].Ticket)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	recs := s.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, oncekeystore.StatusApplied, recs[0].Status)
	require.Equal(t, "dana", recs[0].ResolvedBy)
}

// A tool that keeps failing after it may have reached the downstream, with a receipt lookup that
// proves each time that nothing landed, is re-run after every reconciliation. Those re-runs must
// follow the user's retry policy like every other retry: re-running at once turns an unlimited
// policy into a hot loop that hammers the downstream and fills the workflow's history.
func TestAdversarialReconciledNotAppliedBacksOff(t *testing.T) {
	ds := newDownstream(faultErrorBeforeCommit, faultErrorBeforeCommit, faultErrorBeforeCommit, faultErrorBeforeCommit)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful, Reconcile: func(ctx context.Context, r oncekey.ReconcileRequest) (oncekey.Receipt, error) {
		ds.mu.Lock()
		_, ok := ds.byKey[r.OperationKey]
		ds.mu.Unlock()
		if ok {
			return oncekey.Receipt{Outcome: oncekey.ReceiptApplied}, nil
		}
		return oncekey.Receipt{Outcome: oncekey.ReceiptNotApplied, Note: "no such ticket downstream"}, nil
	}})
	sleeps := timers(s.env)
	out := s.run(t, workflowInput{Initial: time.Second, Coefficient: 2, MaxInterval: time.Minute,
		Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 5, bodies)
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, sleeps())
}
