package storetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

// Short windows the suite waits out on the store's own clock. A store's clock must run at real
// speed; the suite waits with require.Eventually, never with a fixed sleep.
const (
	shortLease = 300 * time.Millisecond
	longLease  = 30 * time.Second
	waitFor    = 15 * time.Second
	pollEvery  = 20 * time.Millisecond
)

// Run runs the conformance suite against stores made by newStore. newStore is called once per
// subtest and must return an empty store that is cleaned up with t.Cleanup. Subtests run in
// parallel. The suite uses real time: leases, retention and tombstone windows of a few hundred
// milliseconds, waited out on the store's clock (through Get and Claim) with a bound. When the
// stores implement oncekeystore.ApprovalStore, the subtest "Approval" runs RunApprovals on them too
// (and is skipped, saying so, when they do not).
func Run(t *testing.T, newStore func(t *testing.T) oncekeystore.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s oncekeystore.Store)
	}{
		{"ClaimNew", testClaimNew},
		{"LeaseIsExact", testLeaseIsExact},
		{"ClaimPendingLive", testClaimPendingLive},
		{"ClaimPendingExpiredIdempotentTakesOver", testClaimPendingExpiredIdempotent},
		{"ClaimPendingExpiredEffectfulBecomesUnknown", testClaimPendingExpiredEffectful},
		{"ClaimApplied", testClaimApplied},
		{"ClaimFailed", testClaimFailed},
		{"ClaimUnknown", testClaimUnknown},
		{"ClaimReleased", testClaimReleased},
		{"ClaimRepeatedWithSameToken", testClaimSameToken},
		{"ClaimSameTokenSettledOrExpired", testClaimSameTokenSettled},
		{"FingerprintMismatchChangesNothing", testFingerprintMismatch},
		{"FencingAfterTakeover", testFencing},
		{"FencedWritesNeedPending", testFencedWritesNeedPending},
		{"FencedWriteMissingIsNotFound", testFencedMissing},
		{"RenewExtendsLease", testRenew},
		{"RetentionTombstoneThenFree", testRetentionTombstone},
		{"TombstoneExpiryFreesKey", testTombstoneExpiry},
		{"TenantsAreSeparate", testTenants},
		{"Forget", testForget},
		{"ListFilters", testListFilters},
		{"ListPagination", testListPagination},
		{"ListPaginationWithUpdates", testListPaginationUpdates},
		{"ListInvalid", testListInvalid},
		{"PurgeTombstonesInBatches", testPurgeTombstones},
		{"PurgeDeletesTombstones", testPurgeDeletes},
		{"UnsettledNeverExpire", testUnsettledNeverExpire},
		{"RetentionCountsFromSettling", testRetentionFromSettling},
		{"ResultBytesExact", testResultBytes},
		{"ResultOverLimitRefused", testResultLimit},
		{"TextFieldsExact", testTextFields},
		{"ResolveUnknown", testResolveUnknown},
		{"ResolveExpiredPending", testResolveExpiredPending},
		{"ResolveRefused", testResolveRefused},
		{"ResolveStaleEpochRefused", testResolveStale},
		{"NamespaceKept", testNamespaceKept},
		{"InvalidParams", testInvalidParams},
		{"ConcurrentClaimOneAcquires", testConcurrentClaim},
		{"ConcurrentTakeoverOneAcquires", testConcurrentTakeover},
		{"ContextCanceled", testContextCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
	runApprovalsIfImplemented(t, newStore)
	runInspectorIfImplemented(t, newStore)
	runGrantsIfImplemented(t, newStore)
	runSignaturesIfImplemented(t, newStore)
	runHandOffIfImplemented(t, newStore)
}

// ---- helpers -------------------------------------------------------------------------------

// params returns claim params for a fresh key in tenant "acme".
func params(eff oncekeystore.Effect) *oncekeystore.ClaimParams {
	return &oncekeystore.ClaimParams{
		Tenant: "acme", OperationKey: newKey(), Namespace: "ns-a", Tool: "create_ticket", Version: "v1",
		Fingerprint: strings.Repeat("ab", 32), WorkflowID: "wf-1", StepID: "record_issue",
		Effect: eff, Lease: longLease, Retention: time.Hour, Tombstone: 2 * time.Hour,
	}
}

func claim(t *testing.T, s oncekeystore.Store, p *oncekeystore.ClaimParams) *oncekeystore.ClaimResult {
	t.Helper()
	res := do(t, s.Claim, p)
	require.NotNil(t, res.Record)
	return res
}

func get(t *testing.T, s oncekeystore.Store, tenant, key string) *oncekeystore.Record {
	t.Helper()
	return do(t, s.Get, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
}

func acquire(t *testing.T, s oncekeystore.Store, p *oncekeystore.ClaimParams) *oncekeystore.Record {
	t.Helper()
	res := claim(t, s, p)
	require.True(t, res.Acquired, "claim of %s not acquired: %+v", p.OperationKey, res)
	return res.Record
}

// expiredClaim acquires a fresh key of eff with a short lease and waits until the lease ran out
// on the store's clock. It returns the params (their lease long again, for the next claim) and
// the record acquired.
func expiredClaim(t *testing.T, s oncekeystore.Store, eff oncekeystore.Effect) (*oncekeystore.ClaimParams, *oncekeystore.Record) {
	t.Helper()
	p := params(eff)
	p.Lease = shortLease
	first := acquire(t, s, p)
	waitLeaseExpired(t, s, p.Tenant, p.OperationKey)
	p.Lease = longLease
	return p, first
}

// requireFound asserts what a claim found or did: res's flags are want's (its Record aside).
func requireFound(t *testing.T, want oncekeystore.ClaimResult, res *oncekeystore.ClaimResult, msgAndArgs ...any) {
	t.Helper()
	got := *res
	got.Record = nil
	require.Equal(t, want, got, msgAndArgs...)
}

// requireLeft asserts a fenced write (its answer r and err) left the record in st, without a
// lease.
func requireLeft(t *testing.T, st oncekeystore.Status, r *oncekeystore.Record, err error) {
	t.Helper()
	require.NoError(t, err)
	require.Equal(t, st, r.Status)
	require.True(t, r.LeaseUntil.IsZero(), "a %s record has no lease", st)
}

// requireOutcome asserts r is in st with the failure failure.
func requireOutcome(t *testing.T, r *oncekeystore.Record, st oncekeystore.Status, failure string) {
	t.Helper()
	require.Equal(t, st, r.Status)
	require.Equal(t, failure, string(r.Failure))
}

// requireObserved claims p again and requires that the claim observes want as it stands: not
// acquired, the same record. It returns the claim's result.
func requireObserved(t *testing.T, s oncekeystore.Store, p *oncekeystore.ClaimParams, want *oncekeystore.Record) *oncekeystore.ClaimResult {
	t.Helper()
	res := claim(t, s, p)
	require.False(t, res.Acquired)
	requireSame(t, want, res.Record)
	return res
}

func complete(t *testing.T, s oncekeystore.Store, r *oncekeystore.Record, st oncekeystore.Status, result, failure []byte) *oncekeystore.Record {
	t.Helper()
	out, err := s.Complete(ctxT(t), &oncekeystore.CompleteParams{Tenant: r.Tenant, OperationKey: r.OperationKey,
		Epoch: r.Epoch, Status: st, Result: result, Failure: failure, EffectReference: "ref-" + r.OperationKey[:8]})
	require.NoError(t, err)
	return out
}

// waitLeaseExpired waits until the store's clock says the pending record's lease ran out.
func waitLeaseExpired(t *testing.T, s oncekeystore.Store, tenant, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		r, err := s.Get(context.Background(), &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
		return err == nil && r.LeaseExpired
	}, waitFor, pollEvery, "lease of %s never expired", key)
}

// waitExpired waits until a claim of a settled (non-pending) record reports it past retention.
// Such a claim changes nothing.
func waitExpired(t *testing.T, s oncekeystore.Store, p *oncekeystore.ClaimParams) {
	t.Helper()
	require.Eventually(t, func() bool {
		res, err := s.Claim(context.Background(), p)
		return err == nil && res.Expired
	}, waitFor, pollEvery, "record %s never expired", p.OperationKey)
}

// requireSame asserts two reads of a record are equal in everything but LeaseExpired.
func requireSame(t *testing.T, want, got *oncekeystore.Record) {
	t.Helper()
	requireSameFields(t, want, got, "LeaseExpired")
}

func requireLost(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, oncekeystore.ErrLostClaim)
}

