package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

// runHandOffIfImplemented runs the oncekeystore.HandOffStore subtests under "HandOff" when the
// stores newStore makes implement it, and skips them (saying so) otherwise.
func runHandOffIfImplemented(t *testing.T, newStore func(t *testing.T) oncekeystore.Store) {
	t.Run("HandOff", func(t *testing.T) {
		t.Parallel()
		if _, ok := newStore(t).(oncekeystore.HandOffStore); !ok {
			t.Skip("the store does not implement oncekeystore.HandOffStore: no hand-off subtests")
		}
		for _, tc := range []struct {
			name string
			fn   func(t *testing.T, s oncekeystore.HandOffStore)
		}{
			{"KeepsPendingWithLeaseAndDocument", testHandOffKeepsPending},
			{"Fenced", testHandOffFenced},
			{"DocumentKeptWhenMarkedUnknownByClaim", testHandOffUnknownByClaim},
			{"DocumentGoesOnSettleAndTakeover", testHandOffSettled},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, newStore(t).(oncekeystore.HandOffStore))
			})
		}
	})
}

var handOffDoc = []byte(`{"message":"handed off","handoff":{"epoch":1}}`)

// testHandOffKeepsPending: the record stays pending at its epoch, its lease runs the given time
// from the write, the document is its Failure byte for byte, and a claim meanwhile changes
// nothing.
func testHandOffKeepsPending(t *testing.T, s oncekeystore.HandOffStore) {
	p := params(oncekeystore.Effectful)
	r := acquire(t, s, p)
	h, err := s.HandOff(ctxT(t), &oncekeystore.HandOffParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Lease: time.Hour, HandOff: handOffDoc})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusPending, h.Status)
	require.Equal(t, r.Epoch, h.Epoch)
	require.Equal(t, time.Hour, h.LeaseUntil.Sub(h.UpdatedAt))
	require.Equal(t, handOffDoc, h.Failure)
	requireSame(t, h, get(t, s, p.Tenant, p.OperationKey))
	res := claim(t, s, p)
	require.False(t, res.Acquired)
	requireSame(t, h, res.Record)
	// The owner's epoch still settles it.
	done := complete(t, s, h, oncekeystore.StatusApplied, []byte("paid"), nil)
	require.Nil(t, done.Failure, "a completion replaces the hand-off document")
}

// testHandOffFenced: a hand-off at another epoch, or of a record no longer pending, changes
// nothing; a missing record is ErrNotFound; bad params are refused.
func testHandOffFenced(t *testing.T, s oncekeystore.HandOffStore) {
	ctx := ctxT(t)
	p := params(oncekeystore.Effectful)
	r := acquire(t, s, p)
	_, err := s.HandOff(ctx, &oncekeystore.HandOffParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch + 1, Lease: time.Hour, HandOff: handOffDoc})
	requireLost(t, err)
	requireSame(t, r, get(t, s, p.Tenant, p.OperationKey))
	done := complete(t, s, r, oncekeystore.StatusApplied, []byte("once"), nil)
	_, err = s.HandOff(ctx, &oncekeystore.HandOffParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Lease: time.Hour, HandOff: handOffDoc})
	requireLost(t, err)
	requireSame(t, done, get(t, s, p.Tenant, p.OperationKey))
	_, err = s.HandOff(ctx, &oncekeystore.HandOffParams{Tenant: "acme", OperationKey: newKey(), Epoch: 1, Lease: time.Hour, HandOff: handOffDoc})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
	var inv *oncekeystore.InvalidParamsError
	_, err = s.HandOff(ctx, &oncekeystore.HandOffParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Lease: time.Hour})
	require.ErrorAs(t, err, &inv)
	_, err = s.HandOff(ctx, &oncekeystore.HandOffParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, HandOff: handOffDoc})
	require.ErrorAs(t, err, &inv)
}

// testHandOffUnknownByClaim: when the hand-off's lease runs out, the next claim marks the
// Effectful record unknown and the document stays, for whoever settles it.
func testHandOffUnknownByClaim(t *testing.T, s oncekeystore.HandOffStore) {
	p := params(oncekeystore.Effectful)
	r := acquire(t, s, p)
	_, err := s.HandOff(ctxT(t), &oncekeystore.HandOffParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Lease: shortLease, HandOff: handOffDoc})
	require.NoError(t, err)
	waitLeaseExpired(t, s, p.Tenant, p.OperationKey)
	res := claim(t, s, p)
	require.False(t, res.Acquired)
	require.Equal(t, oncekeystore.StatusUnknown, res.Record.Status)
	require.Equal(t, handOffDoc, res.Record.Failure)
	// Resolving it settles with the decision's failure (none): the document goes.
	rs := do(t, s.Resolve, &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch,
		Status: oncekeystore.StatusApplied, Result: []byte("paid"), ResolvedBy: "temporal"})
	require.Nil(t, rs.Failure)
}

// testHandOffSettled: a release gives the record back and the takeover that follows starts with
// no document.
func testHandOffSettled(t *testing.T, s oncekeystore.HandOffStore) {
	p := params(oncekeystore.Effectful)
	r := acquire(t, s, p)
	_, err := s.HandOff(ctxT(t), &oncekeystore.HandOffParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Lease: time.Hour, HandOff: handOffDoc})
	require.NoError(t, err)
	do(t, s.Release, &oncekeystore.ReleaseParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
	again := acquire(t, s, p)
	require.Equal(t, r.Epoch+1, again.Epoch)
	require.Nil(t, again.Failure, "a takeover starts without the earlier episode's hand-off")
}
