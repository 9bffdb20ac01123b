package memstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storetest"
)

// fakeClock is a settable clock for the store.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func setup(t *testing.T) (*memstore.Store, *fakeClock) {
	t.Helper()
	clk := &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	return memstore.New(&memstore.Options{Clock: clk.Now}), clk
}

func claimParams(key string, eff oncekeystore.Effect) *oncekeystore.ClaimParams {
	return &oncekeystore.ClaimParams{
		Tenant: "t1", OperationKey: key, Tool: "create_ticket", Version: "1", Fingerprint: "fp",
		WorkflowID: "wf", StepID: "step", Effect: eff,
		Lease: 30 * time.Second, Retention: time.Hour, Tombstone: 2 * time.Hour,
	}
}

func TestFakeClockLeaseAndRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clk := setup(t)

	res, err := s.Claim(ctx, claimParams("ok1_a", oncekeystore.Idempotent))
	require.NoError(t, err)
	require.True(t, res.Acquired)
	require.Equal(t, int64(1), res.Record.Epoch)

	clk.Advance(29 * time.Second)
	res, err = s.Claim(ctx, claimParams("ok1_a", oncekeystore.Idempotent))
	require.NoError(t, err)
	require.False(t, res.Acquired, "a live lease on the store's clock is not taken")
	require.False(t, res.Record.LeaseExpired)

	clk.Advance(time.Second)
	res, err = s.Claim(ctx, claimParams("ok1_a", oncekeystore.Idempotent))
	require.NoError(t, err)
	require.True(t, res.Acquired && res.TookOver)
	require.Equal(t, int64(2), res.Record.Epoch)

	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "t1", OperationKey: "ok1_a", Epoch: 2, Status: oncekeystore.StatusApplied, Result: []byte("r")})
	require.NoError(t, err)

	clk.Advance(time.Hour)
	res, err = s.Claim(ctx, claimParams("ok1_a", oncekeystore.Idempotent))
	require.NoError(t, err)
	require.True(t, res.Expired)
	require.False(t, res.Acquired)

	pr, err := s.Purge(ctx, &oncekeystore.PurgeParams{})
	require.NoError(t, err)
	require.Equal(t, int64(1), pr.Tombstoned)
	got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusExpired, got.Status)
	require.Nil(t, got.Result)
	require.Equal(t, "fp", got.Fingerprint)

	clk.Advance(2 * time.Hour)
	p := claimParams("ok1_a", oncekeystore.Effectful)
	p.Fingerprint = "fp2"
	res, err = s.Claim(ctx, p)
	require.NoError(t, err)
	require.True(t, res.Acquired && res.TookOver, "the tombstone window is over: the key is free")
	require.Equal(t, int64(3), res.Record.Epoch)
	require.Equal(t, "fp2", res.Record.Fingerprint)
	require.Nil(t, res.Record.Result)
}

// TestCallerClockAheadCannotTakeLiveLease: the lease is judged on the store's clock. A caller
// whose own clock runs 60s ahead has no say: Claim carries no caller time, and a 30s lease
// taken at the store's now is live until the store's clock passes it.
func TestCallerClockAheadCannotTakeLiveLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clk := setup(t)
	first, err := s.Claim(ctx, claimParams("ok1_skew", oncekeystore.Idempotent))
	require.NoError(t, err)
	callerNow := clk.Now().Add(60 * time.Second)
	require.True(t, callerNow.After(first.Record.LeaseUntil), "on the caller's clock the lease looks over")
	res, err := s.Claim(ctx, claimParams("ok1_skew", oncekeystore.Idempotent))
	require.NoError(t, err)
	require.False(t, res.Acquired)
	require.False(t, res.Record.LeaseExpired)
	require.Equal(t, int64(1), res.Record.Epoch)
	clk.Advance(30 * time.Second)
	res, err = s.Claim(ctx, claimParams("ok1_skew", oncekeystore.Idempotent))
	require.NoError(t, err)
	require.True(t, res.Acquired, "once the store's clock passes the lease, it is taken over")
}

func TestConcurrentClaimOneAcquires(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	var acquired atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Claim(context.Background(), claimParams("ok1_c", oncekeystore.Effectful))
			if err == nil && res.Acquired {
				acquired.Add(1)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int32(1), acquired.Load())
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oncekeystore.Store { return memstore.New(nil) })
}

func TestResultLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New(&memstore.Options{MaxResultBytes: 8})
	r, err := s.Claim(ctx, claimParams("ok1_big", oncekeystore.Effectful))
	require.NoError(t, err)
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "t1", OperationKey: "ok1_big", Epoch: r.Record.Epoch, Status: oncekeystore.StatusApplied, Result: make([]byte, 9)})
	var tooLarge *oncekeystore.ResultTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	require.Equal(t, 9, tooLarge.Size)
	require.Equal(t, 8, tooLarge.Limit)
	got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_big"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusPending, got.Status, "a refused result changes nothing")
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "t1", OperationKey: "ok1_big", Epoch: r.Record.Epoch, Status: oncekeystore.StatusApplied, Result: make([]byte, 8)})
	require.NoError(t, err)
}

// Approvals on the store's clock: the deadline and the end of retention are exact, a pending
// approval past its deadline stays pending until it is decided (the approval workflow decides
// timed_out), and a decided one past retention is asked anew and, left alone, purged.
func TestApprovalFakeClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clk := setup(t)
	ask := func(key string) *oncekeystore.ApprovalResult {
		t.Helper()
		res, err := s.RequestApproval(ctx, &oncekeystore.RequestApprovalParams{Tenant: "t1", OperationKey: key, Tool: "refund",
			Fingerprint: "fp", Summary: "refund 120.00 EUR", Timeout: time.Hour})
		require.NoError(t, err)
		return res
	}
	start := clk.Now()
	a := ask("ok1_a").Approval
	require.True(t, a.RequestedAt.Equal(start))
	require.True(t, a.Deadline.Equal(start.Add(time.Hour)))

	clk.Advance(30 * time.Minute)
	res := ask("ok1_a")
	require.False(t, res.Created, "before its deadline, undecided: still the same pending request")
	require.Equal(t, oncekeystore.ApprovalPending, res.Approval.Status)

	d, err := s.DecideApproval(ctx, &oncekeystore.DecideApprovalParams{Tenant: "t1", OperationKey: "ok1_a", Episode: 1,
		Status: oncekeystore.ApprovalDenied, DecidedBy: "ada", Reason: "no", Retention: 24 * time.Hour})
	require.NoError(t, err)
	require.True(t, d.DecidedAt.Equal(start.Add(30*time.Minute)))
	require.True(t, d.ExpiresAt.Equal(start.Add(30*time.Minute+24*time.Hour)))
	ask("ok1_b")
	_, err = s.DecideApproval(ctx, &oncekeystore.DecideApprovalParams{Tenant: "t1", OperationKey: "ok1_b", Episode: 1,
		Status: oncekeystore.ApprovalApproved, Retention: 24 * time.Hour})
	require.NoError(t, err)

	clk.Advance(24*time.Hour - time.Microsecond)
	require.False(t, ask("ok1_a").Created, "denied again within retention")
	pr, err := s.Purge(ctx, &oncekeystore.PurgeParams{})
	require.NoError(t, err)
	require.Zero(t, pr.ApprovalsDeleted)

	clk.Advance(time.Microsecond)
	res = ask("ok1_a")
	require.True(t, res.Created, "past retention: asked anew")
	require.Equal(t, int64(2), res.Approval.Episode)
	pr, err = s.Purge(ctx, &oncekeystore.PurgeParams{})
	require.NoError(t, err)
	require.Equal(t, int64(1), pr.ApprovalsDeleted, "the approved one, left alone past retention")
	_, err = s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_b"})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
	got, err := s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalPending, got.Status)

	// Undecided at its deadline, to the microsecond: it reads as timed out then, not before.
	clk.Advance(time.Hour - time.Microsecond)
	got, err = s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalPending, got.Status)
	clk.Advance(time.Microsecond)
	got, err = s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalTimedOut, got.Status)
	require.True(t, got.DecidedAt.Equal(got.Deadline))
	res = ask("ok1_a")
	require.True(t, res.Created, "past its deadline: asked anew")
	require.Equal(t, int64(3), res.Approval.Episode)
}