func requireConflict(t *testing.T, err error) *oncekeystore.StatusConflictError {
	t.Helper()
	var ce *oncekeystore.StatusConflictError
	require.ErrorAs(t, err, &ce)
	return ce
}

// ---- claim ---------------------------------------------------------------------------------

func testClaimNew(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	res := claim(t, s, p)
	require.True(t, res.Acquired)
	require.False(t, res.TookOver)
	require.False(t, res.FingerprintMismatch)
	require.False(t, res.Expired)
	r := res.Record
	require.Equal(t, oncekeystore.StatusPending, r.Status)
	require.Equal(t, int64(1), r.Epoch)
	require.Equal(t, p.Tenant, r.Tenant)
	require.Equal(t, p.OperationKey, r.OperationKey)
	require.Equal(t, p.Tool, r.Tool)
	require.Equal(t, p.Version, r.Version)
	require.Equal(t, p.Fingerprint, r.Fingerprint)
	require.Equal(t, p.WorkflowID, r.WorkflowID)
	require.Equal(t, p.StepID, r.StepID)
	require.Equal(t, oncekeystore.Effectful, r.Effect)
	require.False(t, r.LeaseExpired)
	require.Nil(t, r.Result)
	require.Nil(t, r.Failure)
	require.True(t, r.CreatedAt.Equal(r.UpdatedAt))
	require.Equal(t, p.Lease, r.LeaseUntil.Sub(r.CreatedAt), "lease is counted from the store's now")
	require.Equal(t, p.Retention, r.ExpiresAt.Sub(r.CreatedAt), "retention from creation")
	require.Equal(t, p.Tombstone, r.TombstoneUntil.Sub(r.ExpiresAt), "tombstone window after retention")
	requireSame(t, r, get(t, s, p.Tenant, p.OperationKey))
}

func testLeaseIsExact(t *testing.T, s oncekeystore.Store) {
	for _, lease := range []time.Duration{1500 * time.Millisecond, 1234567 * time.Microsecond, 200 * time.Millisecond} {
		p := params(oncekeystore.Idempotent)
		p.Lease = lease
		p.Retention = 36*time.Hour + 250*time.Millisecond
		p.Tombstone = 1500 * time.Millisecond
		r := acquire(t, s, p)
		require.Equal(t, lease, r.LeaseUntil.Sub(r.UpdatedAt), "a %s lease is stored as %s", lease, lease)
		require.Equal(t, p.Retention, r.ExpiresAt.Sub(r.CreatedAt))
		require.Equal(t, p.Tombstone, r.TombstoneUntil.Sub(r.ExpiresAt))
		rn, err := s.Renew(ctxT(t), &oncekeystore.RenewParams{Tenant: r.Tenant, OperationKey: r.OperationKey, Epoch: r.Epoch, Lease: lease})
		require.NoError(t, err)
		require.Equal(t, lease, rn.LeaseUntil.Sub(rn.UpdatedAt))
	}
}

func testClaimPendingLive(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	first := acquire(t, s, p)
	for _, eff := range []oncekeystore.Effect{oncekeystore.Effectful, oncekeystore.Idempotent} {
		q := *p
		q.Effect = eff
		res := requireObserved(t, s, &q, first)
		requireFound(t, oncekeystore.ClaimResult{}, res)
		require.False(t, res.Record.LeaseExpired, "a %s lease is live on the store's clock", longLease)
	}
}

func testClaimPendingExpiredIdempotent(t *testing.T, s oncekeystore.Store) {
	p, first := expiredClaim(t, s, oncekeystore.Idempotent)
	res := claim(t, s, p)
	requireFound(t, oncekeystore.ClaimResult{Acquired: true, TookOver: true}, res)
	require.Equal(t, first.Epoch+1, res.Record.Epoch)
	require.Equal(t, oncekeystore.StatusPending, res.Record.Status)
	require.False(t, res.Record.LeaseExpired)
	require.Equal(t, longLease, res.Record.LeaseUntil.Sub(res.Record.UpdatedAt))
	require.True(t, first.CreatedAt.Equal(res.Record.CreatedAt), "a takeover keeps creation and retention")
	require.True(t, first.ExpiresAt.Equal(res.Record.ExpiresAt))
	requireSame(t, res.Record, get(t, s, p.Tenant, p.OperationKey))
}

func testClaimPendingExpiredEffectful(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	p.Lease = shortLease
	first := acquire(t, s, p)
	waitLeaseExpired(t, s, p.Tenant, p.OperationKey)
	res := claim(t, s, p)
	require.False(t, res.Acquired, "the dead owner may have reached the downstream: no takeover")
	require.False(t, res.TookOver)
	require.Equal(t, oncekeystore.StatusUnknown, res.Record.Status)
	require.Equal(t, first.Epoch, res.Record.Epoch, "marking unknown keeps the epoch")
	require.True(t, res.Record.LeaseUntil.IsZero())
	marked := get(t, s, p.Tenant, p.OperationKey)
	requireSame(t, res.Record, marked)

	// A further claim changes nothing, even for a caller that calls the tool Idempotent now.
	p.Effect = oncekeystore.Idempotent
	again := claim(t, s, p)
	require.False(t, again.Acquired)
	requireSame(t, marked, again.Record)

	// The old owner cannot write any more.
	_, err := s.Complete(ctxT(t), &oncekeystore.CompleteParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: first.Epoch, Status: oncekeystore.StatusApplied, Result: []byte("late")})
	requireLost(t, err)
	requireSame(t, marked, get(t, s, p.Tenant, p.OperationKey))
}

func testClaimApplied(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	r := acquire(t, s, p)
	done := complete(t, s, r, oncekeystore.StatusApplied, []byte(`{"ticket":"T-1"}`), nil)
	require.Equal(t, oncekeystore.StatusApplied, done.Status)
	require.True(t, done.LeaseUntil.IsZero())
	require.False(t, done.LeaseExpired)
	res := claim(t, s, p)
	require.False(t, res.Acquired)
	require.False(t, res.FingerprintMismatch)
	require.False(t, res.Expired)
	requireSame(t, done, res.Record)
	require.Equal(t, `{"ticket":"T-1"}`, string(res.Record.Result))
	require.Equal(t, "ref-"+p.OperationKey[:8], res.Record.EffectReference)
}

func testClaimFailed(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Idempotent)
	r := acquire(t, s, p)
	done := complete(t, s, r, oncekeystore.StatusFailed, nil, []byte("card declined"))
	requireOutcome(t, requireObserved(t, s, p, done).Record, oncekeystore.StatusFailed, "card declined")
}

func testClaimUnknown(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	r := acquire(t, s, p)
	marked, err := s.MarkUnknown(ctxT(t), &oncekeystore.MarkUnknownParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Failure: []byte("timeout")})
	requireLeft(t, oncekeystore.StatusUnknown, marked, err)
	requireOutcome(t, requireObserved(t, s, p, marked).Record, oncekeystore.StatusUnknown, "timeout")
}

func testClaimReleased(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	r := acquire(t, s, p)
	rel, err := s.Release(ctxT(t), &oncekeystore.ReleaseParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
	requireLeft(t, oncekeystore.StatusReleased, rel, err)
	res := claim(t, s, p)
	requireFound(t, oncekeystore.ClaimResult{Acquired: true, TookOver: true}, res)
	require.Equal(t, r.Epoch+1, res.Record.Epoch)
	require.Equal(t, oncekeystore.StatusPending, res.Record.Status)
	// The old epoch cannot release the new claim.
	_, err = s.Release(ctxT(t), &oncekeystore.ReleaseParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
	requireLost(t, err)
	requireSame(t, res.Record, get(t, s, p.Tenant, p.OperationKey))
}

// newToken returns a random non-zero claim token.
func newToken() int64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		var v int64
		for _, c := range b {
			v = v<<8 | int64(c)
		}
		if v != 0 {
			return v
		}
	}
}

