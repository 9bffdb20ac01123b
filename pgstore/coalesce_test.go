package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/storeload"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storetest"
	"github.com/oncekey/oncekey/pgstore"
)

// The conformance suite with every claim and completion sent through the multi-row statements.
func TestConformanceCoalescedStatements(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oncekeystore.Store {
		pool, _ := setup(t)
		return pgstore.NewAlwaysCoalesced(pool)
	})
}

// The conformance suite with Options.Coalesce as a user sets it: calls alone when nothing is in
// flight, together when they arrive at once.
func TestConformanceCoalesced(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oncekeystore.Store {
		pool, _ := setup(t)
		return pgstore.New(pool, &pgstore.Options{Coalesce: true})
	})
}

// coalesced returns a migrated pool on a fresh schema, a Store on it with Options.Coalesce and
// one statement of a kind in flight at most (so that a test holding one makes the others
// queue), and a test's context.
func coalesced(t *testing.T) (*pgxpool.Pool, *pgstore.Store, context.Context) {
	pool, _ := setup(t)
	return pool, pgstore.NewCoalescedOneFlight(pool), ctxT(t)
}

func coalescedClaim(tenant, key, tool string) *oncekeystore.ClaimParams {
	return &oncekeystore.ClaimParams{Tenant: tenant, OperationKey: key, Tool: tool, Fingerprint: "fp", Effect: oncekeystore.Effectful,
		Lease: 30e9, Retention: 3600e9, Tombstone: 3600e9}
}

// blocker holds the row of (tenant, key) locked in a transaction of its own, so that the next
// statement writing it stays in flight and the calls after it queue.
func blocker(t *testing.T, pool *pgxpool.Pool, tenant, key string) (release func()) {
	t.Helper()
	tx, err := pool.Begin(ctxT(t))
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(ctxT(t), `SELECT count(*) FROM (SELECT 1 FROM oncekey_operations WHERE tenant = $1 AND operation_key = $2 FOR UPDATE) AS l`, tenant, key).Scan(&n))
	require.Equal(t, 1, n)
	var once sync.Once
	release = func() { once.Do(func() { require.NoError(t, tx.Commit(context.Background())) }) }
	t.Cleanup(release)
	return release
}

// queued waits until the store holds claims and completes calls in its queues (-1: none in
// flight).
func queued(t *testing.T, s *pgstore.Store, claims, completes int) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, p := s.CoalesceQueued()
		return c == claims && p == completes
	}, 30*time.Second, 5*time.Millisecond)
}

type claimOut struct {
	res *oncekeystore.ClaimResult
	err error
}

// claimAsync claims p on s in a goroutine; the answer comes on the channel.
func claimAsync(ctx context.Context, s *pgstore.Store, p *oncekeystore.ClaimParams) <-chan claimOut {
	ch := make(chan claimOut, 1)
	go func() {
		res, err := s.Claim(ctx, p)
		ch <- claimOut{res, err}
	}()
	return ch
}

