package interceptor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
)

// OnHitFailFast: a repeat of a settled operation (the same step, or an identical call without a
// step ID) is refused with a typed, non-retryable error; the body does not run, nothing is
// replayed and the record is untouched.
func TestSuiteFailFastRefusesRepeat(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stepID string
		effect oncekey.Effect
	}{
		{"effectful step", "create_ticket", oncekey.Effectful},
		{"effectful call", "", oncekey.Effectful},
		{"idempotent call", "", oncekey.Idempotent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := newDownstream()
			s := setupSuite(t, ds, oncekey.Policy{Effect: tc.effect, OnHit: oncekey.OnHitFailFast})
			out := s.run(t, workflowInput{Calls: []stepCall{
				{StepID: tc.stepID, Tool: "CreateTicket", Req: req1},
				{StepID: tc.stepID, Tool: "CreateTicket", Req: req1},
			}})
			require.Empty(t, out[0].Err)
			require.Equal(t, oncekey.ErrTypeRepeatRefused, out[1].Type, out[1].Err)
			require.Contains(t, out[1].Detail, "OnHitFailFast")
			require.Equal(t, oncekey.OutcomeConflict, out[1].Label)
			require.Equal(t, oncekey.NextStop, out[1].Next)
			require.True(t, out[1].Benign, "an expected refusal")
			require.Empty(t, out[1].Ticket.ID, "nothing replayed")
			effects, bodies := ds.counts()
			require.Equal(t, 1, effects)
			require.Equal(t, 1, bodies)
			recs := s.records(t)
			require.Len(t, recs, 1)
			require.Equal(t, oncekeystore.StatusApplied, recs[0].Status, "the record is untouched")
			require.Equal(t, int64(1), recs[0].Epoch)
		})
	}
}

// A remembered failure is settled too: its repeat is refused, not given the failure again.
func TestSuiteFailFastRefusesRepeatOfFailure(t *testing.T) {
	ds := newDownstream(faultFailed)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful, OnHit: oncekey.OnHitFailFast, RememberFailures: true})
	out := s.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Equal(t, oncekey.ErrTypeFailed, out[0].Type, out[0].Err)
	require.Equal(t, oncekey.ErrTypeRepeatRefused, out[1].Type, out[1].Err)
	require.Contains(t, out[1].Detail, "already failed")
	_, bodies := ds.counts()
	require.Equal(t, 1, bodies)
	recs := s.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, oncekeystore.StatusFailed, recs[0].Status)
}

// The call's own follow-up is not a repeat: an Effectful call whose response was lost is
// reconciled as applied by its receipt lookup, and the workflow side's re-run through the claim
// path (a new activity, carrying the first attempt's activity ID) gets the stored result.
func TestSuiteFailFastReplaysOwnRerun(t *testing.T) {
	ds := newDownstream(faultLostAfterCommit)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful, OnHit: oncekey.OnHitFailFast,
		Reconcile: func(ctx context.Context, r oncekey.ReconcileRequest) (oncekey.Receipt, error) {
			ds.mu.Lock()
			tk, ok := ds.byKey[r.OperationKey]
			ds.mu.Unlock()
			if !ok {
				return oncekey.Receipt{Outcome: oncekey.ReceiptNotFound}, nil
			}
			return oncekey.Receipt{Outcome: oncekey.ReceiptApplied, Result: tk, EffectReference: tk.ID}, nil
		}})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err, "the re-run after the reconciliation is the call's own, not a repeat")
	require.Equal(t, "T-1", out[0].Ticket.ID)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
}