// A Claim repeated with its token (its response was lost after the statement committed) finds
// the pending record it created and reports it acquired at the same epoch; any other claim,
// including one that lets the store pick a token, still sees a live claim.
func testClaimSameToken(t *testing.T, s oncekeystore.Store) {
	for _, eff := range []oncekeystore.Effect{oncekeystore.Effectful, oncekeystore.Idempotent} {
		p := params(eff)
		p.ClaimToken = newToken()
		first := acquire(t, s, p)
		again := claim(t, s, p)
		requireFound(t, oncekeystore.ClaimResult{Acquired: true}, again, "the repeat of the claim recognises its own record")
		require.Equal(t, first.Epoch, again.Record.Epoch, "no new epoch")
		requireSame(t, first, again.Record)
		requireSame(t, first, get(t, s, p.Tenant, p.OperationKey))

		other := *p
		other.ClaimToken = newToken()
		res := claim(t, s, &other)
		require.False(t, res.Acquired, "another token meets a live claim")
		other.ClaimToken = 0
		res = claim(t, s, &other)
		require.False(t, res.Acquired, "a store-generated token meets a live claim")
		requireSame(t, first, res.Record)

		// The epoch the repeat reported is the one that owns the record.
		done := complete(t, s, again.Record, oncekeystore.StatusApplied, []byte("ok"), nil)
		require.Equal(t, oncekeystore.StatusApplied, done.Status)
	}
}

// A token acquires nothing but the pending record it created: once the record is settled, or its
// Effectful lease ran out (unknown), a repeat with the same token is an ordinary claim of that
// record.
func testClaimSameTokenSettled(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	p.ClaimToken = newToken()
	r := acquire(t, s, p)
	done := complete(t, s, r, oncekeystore.StatusApplied, []byte("T-1"), nil)
	res := claim(t, s, p)
	require.False(t, res.Acquired, "an applied record is replayed, not acquired")
	requireSame(t, done, res.Record)

	p = params(oncekeystore.Effectful)
	p.ClaimToken = newToken()
	p.Lease = shortLease
	r = acquire(t, s, p)
	waitLeaseExpired(t, s, p.Tenant, p.OperationKey)
	res = claim(t, s, p)
	require.False(t, res.Acquired, "the lease ran out: the outcome is unknown even for its owner")
	require.Equal(t, oncekeystore.StatusUnknown, res.Record.Status)
	require.Equal(t, r.Epoch, res.Record.Epoch)

	p = params(oncekeystore.Effectful)
	p.ClaimToken = newToken()
	r = acquire(t, s, p)
	_, err := s.Release(ctxT(t), &oncekeystore.ReleaseParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
	require.NoError(t, err)
	res = claim(t, s, p)
	require.True(t, res.Acquired, "a released record is free to take")
	require.True(t, res.TookOver)
	require.Equal(t, r.Epoch+1, res.Record.Epoch)
}

func testFingerprintMismatch(t *testing.T, s oncekeystore.Store) {
	other := strings.Repeat("cd", 32)
	mismatch := func(p *oncekeystore.ClaimParams) {
		t.Helper()
		before := get(t, s, p.Tenant, p.OperationKey)
		q := *p
		q.Fingerprint = other
		q.Lease = longLease
		res := requireObserved(t, s, &q, before)
		requireFound(t, oncekeystore.ClaimResult{FingerprintMismatch: true}, res)
		require.Equal(t, p.Fingerprint, res.Record.Fingerprint, "the stored fingerprint is reported")
		requireSame(t, before, get(t, s, p.Tenant, p.OperationKey))
	}

	// While the first claim is still pending.
	pending := params(oncekeystore.Effectful)
	acquire(t, s, pending)
	mismatch(pending)

	applied := params(oncekeystore.Effectful)
	complete(t, s, acquire(t, s, applied), oncekeystore.StatusApplied, []byte("r"), nil)
	mismatch(applied)

	// A released record stays bound to its fingerprint: only the same operation may take it.
	released := params(oncekeystore.Effectful)
	rr := acquire(t, s, released)
	_, err := s.Release(ctxT(t), &oncekeystore.ReleaseParams{Tenant: rr.Tenant, OperationKey: rr.OperationKey, Epoch: rr.Epoch})
	require.NoError(t, err)
	mismatch(released)

	// An expired lease is not taken over by a different operation, nor marked unknown.
	for _, eff := range []oncekeystore.Effect{oncekeystore.Idempotent, oncekeystore.Effectful} {
		exp := params(eff)
		exp.Lease = shortLease
		acquire(t, s, exp)
		waitLeaseExpired(t, s, exp.Tenant, exp.OperationKey)
		mismatch(exp)
		require.Equal(t, oncekeystore.StatusPending, get(t, s, exp.Tenant, exp.OperationKey).Status)
	}
}

// ---- fencing -------------------------------------------------------------------------------

func testFencing(t *testing.T, s oncekeystore.Store) {
	p, old := expiredClaim(t, s, oncekeystore.Idempotent)
	res := claim(t, s, p)
	requireFound(t, oncekeystore.ClaimResult{Acquired: true, TookOver: true}, res)
	owner := res.Record
	ctx := ctxT(t)
	k := func() (string, string) { return p.Tenant, p.OperationKey }

	tenant, key := k()
	_, err := s.Renew(ctx, &oncekeystore.RenewParams{Tenant: tenant, OperationKey: key, Epoch: old.Epoch, Lease: time.Hour})
	requireLost(t, err)
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: tenant, OperationKey: key, Epoch: old.Epoch, Status: oncekeystore.StatusApplied, Result: []byte("stale")})
	requireLost(t, err)
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: tenant, OperationKey: key, Epoch: old.Epoch, Status: oncekeystore.StatusFailed, Failure: []byte("stale")})
	requireLost(t, err)
	_, err = s.Release(ctx, &oncekeystore.ReleaseParams{Tenant: tenant, OperationKey: key, Epoch: old.Epoch})
	requireLost(t, err)
	_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: tenant, OperationKey: key, Epoch: old.Epoch})
	requireLost(t, err)
	// A future epoch is no better.
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: tenant, OperationKey: key, Epoch: owner.Epoch + 1, Status: oncekeystore.StatusApplied})
	requireLost(t, err)
	requireSame(t, owner, get(t, s, tenant, key))

	// The current owner's writes still work.
	done := complete(t, s, owner, oncekeystore.StatusApplied, []byte("fresh"), nil)
	require.Equal(t, "fresh", string(done.Result))
	require.Equal(t, owner.Epoch, done.Epoch)
}

func testFencedWritesNeedPending(t *testing.T, s oncekeystore.Store) {
	ctx := ctxT(t)
	p := params(oncekeystore.Effectful)
	r := acquire(t, s, p)
	done := complete(t, s, r, oncekeystore.StatusApplied, []byte("once"), nil)
	// The owner's own epoch cannot write again once the record is settled.
	_, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Status: oncekeystore.StatusApplied, Result: []byte("twice")})
	requireLost(t, err)
	_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Lease: time.Minute})
	requireLost(t, err)
	_, err = s.Release(ctx, &oncekeystore.ReleaseParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
	requireLost(t, err)
	_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
	requireLost(t, err)
	requireSame(t, done, get(t, s, p.Tenant, p.OperationKey))
}

func testFencedMissing(t *testing.T, s oncekeystore.Store) {
	ctx := ctxT(t)
	key := newKey()
	_, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: key, Epoch: 1, Status: oncekeystore.StatusApplied})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
	_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: key, Epoch: 1, Lease: time.Second})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
	_, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
	_, err = s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: "acme", OperationKey: key, Epoch: 1, Status: oncekeystore.StatusApplied})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
}

func testRenew(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	p.Lease = shortLease
	r := acquire(t, s, p)
	rn, err := s.Renew(ctxT(t), &oncekeystore.RenewParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Lease: longLease})
	require.NoError(t, err)
	require.Equal(t, r.Epoch, rn.Epoch)
	require.Equal(t, oncekeystore.StatusPending, rn.Status)
	require.Equal(t, longLease, rn.LeaseUntil.Sub(rn.UpdatedAt))
	require.True(t, rn.LeaseUntil.After(r.LeaseUntil))
	// A renewed lease is live: a second claim neither takes over nor marks unknown.
	res := claim(t, s, p)
	require.False(t, res.Acquired)
	require.Equal(t, oncekeystore.StatusPending, res.Record.Status)
	require.False(t, res.Record.LeaseExpired)

	// An owner whose lease ran out but was not taken over may still renew.
	q := params(oncekeystore.Idempotent)
	q.Lease = shortLease
	r2 := acquire(t, s, q)
	waitLeaseExpired(t, s, q.Tenant, q.OperationKey)
	rn2, err := s.Renew(ctxT(t), &oncekeystore.RenewParams{Tenant: q.Tenant, OperationKey: q.OperationKey, Epoch: r2.Epoch, Lease: longLease})
	require.NoError(t, err)
	require.False(t, rn2.LeaseExpired)
}

