package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storetest"
	"github.com/oncekey/oncekey/redisstore"
)

// redisAddr is the Redis the tests use: TEST_REDIS_ADDR, or the local one.
func redisAddr() string {
	if a := os.Getenv("TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// missing skips t, or fails it when CI is set, because Redis is not there.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("required service missing (CI is set, so this fails instead of skipping): "+format, args...)
	}
	t.Skipf("service missing: "+format, args...)
}

// client returns a client of the test Redis at addr, closed in t.Cleanup.
func client(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// prefix returns a key prefix of its own for t, and deletes every key under it in t.Cleanup.
func prefix(t testing.TB, rdb redis.UniversalClient) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	p := "oncekey-test-" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// SCAN is fine here: the test's own keys, in a test.
		iter := rdb.Scan(ctx, 0, p+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Logf("redisstore test: scan %s: %v", p, err)
		}
		for _, k := range keys {
			if err := rdb.Del(ctx, k).Err(); err != nil {
				t.Logf("redisstore test: delete %q: %v", k, err)
			}
		}
	})
	return p
}

// setup returns a Store on the test Redis under a prefix of its own, and its client.
func setup(t testing.TB, opts *redisstore.Options) (*redisstore.Store, *redis.Client) {
	t.Helper()
	rdb := client(t, redisAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		missing(t, "redis at %s: %v", redisAddr(), err)
	}
	o := redisstore.Options{}
	if opts != nil {
		o = *opts
	}
	o.Prefix = prefix(t, rdb)
	s, err := redisstore.New(rdb, &o)
	require.NoError(t, err)
	require.NoError(t, s.Check(ctx))
	return s, rdb
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oncekeystore.Store {
		s, _ := setup(t, nil)
		return s
	})
}

// One bucket: every record and index in one hash slot, the case where a purge batch, a listing
// page and a tenant's deletion find everything in one script.
func TestConformanceOneBucket(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oncekeystore.Store {
		s, _ := setup(t, &redisstore.Options{Buckets: 1})
		return s
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func claimParams(key string, eff oncekeystore.Effect) *oncekeystore.ClaimParams {
	return &oncekeystore.ClaimParams{Tenant: "acme", OperationKey: key, Tool: "create_ticket", Version: "v1",
		Fingerprint: strings.Repeat("ab", 32), WorkflowID: "wf-1", StepID: "s1", Effect: eff,
		Lease: 30 * time.Second, Retention: time.Hour, Tombstone: time.Hour}
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	for field, o := range map[string]redisstore.Options{
		"Prefix":         {Prefix: "app:{x}:"},
		"Buckets":        {Buckets: redisstore.MaxBuckets + 1},
		"MaxResultBytes": {MaxResultBytes: -1},
	} {
		_, err := redisstore.New(rdb, &o)
		var ie *oncekeystore.InvalidParamsError
		require.ErrorAs(t, err, &ie, field)
		require.Equal(t, field, ie.Field)
	}
	_, err := redisstore.New(nil, nil)
	require.Error(t, err)
}

// Every key a record's scripts touch carries the bucket's hash tag, so on Redis Cluster each
// script runs in one slot.
func TestKeysShareTheBucketHashTag(t *testing.T) {
	t.Parallel()
	s, rdb := setup(t, &redisstore.Options{Buckets: 4})
	ctx := ctxT(t)
	for i := range 20 {
		p := claimParams("ok1_tag_"+string(rune('a'+i)), oncekeystore.Effectful)
		p.Tenant = []string{"acme", "globex", "a{b}c"}[i%3]
		c, err := s.Claim(ctx, p)
		require.NoError(t, err)
		if i%2 == 0 {
			_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: c.Record.Epoch})
			require.NoError(t, err)
		}
		if i%3 == 0 {
			a, err := s.RequestApproval(ctx, approvalParams(p.Tenant, p.OperationKey))
			require.NoError(t, err)
			_, err = s.DecideApproval(ctx, &oncekeystore.DecideApprovalParams{Tenant: p.Tenant, OperationKey: p.OperationKey,
				Episode: a.Approval.Episode, Status: oncekeystore.ApprovalApproved, Retention: time.Hour})
			require.NoError(t, err)
		}
	}
	keys, err := rdb.Keys(ctx, s.Prefix()+"*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	tags := map[string]bool{}
	for _, k := range keys {
		rest := strings.TrimPrefix(k, s.Prefix())
		require.True(t, strings.HasPrefix(rest, "{b"), "key %q starts with the bucket's hash tag", k)
		tag := rest[1:strings.IndexByte(rest, '}')]
		require.Contains(t, []string{"b0", "b1", "b2", "b3"}, tag)
		tags[tag] = true
	}
	require.Greater(t, len(tags), 1, "records spread over buckets")
}

// dropProxy forwards TCP to a Redis; when armed, it closes the connection instead of passing
// on the next reply from the server: the command ran, its reply is lost, and go-redis sends
// it again on a new connection.
type dropProxy struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	drops  atomic.Int32
	wg     sync.WaitGroup
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &dropProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { _ = ln.Close(); p.wg.Wait() })
	return p
}

