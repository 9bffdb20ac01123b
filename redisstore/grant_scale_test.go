package redisstore_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/redisstore"
)

// The worker's lookup of a scope's active grants (ListGrants of one namespace, tenant and tool,
// active) reads only that scope's active grants: with 20,000 grants of other scopes and ended
// grants of its own scope (6,000 expired, 500 revoked), it reads one grant, the active one, counted by
// the script itself. What it takes, and what a PING of another client waits meanwhile, are
// measured and logged, not asserted.
func TestGrantLookupReadsItsScopeOnly(t *testing.T) {
	_, rdb := setup(t, nil)
	ctx := context.Background()
	pre := prefix(t, rdb)
	t.Cleanup(func() { unlinkAll(t, rdb, pre) })
	s, err := redisstore.New(rdb, &redisstore.Options{Prefix: pre})
	require.NoError(t, err)
	mk := func(n int, p func(i int) *oncekeystore.CreateGrantParams, revoke bool) {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += 16 {
					g, err := s.CreateGrant(ctx, p(i))
					if err == nil && revoke {
						_, err = s.RevokeGrant(ctx, &oncekeystore.RevokeGrantParams{ID: g.ID, RevokedBy: "grace"})
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		require.NoError(t, <-errs)
	}
	scope := func(tenant, tool string, d time.Duration) *oncekeystore.CreateGrantParams {
		return &oncekeystore.CreateGrantParams{Namespace: "default", Tenant: tenant, Tool: tool, CreatedBy: "ada", Duration: d}
	}
	mk(13500, func(i int) *oncekeystore.CreateGrantParams {
		return scope(fmt.Sprintf("tenant-%d", i%100), fmt.Sprintf("tool-%d", i%7), time.Hour)
	}, false)
	mk(6000, func(int) *oncekeystore.CreateGrantParams { return scope("acme", "IssueRefund", time.Microsecond) }, false)
	mk(500, func(int) *oncekeystore.CreateGrantParams { return scope("acme", "IssueRefund", time.Hour) }, true)
	var active *oncekeystore.Grant
	active, err = s.CreateGrant(ctx, scope("acme", "IssueRefund", time.Hour))
	require.NoError(t, err)

	p := &oncekeystore.ListGrantsParams{Namespace: "default", Tenant: "acme", Tool: "IssueRefund", Status: oncekeystore.GrantActive, Limit: oncekeystore.MaxListLimit}
	before := s.GrantReads()
	res, err := s.ListGrants(ctx, p)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.GrantReads()-before, "the lookup reads the one active grant of its scope, none of the 20,000 others")
	require.Len(t, res.Grants, 1)
	require.Equal(t, active.ID, res.Grants[0].ID)

	// The inbox's page of a tenant's active grants reads that namespace and tenant's active
	// grants only.
	before = s.GrantReads()
	res, err = s.ListGrants(ctx, &oncekeystore.ListGrantsParams{Namespace: "default", Tenant: "acme", Status: oncekeystore.GrantActive})
	require.NoError(t, err)
	require.Len(t, res.Grants, 1)
	require.Equal(t, int64(1), s.GrantReads()-before)

	pings := func(during func()) []time.Duration {
		other := client(t, redisAddr())
		require.NoError(t, other.Ping(ctx).Err())
		var (
			took []time.Duration
			done = make(chan struct{})
			wg   sync.WaitGroup
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				start := time.Now()
				if other.Ping(ctx).Err() == nil {
					took = append(took, time.Since(start))
				}
			}
		}()
		during()
		close(done)
		wg.Wait()
		return took
	}
	var lookups []time.Duration
	during := pings(func() {
		for range 300 {
			start := time.Now()
			_, err := s.ListGrants(ctx, p)
			require.NoError(t, err)
			lookups = append(lookups, time.Since(start))
		}
	})
	quiet := pings(func() {
		for range 300 {
			require.NoError(t, rdb.Ping(ctx).Err())
		}
	})
	t.Logf("20,001 grants: lookup median %s p99 %s max %s; another client's PING during lookups median %s max %s, during PINGs median %s max %s",
		pct(lookups, 50), pct(lookups, 99), pct(lookups, 100), pct(during, 50), pct(during, 100), pct(quiet, 50), pct(quiet, 100))
}

// pct returns the p-th percentile of ds (100: the largest).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

// unlinkAll deletes the keys under prefix p, 500 per round trip.
func unlinkAll(t *testing.T, rdb redis.UniversalClient, p string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	iter := rdb.Scan(ctx, 0, p+"*", 1000).Iterator()
	var keys []string
	flush := func() {
		if len(keys) > 0 {
			if err := rdb.Unlink(ctx, keys...).Err(); err != nil {
				t.Logf("redisstore test: unlink under %s: %v", p, err)
			}
			keys = keys[:0]
		}
	}
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == 500 {
			flush()
		}
	}
	flush()
}

// A grant an earlier version made (its hash and gall, no other index, no retention) is put into
// the indexes by the next Purge (or Forget): the worker's lookup then finds it, and Forget
// deletes it.
func TestGrantOfAnEarlierVersionReindexed(t *testing.T) {
	_, rdb := setup(t, nil)
	ctx := context.Background()
	pre := prefix(t, rdb)
	s, err := redisstore.New(rdb, &redisstore.Options{Prefix: pre})
	require.NoError(t, err)
	legacy := func() string {
		id := oncekeystore.NewGrantID()
		now := time.Now()
		base := pre + "{grants}"
		require.NoError(t, rdb.HSet(ctx, base+":g:"+id, "id", id, "ns", "default", "t", "acme", "tool", "IssueRefund", "wf", "", "rule", "",
			"by", "ada", "why", "holiday", "ca", now.UnixMicro(), "xa", now.Add(time.Hour).UnixMicro(), "rby", "").Err())
		require.NoError(t, rdb.ZAdd(ctx, base+":gall", redis.Z{Score: float64(now.UnixMicro()), Member: id}).Err())
		return id
	}
	id := legacy()

	scope := &oncekeystore.ListGrantsParams{Namespace: "default", Tenant: "acme", Tool: "IssueRefund", Status: oncekeystore.GrantActive}
	res, err := s.ListGrants(ctx, scope)
	require.NoError(t, err)
	require.Empty(t, res.Grants, "not in the scope's index yet")

	_, err = s.Purge(ctx, &oncekeystore.PurgeParams{})
	require.NoError(t, err)
	res, err = s.ListGrants(ctx, scope)
	require.NoError(t, err)
	require.Len(t, res.Grants, 1)
	require.Equal(t, id, res.Grants[0].ID)

	// Forget finds one that no Purge indexed yet, too.
	other := legacy()
	fr, err := s.Forget(ctx, &oncekeystore.ForgetParams{Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, int64(2), fr.GrantsDeleted)
	for _, id := range []string{id, other} {
		_, err = s.GetGrant(ctx, id)
		require.ErrorIs(t, err, oncekeystore.ErrNotFound)
	}
}