// ---- retention and tombstones --------------------------------------------------------------

func testRetentionTombstone(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	p.Retention = 300 * time.Millisecond
	p.Tombstone = time.Hour
	r := acquire(t, s, p)
	done := complete(t, s, r, oncekeystore.StatusApplied, []byte("result"), nil)
	waitExpired(t, s, p)

	// A late duplicate past retention is refused, not re-run, whether or not Purge ran, and
	// whatever its fingerprint.
	q := *p
	q.Fingerprint = strings.Repeat("ef", 32)
	res := claim(t, s, &q)
	require.True(t, res.Expired)
	require.False(t, res.Acquired)
	require.False(t, res.FingerprintMismatch)

	pr, err := s.Purge(ctxT(t), &oncekeystore.PurgeParams{})
	require.NoError(t, err)
	require.Equal(t, int64(1), pr.Tombstoned)
	require.Equal(t, int64(0), pr.Deleted)

	tomb := get(t, s, p.Tenant, p.OperationKey)
	require.Equal(t, oncekeystore.StatusExpired, tomb.Status)
	require.Nil(t, tomb.Result, "a tombstone keeps digests only")
	require.Nil(t, tomb.Failure)
	require.Empty(t, tomb.EffectReference)
	require.Empty(t, tomb.Note)
	require.Equal(t, p.Fingerprint, tomb.Fingerprint)
	require.Equal(t, r.Epoch, tomb.Epoch)
	require.True(t, done.TombstoneUntil.Equal(tomb.TombstoneUntil), "the windows as the settling set them")

	res = claim(t, s, p)
	require.True(t, res.Expired)
	require.False(t, res.Acquired)
	requireSame(t, tomb, res.Record)
	res = claim(t, s, &q)
	require.True(t, res.Expired)
	requireSame(t, tomb, get(t, s, p.Tenant, p.OperationKey))

	// A tombstone cannot be resolved.
	_, err = s.Resolve(ctxT(t), &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: tomb.Epoch, Status: oncekeystore.StatusApplied})
	requireConflict(t, err)
}

func testTombstoneExpiry(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	p.Retention = 200 * time.Millisecond
	p.Tombstone = 200 * time.Millisecond
	r := acquire(t, s, p)
	complete(t, s, r, oncekeystore.StatusApplied, []byte("old result"), nil)

	q := *p
	q.Fingerprint = strings.Repeat("12", 32)
	q.Tool = "send_email"
	q.Effect = oncekeystore.Idempotent
	q.Retention = time.Hour
	q.Tombstone = time.Hour
	var res *oncekeystore.ClaimResult
	require.Eventually(t, func() bool {
		var err error
		res, err = s.Claim(context.Background(), &q)
		require.NoError(t, err)
		if !res.Acquired {
			require.True(t, res.Expired || res.FingerprintMismatch, "claim before the key is free: %+v", res)
		}
		return res.Acquired
	}, waitFor, pollEvery)
	require.True(t, res.TookOver)
	n := res.Record
	require.Equal(t, r.Epoch+1, n.Epoch, "the epoch keeps counting so old owners stay fenced")
	require.Equal(t, oncekeystore.StatusPending, n.Status)
	require.Equal(t, q.Fingerprint, n.Fingerprint)
	require.Equal(t, "send_email", n.Tool)
	require.Equal(t, oncekeystore.Idempotent, n.Effect)
	require.Nil(t, n.Result)
	require.Empty(t, n.EffectReference)
	require.True(t, n.CreatedAt.After(r.CreatedAt))
	require.Equal(t, time.Hour, n.ExpiresAt.Sub(n.CreatedAt))
	_, err := s.Complete(ctxT(t), &oncekeystore.CompleteParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Status: oncekeystore.StatusApplied})
	requireLost(t, err)
}

// ---- tenants -------------------------------------------------------------------------------

func testTenants(t *testing.T, s oncekeystore.Store) {
	a := params(oncekeystore.Effectful)
	b := *a
	b.Tenant = "globex"
	b.Fingerprint = strings.Repeat("99", 32)
	ra := acquire(t, s, a)
	rb := acquire(t, s, &b)
	require.Equal(t, int64(1), rb.Epoch, "the same key under another tenant is another record")
	complete(t, s, ra, oncekeystore.StatusApplied, []byte("a"), nil)
	require.Equal(t, oncekeystore.StatusPending, get(t, s, "globex", a.OperationKey).Status)
	require.Equal(t, b.Fingerprint, get(t, s, "globex", a.OperationKey).Fingerprint)
	require.Equal(t, "a", string(get(t, s, "acme", a.OperationKey).Result))
	complete(t, s, rb, oncekeystore.StatusApplied, []byte("b"), nil)
	// Each tenant's replay sees its own result only.
	require.Equal(t, "a", string(claim(t, s, a).Record.Result))
	require.Equal(t, "b", string(claim(t, s, &b).Record.Result))
	// Same everything, including the fingerprint, under two tenants: still two records.
	c := *a
	c.Tenant = "initech"
	rc := acquire(t, s, &c)
	require.Nil(t, rc.Result)
	require.Equal(t, int64(1), rc.Epoch)
	// Fenced writes are tenant-scoped too.
	_, err := s.Complete(ctxT(t), &oncekeystore.CompleteParams{Tenant: "umbrella", OperationKey: a.OperationKey, Epoch: 1, Status: oncekeystore.StatusApplied})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
}

func testForget(t *testing.T, s oncekeystore.Store) {
	var keep []*oncekeystore.ClaimParams
	for i := range 5 {
		p := params(oncekeystore.Effectful)
		acquire(t, s, p)
		q := *p
		q.Tenant = "globex"
		acquire(t, s, &q)
		keep = append(keep, &q)
		if i%2 == 0 {
			r := get(t, s, "acme", p.OperationKey)
			complete(t, s, r, oncekeystore.StatusApplied, []byte("x"), nil)
		}
	}
	res, err := s.Forget(ctxT(t), &oncekeystore.ForgetParams{Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, int64(5), res.Deleted)
	for _, q := range keep {
		_, err := s.Get(ctxT(t), &oncekeystore.GetParams{Tenant: "acme", OperationKey: q.OperationKey})
		require.ErrorIs(t, err, oncekeystore.ErrNotFound)
		require.Equal(t, oncekeystore.StatusPending, get(t, s, "globex", q.OperationKey).Status)
	}
	requireForgotten(t, s, "acme")
}

// ---- list ----------------------------------------------------------------------------------

func keysOf(rs []*oncekeystore.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Tenant + "/" + r.OperationKey
	}
	return out
}

// sortedByUpdate sorts records the way List returns them: (UpdatedAt, Tenant, OperationKey).
func sortedByUpdate(rs []*oncekeystore.Record) []*oncekeystore.Record {
	out := append([]*oncekeystore.Record(nil), rs...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.UpdatedAt.Equal(b.UpdatedAt) {
			return a.UpdatedAt.Before(b.UpdatedAt)
		}
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		return a.OperationKey < b.OperationKey
	})
	return out
}

func listAll(t *testing.T, s oncekeystore.Store, p oncekeystore.ListParams) []*oncekeystore.Record {
	t.Helper()
	return slices.Concat(pages(t, s.List, p, listCursor, listPage)...)
}

