package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// heldClaim signals when the first Claim arrives and holds it until the test releases it; it
// signals when a Get first finds no record.
type heldClaim struct {
	oncekeystore.Store
	entered, inspected, release chan struct{}
	onceEntered, onceInspected  sync.Once
}

func (s *heldClaim) Claim(ctx context.Context, p *oncekeystore.ClaimParams) (*oncekeystore.ClaimResult, error) {
	s.onceEntered.Do(func() { close(s.entered) })
	select {
	case <-s.release:
	case <-time.After(time.Minute):
		return nil, &oncekeystore.StoreUnavailableError{Op: "claim", Err: errors.New("test: claim never released")}
	}
	return s.Store.Claim(context.WithoutCancel(ctx), p)
}

func (s *heldClaim) Get(ctx context.Context, p *oncekeystore.GetParams) (*oncekeystore.Record, error) {
	rec, err := s.Store.Get(ctx, p)
	if errors.Is(err, oncekeystore.ErrNotFound) {
		s.onceInspected.Do(func() { close(s.inspected) })
	}
	return rec, err
}

// The workflow is cancelled after its Effectful attempt started but before the attempt's claim
// reached the store. The hand-off reconciliation finds no record, and must wait for a late claim
// rather than settle NotApplied: the claim then lands, the body commits and hangs past its
// start-to-close timeout, and the unknown outcome is reconciled by a person.
func TestE2ECancelledBeforeClaimLands(t *testing.T) {
	l := newLedger(faultHangAfterCommit)
	hc := &heldClaim{entered: make(chan struct{}), inspected: make(chan struct{}), release: make(chan struct{})}
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful, Lease: time.Second},
		func(s oncekeystore.Store) oncekeystore.Store { hc.Store = s; return hc })
	ctx := testCtx(t)
	run := e.start(t, "cancelled-before-claim", req, 5*time.Second)
	select {
	case <-hc.entered:
	case <-ctx.Done():
		t.Fatal("the attempt never tried to claim")
	}
	require.NoError(t, e.c.CancelWorkflow(context.Background(), "cancelled-before-claim", ""))
	var canceled *temporal.CanceledError
	require.ErrorAs(t, run.Get(ctx, nil), &canceled, "the workflow ends cancelled")

	// The hand-off reconciliation looks for the record before the claim lands.
	select {
	case <-hc.inspected:
	case <-ctx.Done():
		t.Fatal("the hand-off reconciliation never inspected the store")
	}
	// No record exists yet; the key is in the reconciliation workflow's ID, in the parent's history.
	var key string
	for _, ev := range e.history(t, "cancelled-before-claim").Events {
		if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			key = strings.TrimPrefix(a.GetWorkflowId(), reconcile.WorkflowIDPrefix)
		}
	}
	require.NotEmpty(t, key, "no reconciliation was started on cancel")
	require.Eventually(t, func() bool {
		st, err := reconcile.Status(context.Background(), e.c, key)
		return err == nil && st.State == reconcile.StateWaitingForClaim
	}, 30*time.Second, 50*time.Millisecond, "the hand-off reconciliation does not wait for the late claim")
	close(hc.release)

	// The claim lands, the body commits and hangs; the attempt ends unknown at its timeout and
	// the reconciliation waits for a person.
	require.Equal(t, key, e.waitingKey(t))
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)
	landed, ok := l.lookup(key)
	require.True(t, ok, "the effect landed")
	body, _ := json.Marshal(landed)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Epoch: 1, Outcome: reconcile.Applied, Result: body, EffectReference: landed.ID, ResolvedBy: "alice",
	}))
	var out reconcile.Output
	require.NoError(t, e.c.GetWorkflow(context.Background(), reconcile.WorkflowID(key), "").Get(ctx, &out))
	require.Equal(t, reconcile.Applied, out.Outcome)
	rec, err = e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	require.NoError(t, e.replay(t, true, "cancelled-before-claim", reconcile.WorkflowID(key)))
}