// Claims queued behind one in flight go as one statement, each with its own verdict: new keys
// acquired, a replay of an applied record, a fingerprint mismatch, a claim of a live pending
// record; a second claim of a key in the queue goes in the statement after.
func TestCoalescedClaimVerdicts(t *testing.T) {
	pool, s, ctx := coalesced(t)
	const tenant = "co"

	held, err := s.Claim(ctx, coalescedClaim(tenant, "held", "t"))
	require.NoError(t, err)
	applied, err := s.Claim(ctx, coalescedClaim(tenant, "applied", "t"))
	require.NoError(t, err)
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: tenant, OperationKey: "applied", Epoch: applied.Record.Epoch,
		Status: oncekeystore.StatusApplied, Result: []byte("r")})
	require.NoError(t, err)
	pending, err := s.Claim(ctx, coalescedClaim(tenant, "pending", "t"))
	require.NoError(t, err)

	release := blocker(t, pool, tenant, "held")
	first := claimAsync(ctx, s, coalescedClaim(tenant, "held", "t")) // in flight, waiting on the lock
	queued(t, s, 0, -1)
	b0, r0, _, _ := s.CoalesceStats()

	mismatch := coalescedClaim(tenant, "applied", "t")
	mismatch.Fingerprint = "other"
	calls := []*oncekeystore.ClaimParams{coalescedClaim(tenant, "new-1", "t"), coalescedClaim(tenant, "applied", "t"), mismatch,
		coalescedClaim(tenant, "pending", "t"), coalescedClaim(tenant, "new-2", "t"), coalescedClaim(tenant, "new-2", "t")}
	outs := make([]<-chan claimOut, len(calls))
	for i, p := range calls {
		outs[i] = claimAsync(ctx, s, p)
		queued(t, s, i+1, -1)
	}
	release()
	got := make([]claimOut, len(calls))
	for i, ch := range outs {
		got[i] = <-ch
		require.NoError(t, got[i].err, "call %d", i)
	}
	f := <-first
	require.NoError(t, f.err)
	require.False(t, f.res.Acquired)
	require.Equal(t, held.Record.Epoch, f.res.Record.Epoch)

	require.True(t, got[0].res.Acquired)
	require.Equal(t, int64(1), got[0].res.Record.Epoch)
	require.Equal(t, "new-1", got[0].res.Record.OperationKey)
	require.Equal(t, tenant, got[0].res.Record.Tenant)
	require.False(t, got[1].res.Acquired)
	require.Equal(t, oncekeystore.StatusApplied, got[1].res.Record.Status)
	require.Equal(t, []byte("r"), got[1].res.Record.Result)
	require.True(t, got[2].res.FingerprintMismatch)
	require.False(t, got[3].res.Acquired)
	require.Equal(t, pending.Record.Epoch, got[3].res.Record.Epoch)
	require.Equal(t, oncekeystore.StatusPending, got[3].res.Record.Status)
	// The same key twice: one acquires, the other finds it pending, at epoch 1 both.
	require.True(t, got[4].res.Acquired != got[5].res.Acquired, "exactly one of two claims of new-2 acquires")
	require.Equal(t, int64(1), got[4].res.Record.Epoch)
	require.Equal(t, int64(1), got[5].res.Record.Epoch)

	b1, r1, _, _ := s.CoalesceStats()
	// Two keys come twice ("applied" and "new-2"): their second calls go in a second statement.
	require.Equal(t, int64(2), b1-b0)
	require.Equal(t, int64(6), r1-r0)
}