func testListFilters(t *testing.T, s oncekeystore.Store) {
	statuses := []oncekeystore.Status{oncekeystore.StatusUnknown, oncekeystore.StatusApplied, oncekeystore.StatusUnknown, oncekeystore.StatusUnknown,
		oncekeystore.StatusPending, oncekeystore.StatusReleased, oncekeystore.StatusFailed}
	var all []*oncekeystore.ClaimParams
	requireListFilters(t, func(i int, tenant, tool, wf string) (string, string) {
		p := params(oncekeystore.Effectful)
		p.Tenant, p.Tool, p.WorkflowID = tenant, tool, wf
		r := acquire(t, s, p)
		switch st := statuses[i]; st {
		case oncekeystore.StatusApplied, oncekeystore.StatusFailed:
			complete(t, s, r, st, []byte("x"), nil)
		case oncekeystore.StatusUnknown:
			_, err := s.MarkUnknown(ctxT(t), &oncekeystore.MarkUnknownParams{Tenant: tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
			require.NoError(t, err)
		case oncekeystore.StatusReleased:
			_, err := s.Release(ctxT(t), &oncekeystore.ReleaseParams{Tenant: tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
			require.NoError(t, err)
		}
		all = append(all, p)
		return tenant + "/" + p.OperationKey, string(statuses[i])
	}, func(lp filter) []string {
		got := listAll(t, s, oncekeystore.ListParams{Status: oncekeystore.Status(lp.status), Tenant: lp.tenant, Tool: lp.tool, WorkflowID: lp.wf})
		for i := 1; i < len(got); i++ {
			require.False(t, got[i].UpdatedAt.Before(got[i-1].UpdatedAt), "oldest update first")
		}
		return keysOf(got)
	})
	require.Empty(t, listAll(t, s, oncekeystore.ListParams{Status: oncekeystore.StatusExpired}))

	// UpdatedSince keeps records updated at or after the time, on the store's clock.
	mid := get(t, s, all[3].Tenant, all[3].OperationKey)
	got := listAll(t, s, oncekeystore.ListParams{UpdatedSince: mid.UpdatedAt})
	require.Contains(t, keysOf(got), mid.Tenant+"/"+mid.OperationKey)
	for _, r := range got {
		require.False(t, r.UpdatedAt.Before(mid.UpdatedAt))
	}
	all0 := get(t, s, all[0].Tenant, all[0].OperationKey)
	if all0.UpdatedAt.Before(mid.UpdatedAt) {
		require.NotContains(t, keysOf(got), all0.Tenant+"/"+all0.OperationKey)
	}
}

func testListPagination(t *testing.T, s oncekeystore.Store) {
	var made []*oncekeystore.Record
	for range 23 {
		made = append(made, acquire(t, s, params(oncekeystore.Idempotent)))
	}
	want := keysOf(sortedByUpdate(made))
	got := requirePaged(t, pages(t, s.List, oncekeystore.ListParams{Limit: 5}, listCursor, listPage), 5, 5)
	require.Equal(t, want, keysOf(got), "each record exactly once, in update order")

	// The default page size is 100.
	for range 80 {
		acquire(t, s, params(oncekeystore.Idempotent))
	}
	requireDefaultPages(t, s.List, listCursor, listPage, 103)
	res, err := s.List(ctxT(t), &oncekeystore.ListParams{Limit: oncekeystore.MaxListLimit})
	require.NoError(t, err)
	require.Len(t, res.Records, 103)
}

func testListPaginationUpdates(t *testing.T, s oncekeystore.Store) {
	var recs []*oncekeystore.Record
	for range 12 {
		recs = append(recs, acquire(t, s, params(oncekeystore.Effectful)))
	}
	recs = sortedByUpdate(recs)
	lp := oncekeystore.ListParams{Limit: 4}
	res, err := s.List(ctxT(t), &lp)
	require.NoError(t, err)
	require.Equal(t, keysOf(recs[:4]), keysOf(res.Records))
	seen := keysOf(res.Records)

	// While paging, update one record already seen and one not yet seen.
	complete(t, s, recs[1], oncekeystore.StatusApplied, []byte("x"), nil)
	complete(t, s, recs[6], oncekeystore.StatusApplied, []byte("y"), nil)
	lp.Cursor = res.Next
	rest := listAll(t, s, lp)
	seen = append(seen, keysOf(rest)...)

	count := map[string]int{}
	for _, k := range seen {
		count[k]++
	}
	for i, r := range recs {
		k := r.Tenant + "/" + r.OperationKey
		switch i {
		case 1:
			require.Equal(t, 2, count[k], "an updated record already seen shows again at the end")
		default:
			require.Equal(t, 1, count[k], "record %d must be neither skipped nor repeated", i)
		}
	}
	require.Equal(t, keysOf([]*oncekeystore.Record{recs[1], recs[6]}), seen[len(seen)-2:], "updated records move to the end")
}

func testListInvalid(t *testing.T, s oncekeystore.Store) {
	requireListInvalid(t, s.List, func(p *oncekeystore.ListParams) *int { return &p.Limit }, listCursor)
	_, err := s.List(ctxT(t), &oncekeystore.ListParams{Status: "bogus"})
	requireInvalid(t, err, "Status")
}

// ---- purge ---------------------------------------------------------------------------------

func testPurgeTombstones(t *testing.T, s oncekeystore.Store) {
	var expiring, unknown []*oncekeystore.ClaimParams
	var last *oncekeystore.ClaimParams
	for i := range 25 {
		p := params(oncekeystore.Effectful)
		p.Retention = 300 * time.Millisecond
		p.Tombstone = time.Hour
		r := acquire(t, s, p)
		switch i % 3 {
		case 0:
			complete(t, s, r, oncekeystore.StatusApplied, []byte("r"), nil)
			expiring = append(expiring, p)
		case 1:
			complete(t, s, r, oncekeystore.StatusFailed, nil, []byte("f"))
			expiring = append(expiring, p)
		default:
			_, err := s.MarkUnknown(ctxT(t), &oncekeystore.MarkUnknownParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
			require.NoError(t, err)
			unknown = append(unknown, p)
		}
		last = p
	}
	live := params(oncekeystore.Effectful)
	acquire(t, s, live)
	for _, p := range expiring {
		waitExpired(t, s, p)
	}
	// The last record settled after every unknown one was created: those are past retention too.
	require.Equal(t, expiring[len(expiring)-1], last)
	var progress []oncekeystore.PurgeResult
	res, err := s.Purge(ctxT(t), &oncekeystore.PurgeParams{BatchSize: 10, Progress: func(r oncekeystore.PurgeResult) { progress = append(progress, r) }})
	require.NoError(t, err)
	require.Equal(t, int64(17), res.Tombstoned, "the settled records only")
	require.Equal(t, int64(0), res.Deleted)
	// 17 records in batches of at most 10 (a store that also looks at the unknown records in a
	// batch may need more batches).
	require.GreaterOrEqual(t, res.Batches, 2)
	require.Len(t, progress, res.Batches)
	prev := int64(0)
	for _, pr := range progress {
		require.Greater(t, pr.Tombstoned, prev)
		require.LessOrEqual(t, pr.Tombstoned-prev, int64(10), "a batch tombstones at most BatchSize records")
		prev = pr.Tombstoned
	}
	require.Equal(t, int64(17), prev)
	require.Equal(t, int64(8), res.Unsettled, "the unknown records past retention are left, and counted")
	first := get(t, s, unknown[0].Tenant, unknown[0].OperationKey)
	require.True(t, res.OldestUnsettled.Equal(first.CreatedAt), "oldest %s, want %s", res.OldestUnsettled, first.CreatedAt)
	for _, p := range expiring {
		r := get(t, s, p.Tenant, p.OperationKey)
		require.Equal(t, oncekeystore.StatusExpired, r.Status)
		require.Nil(t, r.Result)
		require.Nil(t, r.Failure)
	}
	for _, p := range unknown {
		require.Equal(t, oncekeystore.StatusUnknown, get(t, s, p.Tenant, p.OperationKey).Status, "an unknown outcome never expires unresolved")
	}
	require.Equal(t, oncekeystore.StatusPending, get(t, s, live.Tenant, live.OperationKey).Status)

	// Nothing left to do but the unknown records, which are left again.
	res, err = s.Purge(ctxT(t), &oncekeystore.PurgeParams{BatchSize: 10})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.PurgeResult{Unsettled: 8, OldestUnsettled: res.OldestUnsettled}, *res)
	require.True(t, res.OldestUnsettled.Equal(first.CreatedAt))
}

// testUnsettledNeverExpire: pending (lease live or run out) and unknown records past their
// retention and even their tombstone window are never purged; a repeat still sees them as they
// are (not expired), an unknown one can still be resolved, and the resolution's retention counts
// from then.
func testUnsettledNeverExpire(t *testing.T, s oncekeystore.Store) {
	mk := func(lease time.Duration) (*oncekeystore.ClaimParams, *oncekeystore.Record) {
		p := params(oncekeystore.Effectful)
		p.Lease, p.Retention, p.Tombstone = lease, 100*time.Millisecond, 200*time.Millisecond
		return p, acquire(t, s, p)
	}
	unk, ru := mk(longLease)
	_, err := s.MarkUnknown(ctxT(t), &oncekeystore.MarkUnknownParams{Tenant: unk.Tenant, OperationKey: unk.OperationKey, Epoch: ru.Epoch})
	require.NoError(t, err)
	running, _ := mk(longLease)
	abandoned, _ := mk(shortLease)
	// A settled sibling created after them: once it is deleted, all three are past their windows.
	sib := params(oncekeystore.Effectful)
	sib.Retention, sib.Tombstone = 100*time.Millisecond, 200*time.Millisecond
	complete(t, s, acquire(t, s, sib), oncekeystore.StatusApplied, []byte("r"), nil)
	var total oncekeystore.PurgeResult
	require.Eventually(t, func() bool {
		res, err := s.Purge(context.Background(), &oncekeystore.PurgeParams{})
		require.NoError(t, err)
		total.Tombstoned += res.Tombstoned
		total.Deleted += res.Deleted
		total.Unsettled = res.Unsettled
		_, gerr := s.Get(context.Background(), &oncekeystore.GetParams{Tenant: sib.Tenant, OperationKey: sib.OperationKey})
		return errors.Is(gerr, oncekeystore.ErrNotFound)
	}, waitFor, pollEvery, "the settled sibling was never deleted")
	require.Equal(t, int64(1), total.Deleted, "only the settled sibling")
	require.Equal(t, int64(3), total.Unsettled)

	require.Equal(t, oncekeystore.StatusUnknown, get(t, s, unk.Tenant, unk.OperationKey).Status)
	require.Equal(t, oncekeystore.StatusPending, get(t, s, running.Tenant, running.OperationKey).Status)
	require.Equal(t, oncekeystore.StatusPending, get(t, s, abandoned.Tenant, abandoned.OperationKey).Status)

	// A repeat of the unknown one observes it unknown: not expired, not a fresh claim.
	res := claim(t, s, unk)
	require.False(t, res.Expired)
	require.False(t, res.Acquired)
	require.Equal(t, oncekeystore.StatusUnknown, res.Record.Status)
	// A repeat of the running one waits for its owner, who can still record what it did.
	res = claim(t, s, running)
	require.False(t, res.Expired)
	require.False(t, res.Acquired)
	// The abandoned Effectful one becomes unknown, as within retention.
	res = claim(t, s, abandoned)
	require.False(t, res.Expired)
	require.Equal(t, oncekeystore.StatusUnknown, res.Record.Status)

	// The unknown one is resolved; its retention counts from the resolution.
	rr, err := s.Resolve(ctxT(t), &oncekeystore.ResolveParams{Tenant: unk.Tenant, OperationKey: unk.OperationKey, Epoch: res.Record.Epoch, Status: oncekeystore.StatusApplied, Result: []byte("found"), ResolvedBy: "ada"})
	require.NoError(t, err)
	require.True(t, rr.ExpiresAt.After(rr.UpdatedAt), "retention restarts at the resolution: %s <= %s", rr.ExpiresAt, rr.UpdatedAt)
	require.Equal(t, 100*time.Millisecond, rr.ExpiresAt.Sub(rr.UpdatedAt).Round(time.Millisecond))
	require.Equal(t, 200*time.Millisecond, rr.TombstoneUntil.Sub(rr.ExpiresAt).Round(time.Millisecond))
	res = claim(t, s, unk)
	require.False(t, res.Expired, "a repeat right after the resolution replays it")
	require.Equal(t, oncekeystore.StatusApplied, res.Record.Status)
	require.Equal(t, "found", string(res.Record.Result))
	// Settled now, it expires like any settled record.
	waitExpired(t, s, unk)
}

// testRetentionFromSettling: a record's retention counts from when it settles, not from its
// claim: a body that ran longer than the retention still leaves a record a repeat replays.
func testRetentionFromSettling(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	p.Retention, p.Tombstone = 300*time.Millisecond, time.Hour
	r := acquire(t, s, p)
	// A sibling claimed after it, settled at once: once it expires, p's claim is past its
	// retention too.
	sib := params(oncekeystore.Effectful)
	sib.Retention, sib.Tombstone = 300*time.Millisecond, time.Hour
	complete(t, s, acquire(t, s, sib), oncekeystore.StatusApplied, nil, nil)
	waitExpired(t, s, sib)
	done := complete(t, s, r, oncekeystore.StatusApplied, []byte("late"), nil)
	require.Equal(t, 300*time.Millisecond, done.ExpiresAt.Sub(done.UpdatedAt).Round(time.Millisecond))
	res := claim(t, s, p)
	require.False(t, res.Expired)
	require.Equal(t, "late", string(res.Record.Result))
	pr, err := s.Purge(ctxT(t), &oncekeystore.PurgeParams{})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, get(t, s, p.Tenant, p.OperationKey).Status, "purge %+v", pr)
	waitExpired(t, s, p)
}

func testPurgeDeletes(t *testing.T, s oncekeystore.Store) {
	var gone []*oncekeystore.ClaimParams
	for range 7 {
		p := params(oncekeystore.Effectful)
		p.Retention = 100 * time.Millisecond
		p.Tombstone = 200 * time.Millisecond
		complete(t, s, acquire(t, s, p), oncekeystore.StatusApplied, []byte("r"), nil)
		gone = append(gone, p)
	}
	live := params(oncekeystore.Effectful)
	complete(t, s, acquire(t, s, live), oncekeystore.StatusApplied, []byte("keep"), nil)

	total := purgeUntil(t, s, 3, func(total oncekeystore.PurgeResult) bool { return total.Deleted >= 7 })
	require.Equal(t, int64(7), total.Deleted)
	require.LessOrEqual(t, total.Tombstoned, int64(7))
	for _, p := range gone {
		_, err := s.Get(ctxT(t), &oncekeystore.GetParams{Tenant: p.Tenant, OperationKey: p.OperationKey})
		require.ErrorIs(t, err, oncekeystore.ErrNotFound)
	}
	require.Equal(t, "keep", string(get(t, s, live.Tenant, live.OperationKey).Result))
}

// ---- exact storage -------------------------------------------------------------------------

func testResultBytes(t *testing.T, s oncekeystore.Store) {
	every := make([]byte, 512)
	for i := range every {
		every[i] = byte(i)
	}
	big := make([]byte, 1<<20)
	_, _ = rand.Read(big)
	for _, tc := range []struct {
		name            string
		result, failure []byte
		st              oncekeystore.Status
	}{
		{"all byte values", every, nil, oncekeystore.StatusApplied},
		{"empty result", []byte{}, nil, oncekeystore.StatusApplied},
		{"nil result", nil, nil, oncekeystore.StatusApplied},
		{"empty failure", nil, []byte{}, oncekeystore.StatusFailed},
		{"failure bytes", nil, every, oncekeystore.StatusFailed},
		{"1 MiB random", big, nil, oncekeystore.StatusApplied},
		{"invalid UTF-8 and NUL", []byte{0, 0xff, 0xfe, '\\', '\'', 0}, nil, oncekeystore.StatusApplied},
	} {
		p := params(oncekeystore.Effectful)
		done := complete(t, s, acquire(t, s, p), tc.st, tc.result, tc.failure)
		requireBytes(t, tc.result, done.Result, tc.name+": Complete result")
		requireBytes(t, tc.failure, done.Failure, tc.name+": Complete failure")
		r := get(t, s, p.Tenant, p.OperationKey)
		requireBytes(t, tc.result, r.Result, tc.name+": Get result")
		requireBytes(t, tc.failure, r.Failure, tc.name+": Get failure")
		res := claim(t, s, p)
		requireBytes(t, tc.result, res.Record.Result, tc.name+": replayed result")
	}
	// The store keeps its own copy: a caller changing its slice afterwards changes nothing.
	p := params(oncekeystore.Effectful)
	buf := []byte("original")
	complete(t, s, acquire(t, s, p), oncekeystore.StatusApplied, buf, nil)
	copy(buf, "XXXXXXXX")
	r := get(t, s, p.Tenant, p.OperationKey)
	require.Equal(t, "original", string(r.Result))
	r.Result[0] = 'Y'
	require.Equal(t, "original", string(get(t, s, p.Tenant, p.OperationKey).Result))
}

// DefaultResultLimit is the largest Result or Failure a store must accept with its default
// options; one byte more must be refused with *oncekeystore.ResultTooLargeError, changing nothing.
const DefaultResultLimit = 16 << 20

func testResultLimit(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	r := acquire(t, s, p)
	over := make([]byte, DefaultResultLimit+1)
	var tooLarge *oncekeystore.ResultTooLargeError
	_, err := s.Complete(ctxT(t), &oncekeystore.CompleteParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Status: oncekeystore.StatusApplied, Result: over})
	require.ErrorAs(t, err, &tooLarge)
	require.Equal(t, DefaultResultLimit+1, tooLarge.Size)
	require.Equal(t, DefaultResultLimit, tooLarge.Limit)
	_, err = s.Complete(ctxT(t), &oncekeystore.CompleteParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Status: oncekeystore.StatusFailed, Failure: over})
	require.ErrorAs(t, err, &tooLarge)
	_, err = s.MarkUnknown(ctxT(t), &oncekeystore.MarkUnknownParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Failure: over})
	require.ErrorAs(t, err, &tooLarge)
	requireSame(t, r, get(t, s, p.Tenant, p.OperationKey))
}

