package interceptor_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
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
	resolveLater(t, s, reconcile.Resolution{Outcome: reconcile.Applied, Result: body, ResolvedBy: "dana"}, func(st reconcile.StatusReport) {
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
	require.Equal(t, oncekey.StatusApplied, recs[0].Status)
	require.Equal(t, "dana", recs[0].ResolvedBy)
}