// A row Postgres refuses fails its own call only: the statement it was in is refused as a
// whole (nothing written), and every call in it is sent again alone.
func TestCoalescedBadRowFailsAlone(t *testing.T) {
	pool, s, ctx := coalesced(t)
	const tenant = "co"
	_, err := pool.Exec(ctx, `ALTER TABLE oncekey_operations ADD CONSTRAINT no_poison CHECK (tool <> 'poison')`)
	require.NoError(t, err)
	_, err = s.Claim(ctx, coalescedClaim(tenant, "held", "t"))
	require.NoError(t, err)

	release := blocker(t, pool, tenant, "held")
	first := claimAsync(ctx, s, coalescedClaim(tenant, "held", "t"))
	queued(t, s, 0, -1)
	tools := []string{"t", "poison", "t", "t"}
	outs := make([]<-chan claimOut, len(tools))
	for i, tool := range tools {
		outs[i] = claimAsync(ctx, s, coalescedClaim(tenant, fmt.Sprintf("k-%d", i), tool))
		queued(t, s, i+1, -1)
	}
	release()
	require.NoError(t, (<-first).err)
	for i, ch := range outs {
		o := <-ch
		if tools[i] == "poison" {
			var pgErr *pgconn.PgError
			require.ErrorAs(t, o.err, &pgErr)
			require.Equal(t, "23514", pgErr.Code)
			require.False(t, errors.As(o.err, new(*oncekeystore.StoreUnavailableError)), "a refused row is not an unreachable store: %v", o.err)
			continue
		}
		require.NoError(t, o.err, "call %d", i)
		require.True(t, o.res.Acquired, "call %d", i)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM oncekey_operations WHERE tenant = $1 AND operation_key LIKE 'k-%'`, tenant).Scan(&n))
	require.Equal(t, 3, n)
	b, r, _, _ := s.CoalesceStats()
	require.Equal(t, int64(1), b)
	require.Equal(t, int64(4), r)
}

// Completions queued behind one in flight go as one statement, each with its own answer: stored,
// lost (a stale epoch), not found.
func TestCoalescedCompleteVerdicts(t *testing.T) {
	pool, s, ctx := coalesced(t)
	const tenant = "co"
	epochs := map[string]int64{}
	for _, k := range []string{"held", "a", "b", "stale"} {
		c, err := s.Claim(ctx, coalescedClaim(tenant, k, "t"))
		require.NoError(t, err)
		epochs[k] = c.Record.Epoch
	}
	complete := func(key string, epoch int64, result string) <-chan error {
		ch := make(chan error, 1)
		go func() {
			r, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: tenant, OperationKey: key, Epoch: epoch,
				Status: oncekeystore.StatusApplied, Result: []byte(result)})
			if err == nil && (r.Status != oncekeystore.StatusApplied || string(r.Result) != result || r.OperationKey != key || r.Tenant != tenant) {
				err = fmt.Errorf("complete %s: record %+v", key, r)
			}
			ch <- err
		}()
		return ch
	}
	release := blocker(t, pool, tenant, "held")
	first := complete("held", epochs["held"], "h")
	queued(t, s, -1, 0)
	a := complete("a", epochs["a"], "ra")
	queued(t, s, -1, 1)
	stale := complete("stale", epochs["stale"]+1, "rs")
	queued(t, s, -1, 2)
	missing := complete("missing", 1, "rm")
	queued(t, s, -1, 3)
	b := complete("b", epochs["b"], "")
	queued(t, s, -1, 4)
	release()
	require.NoError(t, <-first)
	require.NoError(t, <-a)
	require.NoError(t, <-b)
	require.ErrorIs(t, <-stale, oncekeystore.ErrLostClaim)
	require.ErrorIs(t, <-missing, oncekeystore.ErrNotFound)
	r, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: "stale"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusPending, r.Status)
	r, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: "b"})
	require.NoError(t, err)
	require.Equal(t, []byte{}, r.Result, "an empty result stays empty, not NULL")
	_, _, cb, cr := s.CoalesceStats()
	require.Equal(t, int64(1), cb)
	require.Equal(t, int64(4), cr)
}

// A call whose context ends while it waits in the queue returns at once and sends nothing.
func TestCoalescedCanceledWhileQueued(t *testing.T) {
	pool, s, ctx := coalesced(t)
	const tenant = "co"
	_, err := s.Claim(ctx, coalescedClaim(tenant, "held", "t"))
	require.NoError(t, err)
	release := blocker(t, pool, tenant, "held")
	first := claimAsync(ctx, s, coalescedClaim(tenant, "held", "t"))
	queued(t, s, 0, -1)
	cctx, cancel := context.WithCancel(ctx)
	gone := claimAsync(cctx, s, coalescedClaim(tenant, "gone", "t"))
	kept := claimAsync(ctx, s, coalescedClaim(tenant, "kept", "t"))
	queued(t, s, 2, -1)
	cancel()
	o := <-gone
	require.ErrorIs(t, o.err, context.Canceled)
	queued(t, s, 1, -1)
	release()
	require.NoError(t, (<-first).err)
	k := <-kept
	require.NoError(t, k.err)
	require.True(t, k.res.Acquired)
	_, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: "gone"})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
}

// Many concurrent claims and completions of new keys: every one acquired and stored, each with
// its own answer, in fewer statements than calls.
func TestCoalescedManyClients(t *testing.T) {
	pool, _ := setup(t)
	s := pgstore.New(pool, &pgstore.Options{Coalesce: true})
	storeload.ClaimComplete(t, s, "many", 32, 20)
	cb, cr, pb, pr := s.CoalesceStats()
	t.Logf("claims: %d statements of %d calls; completions: %d of %d", cb, cr, pb, pr)
	require.Greater(t, cr, cb, "no claims went together")
}