func testTextFields(t *testing.T, s oncekeystore.Store) {
	long := strings.Repeat("é'\"\\%_ü漢字🙂", 10*1024/19+1)
	require.Greater(t, len(long), 10*1024)
	odd := `O'Brien "quoted" \back\slash\\ \x00 $1 %s _% ; DROP TABLE x; -- Ünïcødé 漢字 🙂 ` + "\t\n\r"
	for _, v := range []string{odd, long} {
		p := params(oncekeystore.Effectful)
		p.Tenant = "tenant " + v
		p.OperationKey = newKey() + v
		p.Tool, p.Version, p.WorkflowID, p.StepID = "tool "+v, "v "+v, "wf "+v, "step "+v
		r := acquire(t, s, p)
		got := get(t, s, p.Tenant, p.OperationKey)
		requireSame(t, r, got)
		require.Equal(t, p.Tenant, got.Tenant)
		require.Equal(t, p.OperationKey, got.OperationKey)
		require.Equal(t, p.Tool, got.Tool)
		require.Equal(t, p.Version, got.Version)
		require.Equal(t, p.WorkflowID, got.WorkflowID)
		require.Equal(t, p.StepID, got.StepID)
		_, err := s.MarkUnknown(ctxT(t), &oncekeystore.MarkUnknownParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
		require.NoError(t, err)
		res, err := s.Resolve(ctxT(t), &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch,
			Status: oncekeystore.StatusApplied, EffectReference: "ref " + v, ResolvedBy: "by " + v, Note: "note " + v})
		require.NoError(t, err)
		got = get(t, s, p.Tenant, p.OperationKey)
		requireSame(t, res, got)
		require.Equal(t, "ref "+v, got.EffectReference)
		require.Equal(t, "by "+v, got.ResolvedBy)
		require.Equal(t, "note "+v, got.Note)
		lr := listAll(t, s, oncekeystore.ListParams{Tenant: p.Tenant, Tool: p.Tool, WorkflowID: p.WorkflowID})
		require.Equal(t, []string{p.Tenant + "/" + p.OperationKey}, keysOf(lr))
	}
}