func (p *dropProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(s, c); _ = s.Close() }()
		go func() {
			defer p.wg.Done()
			defer c.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && p.armed.CompareAndSwap(true, false) {
					p.drops.Add(1)
					_ = s.Close()
					return
				}
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// A claim or fenced write whose reply is lost after it ran is sent again by go-redis (its
// retries on a broken connection); the repeat reports what the first did, instead of a live
// claim to someone else or ErrLostClaim.
func TestRepeatAfterLostReply(t *testing.T) {
	t.Parallel()
	base, _ := setup(t, nil)
	proxy := newDropProxy(t, redisAddr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.ln.Addr().String(), MaxRetries: 3, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := redisstore.New(rdb, &redisstore.Options{Prefix: base.Prefix()})
	require.NoError(t, err)
	ctx := ctxT(t)
	require.NoError(t, s.Check(ctx)) // scripts cached: the first call is the EVALSHA itself

	p := claimParams("ok1_lost_reply", oncekeystore.Effectful)
	proxy.armed.Store(true)
	c, err := s.Claim(ctx, p)
	require.NoError(t, err)
	require.Equal(t, int32(1), proxy.drops.Load(), "the claim's reply was dropped once")
	require.True(t, c.Acquired, "the repeated claim reports the record it acquired")
	require.Equal(t, int64(1), c.Record.Epoch)

	proxy.armed.Store(true)
	done, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: c.Record.Epoch,
		Status: oncekeystore.StatusApplied, Result: []byte("T-1"), EffectReference: "T-1"})
	require.NoError(t, err, "the repeated complete reports the write that landed")
	require.Equal(t, int32(2), proxy.drops.Load())
	require.Equal(t, oncekeystore.StatusApplied, done.Status)
	require.Equal(t, "T-1", string(done.Result))

	// The write token is the call's own: another complete at that epoch is still fenced off.
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: c.Record.Epoch,
		Status: oncekeystore.StatusApplied, Result: []byte("T-2")})
	require.ErrorIs(t, err, oncekeystore.ErrLostClaim)

	// The same for a resolution.
	q := claimParams("ok1_lost_reply_resolve", oncekeystore.Effectful)
	c, err = s.Claim(ctx, q)
	require.NoError(t, err)
	_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: q.Tenant, OperationKey: q.OperationKey, Epoch: c.Record.Epoch})
	require.NoError(t, err)
	proxy.armed.Store(true)
	r, err := s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: q.Tenant, OperationKey: q.OperationKey, Epoch: c.Record.Epoch, Status: oncekeystore.StatusApplied, ResolvedBy: "alice"})
	require.NoError(t, err)
	require.Equal(t, int32(3), proxy.drops.Load())
	require.Equal(t, oncekeystore.StatusApplied, r.Status)

	// The same for an approval: the repeated request reports the episode it asked, the repeated
	// decision the decision that landed.
	proxy.armed.Store(true)
	ar, err := s.RequestApproval(ctx, approvalParams(q.Tenant, "ok1_lost_reply_approval"))
	require.NoError(t, err)
	require.Equal(t, int32(4), proxy.drops.Load())
	require.True(t, ar.Created, "the repeated request reports the episode it asked")
	require.Equal(t, int64(1), ar.Approval.Episode)
	again, err := s.RequestApproval(ctx, approvalParams(q.Tenant, "ok1_lost_reply_approval"))
	require.NoError(t, err)
	require.False(t, again.Created, "another request shares the pending episode")
	proxy.armed.Store(true)
	d := &oncekeystore.DecideApprovalParams{Tenant: q.Tenant, OperationKey: "ok1_lost_reply_approval", Episode: 1,
		Status: oncekeystore.ApprovalApproved, DecidedBy: "ada", Retention: time.Hour}
	a, err := s.DecideApproval(ctx, d)
	require.NoError(t, err, "the repeated decision reports the decision that landed")
	require.Equal(t, int32(5), proxy.drops.Load())
	require.Equal(t, oncekeystore.ApprovalApproved, a.Status)
	_, err = s.DecideApproval(ctx, d)
	var ce *oncekeystore.ApprovalConflictError
	require.ErrorAs(t, err, &ce, "another decision is refused")
}

