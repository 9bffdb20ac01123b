package systemtest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// lateClaim holds the first Claim back until the reconciliation has looked for the record and
// found none, then lets it commit: the claim statement of an attempt the server had already timed
// out reaches the database after the reconciliation decided NotApplied. Later claims wait until
// that commit, so the late claim is in the store before any re-run claims.
type lateClaim struct {
	oncekeystore.Store
	mu        sync.Mutex
	claims    int
	inspected chan struct{} // closed when a Get first finds no record
	committed chan struct{} // closed when the first claim has committed
	once      sync.Once
}

func newLateClaim(s oncekeystore.Store) *lateClaim {
	return &lateClaim{Store: s, inspected: make(chan struct{}), committed: make(chan struct{})}
}

func (s *lateClaim) Claim(ctx context.Context, p *oncekeystore.ClaimParams) (*oncekeystore.ClaimResult, error) {
	s.mu.Lock()
	s.claims++
	n := s.claims
	s.mu.Unlock()
	wait := func(ch chan struct{}) error {
		select {
		case <-ch:
			return nil
		case <-time.After(time.Minute):
			return &oncekeystore.StoreUnavailableError{Op: "claim", Err: errors.New("test: the late claim never came due")}
		}
	}
	if n == 1 {
		if err := wait(s.inspected); err != nil {
			return nil, err
		}
		defer close(s.committed)
		return s.Store.Claim(context.WithoutCancel(ctx), p)
	}
	if err := wait(s.committed); err != nil {
		return nil, err
	}
	return s.Store.Claim(ctx, p)
}

func (s *lateClaim) Get(ctx context.Context, p *oncekeystore.GetParams) (*oncekeystore.Record, error) {
	rec, err := s.Store.Get(ctx, p)
	if errors.Is(err, oncekeystore.ErrNotFound) {
		s.once.Do(func() { close(s.inspected) })
	}
	return rec, err
}

// An Effectful call without an explicit step ID times out while its claim is still on the way to
// the database; the reconciliation finds no record and says NotApplied; the claim then commits and
// the attempt's body runs. The re-run must meet that claim (the same operation key), not make a
// second effect under a key of its own.
func TestE2ELateClaimAfterReconciledNotAppliedDefaultStep(t *testing.T) {
	l := newLedger()
	var lc *lateClaim
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful, WaitInFlight: 200 * time.Millisecond},
		func(s oncekeystore.Store) oncekeystore.Store { lc = newLateClaim(s); return lc })
	run := e.startWith(t, "late-claim-default-step", req, CallOptions{StartToClose: 2 * time.Second, NoStepID: true})
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	effects, bodies := l.counts()
	require.Equal(t, 1, effects, "the downstream saw one effect")
	require.Equal(t, 1, bodies, "only the late attempt ran the body; the re-runs met its claim")
	require.Equal(t, onlyTicket(t, l), got, "the workflow received the late attempt's result")
	key := e.onlyKey(t)
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Regexp(t, "^"+run.GetRunID()+"/[0-9]+$", rec.StepID)
	require.NoError(t, e.replay(t, true, "late-claim-default-step", reconcile.WorkflowID(key)))
}

// A re-run of a call without an explicit step ID times out after its effect landed: the
// workflow side derives the key of the timed-out re-run as the worker did (from the first
// attempt's activity ID), so the reconciliation looks at the record the re-run claimed and its
// receipt lookup finds the effect.
func TestE2ERerunTimesOutDefaultStep(t *testing.T) {
	l := newLedger(faultNotApplied, faultHangAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful, Lease: time.Second, Reconcile: receiptFrom(l)})
	run := e.startWith(t, "rerun-timeout-default-step", req, CallOptions{StartToClose: 2 * time.Second, NoStepID: true})
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 2, bodies)
	require.Equal(t, onlyTicket(t, l), got)
	key := e.onlyKey(t)
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, "receipt:CreateTicket", rec.ResolvedBy)
	require.NoError(t, e.replay(t, true, "rerun-timeout-default-step", reconcile.WorkflowID(key)))
}