// ---- resolve -------------------------------------------------------------------------------

func unknownRecord(t *testing.T, s oncekeystore.Store) (*oncekeystore.ClaimParams, *oncekeystore.Record) {
	t.Helper()
	p := params(oncekeystore.Effectful)
	r := acquire(t, s, p)
	m, err := s.MarkUnknown(ctxT(t), &oncekeystore.MarkUnknownParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Failure: []byte("lost response")})
	require.NoError(t, err)
	return p, m
}

func testResolveUnknown(t *testing.T, s oncekeystore.Store) {
	ctx := ctxT(t)
	// Applied, with a result and an effect reference: the next claim replays it.
	p, m := unknownRecord(t, s)
	r, err := s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: m.Epoch, Status: oncekeystore.StatusApplied,
		Result: []byte(`{"ticket":"T-9"}`), EffectReference: "T-9", ResolvedBy: "alice@example.com", Note: "found it in the desk"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, r.Status)
	require.Equal(t, m.Epoch, r.Epoch)
	require.Equal(t, "alice@example.com", r.ResolvedBy)
	require.Equal(t, "found it in the desk", r.Note)
	require.Equal(t, "T-9", r.EffectReference)
	requireSame(t, r, get(t, s, p.Tenant, p.OperationKey))
	res := claim(t, s, p)
	require.False(t, res.Acquired)
	require.Equal(t, `{"ticket":"T-9"}`, string(res.Record.Result))

	// Released (not applied): the next claim acquires at a new epoch.
	p, m = unknownRecord(t, s)
	r, err = s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: m.Epoch, Status: oncekeystore.StatusReleased,
		ResolvedBy: "bob", Note: "downstream has no such ticket"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusReleased, r.Status)
	require.Equal(t, "bob", r.ResolvedBy)
	res = claim(t, s, p)
	require.True(t, res.Acquired)
	require.True(t, res.TookOver)
	require.Equal(t, m.Epoch+1, res.Record.Epoch)

	// Failed.
	p, m = unknownRecord(t, s)
	r, err = s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: m.Epoch, Status: oncekeystore.StatusFailed,
		Failure: []byte("rejected downstream"), ResolvedBy: "carol", Note: "declined"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusFailed, r.Status)
	require.Equal(t, "rejected downstream", string(r.Failure))
	res = claim(t, s, p)
	require.False(t, res.Acquired)
	require.Equal(t, oncekeystore.StatusFailed, res.Record.Status)

	// Resolved once: a second resolution is refused and changes nothing.
	before := get(t, s, p.Tenant, p.OperationKey)
	_, err = s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: m.Epoch, Status: oncekeystore.StatusApplied, ResolvedBy: "mallory"})
	ce := requireConflict(t, err)
	require.Equal(t, oncekeystore.StatusFailed, ce.Status)
	requireSame(t, before, get(t, s, p.Tenant, p.OperationKey))
}

func testResolveExpiredPending(t *testing.T, s oncekeystore.Store) {
	for _, st := range []oncekeystore.Status{oncekeystore.StatusApplied, oncekeystore.StatusReleased, oncekeystore.StatusFailed} {
		p := params(oncekeystore.Effectful)
		p.Lease = shortLease
		r := acquire(t, s, p)
		waitLeaseExpired(t, s, p.Tenant, p.OperationKey)
		res, err := s.Resolve(ctxT(t), &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Status: st,
			Result: []byte("r"), ResolvedBy: "receipt lookup", Note: "by operation key"})
		require.NoError(t, err, "resolve pending with an expired lease to %s", st)
		require.Equal(t, st, res.Status)
		require.True(t, res.LeaseUntil.IsZero())
		require.Equal(t, "receipt lookup", res.ResolvedBy)
		// The owner whose lease expired has lost the record.
		_, err = s.Complete(ctxT(t), &oncekeystore.CompleteParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Status: oncekeystore.StatusApplied})
		requireLost(t, err)
		c := claim(t, s, p)
		require.Equal(t, st == oncekeystore.StatusReleased, c.Acquired)
	}
}