func approvalParams(tenant, key string) *oncekeystore.RequestApprovalParams {
	return &oncekeystore.RequestApprovalParams{Tenant: tenant, OperationKey: key, Namespace: "default", Tool: "refund",
		Fingerprint: "fp", WorkflowID: "wf", StepID: "step", Summary: "refund 120.00 EUR", Timeout: time.Hour}
}

// A Redis that is not there is a *oncekeystore.StoreUnavailableError, for every kind of call.
func TestUnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	s, err := redisstore.New(rdb, nil)
	require.NoError(t, err)
	ctx := ctxT(t)
	var ue *oncekeystore.StoreUnavailableError
	_, err = s.Claim(ctx, claimParams("ok1_nowhere", oncekeystore.Effectful))
	require.ErrorAs(t, err, &ue)
	_, err = s.List(ctx, &oncekeystore.ListParams{})
	require.ErrorAs(t, err, &ue)
	_, err = s.Purge(ctx, &oncekeystore.PurgeParams{})
	require.ErrorAs(t, err, &ue)
	_, err = s.Forget(ctx, &oncekeystore.ForgetParams{Tenant: "acme"})
	require.ErrorAs(t, err, &ue)
	_, err = s.RequestApproval(ctx, approvalParams("acme", "ok1_nowhere"))
	require.ErrorAs(t, err, &ue)
	_, err = s.DecideApproval(ctx, &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: "ok1_nowhere", Episode: 1,
		Status: oncekeystore.ApprovalDenied, Retention: time.Hour})
	require.ErrorAs(t, err, &ue)
	_, err = s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_nowhere"})
	require.ErrorAs(t, err, &ue)
	_, err = s.ListApprovals(ctx, &oncekeystore.ListApprovalsParams{})
	require.ErrorAs(t, err, &ue)
	require.ErrorAs(t, s.Check(ctx), &ue)
}