// KeyOnly: the body gets the operation key, nothing is claimed or stored, and every call runs
// the body; a downstream that deduplicates on the key makes the repeat one effect.
func TestSuiteKeyOnly(t *testing.T) {
	ds := newDownstream()
	ds.dedupe = true
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Idempotent, KeyOnly: true})
	other := req1
	other.Subject = "another"
	out := s.run(t, workflowInput{Calls: []stepCall{
		{Tool: "CreateTicket", Req: req1},
		{Tool: "CreateTicket", Req: req1},
		{Tool: "CreateTicket", Req: other},
	}})
	for _, r := range out {
		require.Empty(t, r.Err)
	}
	require.Equal(t, out[0].Ticket, out[1].Ticket)
	effects, bodies := ds.counts()
	require.Equal(t, 3, bodies, "no claim, no replay: the body runs every time")
	require.Equal(t, 2, effects, "the downstream deduplicated the repeat on the key")
	require.Len(t, ds.keys, 3)
	require.Regexp(t, `^ok1_[0-9a-f]{64}$`, ds.keys[0])
	require.Equal(t, ds.keys[0], ds.keys[1], "an identical call has the same key")
	require.NotEqual(t, ds.keys[0], ds.keys[2])
	require.Empty(t, s.records(t), "nothing is claimed")
}

// A Version bump with Previous: a repeat of an operation recorded under the older version replays
// its record (the downstream still counts one effect); without Previous the same repeat is a
// fingerprint mismatch.
func TestSuitePreviousVersionReplaysOlderRecord(t *testing.T) {
	for _, st := range suiteStores {
		for _, tc := range []struct {
			name   string
			stepID string
		}{{"call", ""}, {"step", "create_ticket"}} {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) { testPreviousVersion(t, st.store, tc.stepID) })
		}
	}
}

// testPreviousVersion runs the Version migration against the store store gives, for a call with
// step ID stepID (or none).
func testPreviousVersion(t *testing.T, store func(t *testing.T, mem oncekeystore.Store) oncekeystore.Store, stepID string) {
	t.Helper()
	ds := newDownstream()
	shared := newSharedStore(t, store)
	calls := []stepCall{{StepID: stepID, Tool: "CreateTicket", Req: req1}}

	v1 := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful, Version: "1"}, suiteConfig{store: shared})
	out := v1.run(t, workflowInput{Calls: calls})
	require.Empty(t, out[0].Err)
	first := out[0].Ticket

	bumped := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful, Version: "2"}, suiteConfig{store: shared})
	out = bumped.run(t, workflowInput{Calls: calls})
	require.Equal(t, oncekey.ErrTypeFingerprintMismatch, out[0].Type, "without Previous the older record is refused: %s", out[0].Err)

	v2 := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful, Version: "2",
		Previous: []oncekey.PreviousVersion{{Version: "1"}}}, suiteConfig{store: shared})
	out = v2.run(t, workflowInput{Calls: calls})
	require.Empty(t, out[0].Err)
	require.Equal(t, first, out[0].Ticket, "the older record's result is replayed")
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)

	// A new operation under the new version is claimed under it.
	other := req1
	other.Subject = "new after the deploy"
	newStep := ""
	if stepID != "" {
		newStep = stepID + "-new"
	}
	v2 = setupSuiteWith(t, ds, v2.policy(t), suiteConfig{store: shared})
	out = v2.run(t, workflowInput{Calls: []stepCall{{StepID: newStep, Tool: "CreateTicket", Req: other}}})
	require.Empty(t, out[0].Err)
	effects, _ = ds.counts()
	require.Equal(t, 2, effects)
	recs, err := shared(nil).List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	versions := map[string]int{}
	for _, r := range recs.Records {
		versions[r.Version]++
	}
	require.Equal(t, map[string]int{"1": 1, "2": 1}, versions)
}

// policy returns the CreateTicket policy of s.
func (s *suiteEnv) policy(t *testing.T) oncekey.Policy {
	t.Helper()
	p, ok := s.reg.Policy("CreateTicket")
	require.True(t, ok)
	return p
}

// newSharedStore returns a suiteConfig.store that hands every suite the one store store makes
// (the first suite's memstore, or a pgstore), so that workers of two versions see one store.
func newSharedStore(t *testing.T, store func(t *testing.T, mem oncekeystore.Store) oncekeystore.Store) func(oncekeystore.Store) oncekeystore.Store {
	t.Helper()
	var st oncekeystore.Store
	return func(mem oncekeystore.Store) oncekeystore.Store {
		if st == nil {
			st = store(t, mem)
		}
		return st
	}
}