func testResolveRefused(t *testing.T, s oncekeystore.Store) {
	ctx := ctxT(t)
	refuse := func(p *oncekeystore.ClaimParams, want oncekeystore.Status) {
		t.Helper()
		before := get(t, s, p.Tenant, p.OperationKey)
		for _, st := range []oncekeystore.Status{oncekeystore.StatusApplied, oncekeystore.StatusReleased, oncekeystore.StatusFailed} {
			_, err := s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: before.Epoch, Status: st, Result: []byte("z"), ResolvedBy: "x", Note: "y"})
			ce := requireConflict(t, err)
			require.Equal(t, want, ce.Status)
			require.Equal(t, p.OperationKey, ce.OperationKey)
		}
		requireSame(t, before, get(t, s, p.Tenant, p.OperationKey))
	}
	live := params(oncekeystore.Effectful)
	acquire(t, s, live)
	refuse(live, oncekeystore.StatusPending)

	applied := params(oncekeystore.Effectful)
	complete(t, s, acquire(t, s, applied), oncekeystore.StatusApplied, []byte("a"), nil)
	refuse(applied, oncekeystore.StatusApplied)

	failed := params(oncekeystore.Effectful)
	complete(t, s, acquire(t, s, failed), oncekeystore.StatusFailed, nil, []byte("f"))
	refuse(failed, oncekeystore.StatusFailed)

	released := params(oncekeystore.Effectful)
	r := acquire(t, s, released)
	_, err := s.Release(ctx, &oncekeystore.ReleaseParams{Tenant: r.Tenant, OperationKey: r.OperationKey, Epoch: r.Epoch})
	require.NoError(t, err)
	refuse(released, oncekeystore.StatusReleased)

	// Only applied, released and failed are decisions.
	p, _ := unknownRecord(t, s)
	for _, st := range []oncekeystore.Status{oncekeystore.StatusPending, oncekeystore.StatusUnknown, oncekeystore.StatusExpired, ""} {
		_, err := s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: 1, Status: st})
		requireInvalid(t, err, "Status")
	}
	require.Equal(t, oncekeystore.StatusUnknown, get(t, s, p.Tenant, p.OperationKey).Status)
}

// A decision names the epoch it was made on. Once the operation has moved on (the episode was
// settled not applied and a later attempt claimed the key and ended unknown again), the same
// decision delivered again is refused with *oncekeystore.StaleDecisionError and changes nothing; a
// decision for the current epoch lands.
func testResolveStale(t *testing.T, s oncekeystore.Store) {
	ctx := ctxT(t)
	p, m := unknownRecord(t, s)
	first := &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: m.Epoch, Status: oncekeystore.StatusReleased, ResolvedBy: "alice"}
	_, err := s.Resolve(ctx, first)
	require.NoError(t, err)
	again := acquire(t, s, p)
	require.Equal(t, m.Epoch+1, again.Epoch)
	_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: again.Epoch})
	require.NoError(t, err)
	before := get(t, s, p.Tenant, p.OperationKey)

	_, err = s.Resolve(ctx, first)
	var stale *oncekeystore.StaleDecisionError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, m.Epoch, stale.Epoch)
	require.Equal(t, again.Epoch, stale.Current)
	require.Equal(t, oncekeystore.StatusUnknown, stale.Status)
	require.Contains(t, err.Error(), "moved on")
	requireSame(t, before, get(t, s, p.Tenant, p.OperationKey))

	// A future epoch is no better than a past one.
	future := *first
	future.Epoch = again.Epoch + 1
	_, err = s.Resolve(ctx, &future)
	require.ErrorAs(t, err, &stale)
	requireSame(t, before, get(t, s, p.Tenant, p.OperationKey))

	_, err = s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Status: oncekeystore.StatusReleased})
	requireInvalid(t, err, "Epoch")

	r, err := s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: again.Epoch, Status: oncekeystore.StatusFailed, ResolvedBy: "bob"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusFailed, r.Status)
	require.Equal(t, again.Epoch, r.Epoch)
}

// The record keeps the namespace of the claim that created it: a later claim of the same key
// from another namespace (same fingerprint) does not rewrite it.
func testNamespaceKept(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	r := acquire(t, s, p)
	require.Equal(t, "ns-a", r.Namespace)
	complete(t, s, r, oncekeystore.StatusApplied, []byte("a"), nil)
	q := *p
	q.Namespace = "ns-b"
	res := claim(t, s, &q)
	require.False(t, res.Acquired)
	require.Equal(t, "ns-a", res.Record.Namespace)
	require.Equal(t, "ns-a", get(t, s, p.Tenant, p.OperationKey).Namespace)
	lr := listAll(t, s, oncekeystore.ListParams{Tenant: p.Tenant, WorkflowID: p.WorkflowID})
	for _, rec := range lr {
		if rec.OperationKey == p.OperationKey {
			require.Equal(t, "ns-a", rec.Namespace)
		}
	}
}

// ---- bad input and concurrency -------------------------------------------------------------

func testInvalidParams(t *testing.T, s oncekeystore.Store) {
	ctx := ctxT(t)
	requireRefusedTexts(t, func() *oncekeystore.ClaimParams { return params(oncekeystore.Effectful) },
		func(p *oncekeystore.ClaimParams) error { _, err := s.Claim(ctx, p); return err },
		func(p *oncekeystore.ClaimParams) error {
			_, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: p.Tenant, OperationKey: p.OperationKey})
			return err
		})
	for field, mut := range map[string]func(p *oncekeystore.ClaimParams){
		"Effect":    func(p *oncekeystore.ClaimParams) { p.Effect = oncekeystore.ReadOnly },
		"Lease":     func(p *oncekeystore.ClaimParams) { p.Lease = 0 },
		"Retention": func(p *oncekeystore.ClaimParams) { p.Retention = -time.Second },
		"Tombstone": func(p *oncekeystore.ClaimParams) { p.Tombstone = 0 },
	} {
		p := params(oncekeystore.Effectful)
		mut(p)
		_, err := s.Claim(ctx, p)
		requireInvalid(t, err, field)
		_, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: p.OperationKey})
		if p.OperationKey != "" {
			require.ErrorIs(t, err, oncekeystore.ErrNotFound, "a refused claim stores nothing")
		}
	}
	p := params(oncekeystore.Effectful)
	r := acquire(t, s, p)
	for _, st := range []oncekeystore.Status{oncekeystore.StatusPending, oncekeystore.StatusUnknown, oncekeystore.StatusReleased, oncekeystore.StatusExpired, ""} {
		_, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch, Status: st})
		requireInvalid(t, err, "Status")
	}
	_, err := s.Renew(ctx, &oncekeystore.RenewParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: 0, Lease: time.Second})
	requireInvalid(t, err, "Epoch")
	_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
	requireInvalid(t, err, "Lease")
	_, err = s.Purge(ctx, &oncekeystore.PurgeParams{BatchSize: -1})
	requireInvalid(t, err, "BatchSize")
	_, err = s.Forget(ctx, &oncekeystore.ForgetParams{})
	requireInvalid(t, err, "Tenant")
	requireSame(t, r, get(t, s, p.Tenant, p.OperationKey))
}

func testConcurrentClaim(t *testing.T, s oncekeystore.Store) {
	p := params(oncekeystore.Effectful)
	raceOne(t, 32, func(int) (*oncekeystore.ClaimResult, error) {
		q := *p
		return s.Claim(context.Background(), &q)
	}, func(res *oncekeystore.ClaimResult) bool { return res.Acquired }, func(res *oncekeystore.ClaimResult) error {
		if res.Record.Status != oncekeystore.StatusPending || res.Record.Epoch != 1 {
			return fmt.Errorf("unexpected record %+v", res.Record)
		}
		return nil
	})
}

func testConcurrentTakeover(t *testing.T, s oncekeystore.Store) {
	p, _ := expiredClaim(t, s, oncekeystore.Idempotent)
	won := raceOne(t, 16, func(int) (*oncekeystore.ClaimResult, error) {
		q := *p
		return s.Claim(context.Background(), &q)
	}, func(res *oncekeystore.ClaimResult) bool { return res.Acquired }, func(*oncekeystore.ClaimResult) error { return nil })
	require.Equal(t, int64(2), won.Record.Epoch, "exactly one takeover, at epoch 2")
}

func testContextCanceled(t *testing.T, s oncekeystore.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := params(oncekeystore.Effectful)
	_, err := s.Claim(ctx, p)
	require.Error(t, err)
	require.True(t, errors.Is(err, context.Canceled), "got %v", err)
	_, err = s.Get(ctxT(t), &oncekeystore.GetParams{Tenant: p.Tenant, OperationKey: p.OperationKey})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
}