// A server that lost its script cache (a restart, SCRIPT FLUSH) gets the scripts again, on the
// single-record path (EVALSHA then EVAL) and on the pipelined one (List, Purge, Forget).
func TestScriptCacheFlushed(t *testing.T) {
	s, rdb := setup(t, nil)
	ctx := ctxT(t)
	p := claimParams("ok1_flush", oncekeystore.Idempotent)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	c, err := s.Claim(ctx, p)
	require.NoError(t, err)
	require.True(t, c.Acquired)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	lr, err := s.List(ctx, &oncekeystore.ListParams{Tenant: "acme"})
	require.NoError(t, err)
	require.Len(t, lr.Records, 1)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	_, err = s.RequestApproval(ctx, approvalParams("acme", p.OperationKey))
	require.NoError(t, err)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	al, err := s.ListApprovals(ctx, &oncekeystore.ListApprovalsParams{Tenant: "acme"})
	require.NoError(t, err)
	require.Len(t, al.Approvals, 1)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	fr, err := s.Forget(ctx, &oncekeystore.ForgetParams{Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ForgetResult{Deleted: 1, ApprovalsDeleted: 1}, *fr)
}

// A listing whose filter matches few records among many reads the index a bounded chunk at a
// time (at most 1,000 entries per script) and still finds every match, in order, across pages.
func TestListFilterScansInChunks(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, &redisstore.Options{Buckets: 2})
	ctx := ctxT(t)
	var want []string
	for i := range 2600 {
		p := claimParams(fmt.Sprintf("ok1_chunk_%05d", i), oncekeystore.Idempotent)
		if i%1000 == 999 || i == 2599 {
			p.Tool = "refund"
			want = append(want, p.OperationKey)
		}
		_, err := s.Claim(ctx, p)
		require.NoError(t, err)
	}
	var got []string
	lp := oncekeystore.ListParams{Tool: "refund", Limit: 2}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		res, err := s.List(ctx, &lp)
		require.NoError(t, err)
		for _, r := range res.Records {
			got = append(got, r.OperationKey)
		}
		if res.Next == "" {
			break
		}
		lp.Cursor = res.Next
	}
	require.Equal(t, want, got, "every match once, oldest update first")
}

// Records past retention that Purge must leave alone (pending under a live lease: their owner
// still runs) are skipped without stopping the purge of the others behind them, in batches
// smaller than the number skipped, and the purge ends.
func TestPurgeSkipsLiveClaimsPastRetention(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, &redisstore.Options{Buckets: 1})
	ctx := ctxT(t)
	var live, settled []*oncekeystore.ClaimParams
	for i := range 12 {
		p := claimParams(fmt.Sprintf("ok1_skip_%02d", i), oncekeystore.Effectful)
		p.Retention = 200 * time.Millisecond
		c, err := s.Claim(ctx, p)
		require.NoError(t, err)
		if i%3 == 0 {
			settled = append(settled, p)
			_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: c.Record.Epoch,
				Status: oncekeystore.StatusApplied, Result: []byte("r")})
			require.NoError(t, err)
		} else {
			live = append(live, p) // pending, its 30 s lease outlives the retention
		}
	}
	require.Eventually(t, func() bool {
		c, err := s.Claim(ctx, settled[len(settled)-1])
		return err == nil && c.Expired
	}, 15*time.Second, 20*time.Millisecond)
	res, err := s.Purge(ctx, &oncekeystore.PurgeParams{BatchSize: 2, Rest: -1})
	require.NoError(t, err)
	require.Equal(t, int64(len(settled)), res.Tombstoned)
	for _, p := range settled {
		r, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: p.Tenant, OperationKey: p.OperationKey})
		require.NoError(t, err)
		require.Equal(t, oncekeystore.StatusExpired, r.Status)
	}
	for _, p := range live {
		r, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: p.Tenant, OperationKey: p.OperationKey})
		require.NoError(t, err)
		require.Equal(t, oncekeystore.StatusPending, r.Status, "a live claim is left to its owner")
	}
	require.Equal(t, int64(len(live)), res.Unsettled, "the live claims past retention are counted")
	// Settled later: its retention counts from the settling, after which a purge takes it.
	r, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: live[0].Tenant, OperationKey: live[0].OperationKey})
	require.NoError(t, err)
	done, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: r.Tenant, OperationKey: r.OperationKey, Epoch: r.Epoch, Status: oncekeystore.StatusApplied})
	require.NoError(t, err)
	require.True(t, done.ExpiresAt.After(done.UpdatedAt), "retention restarts at the settling")
	require.Eventually(t, func() bool {
		res, err = s.Purge(ctx, &oncekeystore.PurgeParams{BatchSize: 2, Rest: -1})
		require.NoError(t, err)
		return res.Tombstoned == 1
	}, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, int64(len(live)-1), res.Unsettled)
}
