package pgstore_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storetest"
	"github.com/oncekey/oncekey/pgstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// setup returns a migrated pool on a fresh schema (search_path) and a Store on it.
func setup(t testing.TB) (*pgxpool.Pool, *pgstore.Store) {
	t.Helper()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	return pool, pgstore.New(pool, nil)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oncekeystore.Store {
		_, s := setup(t)
		return s
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ctxWalk bounds a test that walks many calls (every exec mode's edge values, every stall point
// of a call): ctxT's minute bounds a call, not such a walk, which make test's parallel packages
// can slow past a minute on a small machine.
func ctxWalk(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newPool returns a migrated pool on a fresh schema with cfg adjusted by tune.
func newPool(t *testing.T, tune func(cfg *pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	url, _ := testenv.PostgresURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	if tune != nil {
		tune(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pgstore.Migrate(ctxT(t), pool))
	return pool
}

// oneConn is a tune for newPool: one connection, none kept idle (so a test can end the backend
// every call uses, or gate its dial), in query exec mode, then more.
func oneConn(mode pgx.QueryExecMode, more ...func(cfg *pgxpool.Config)) func(cfg *pgxpool.Config) {
	return func(cfg *pgxpool.Config) {
		cfg.MaxConns, cfg.MinConns = 1, 0
		cfg.ConnConfig.DefaultQueryExecMode = mode
		for _, f := range more {
			f(cfg)
		}
	}
}

func claimParams(key string, eff oncekeystore.Effect) *oncekeystore.ClaimParams {
	return &oncekeystore.ClaimParams{
		Tenant: "acme", OperationKey: key, Tool: "create_ticket", Version: "v1", Fingerprint: "fp",
		WorkflowID: "wf", StepID: "step", Effect: eff,
		Lease: 30 * time.Second, Retention: time.Hour, Tombstone: time.Hour,
	}
}

func TestClaimConcurrentOneAcquires(t *testing.T) {
	t.Parallel()
	pool := newPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 32 })
	s := pgstore.New(pool, nil)
	for round := range 10 {
		key := fmt.Sprintf("ok1_race_%d", round)
		var acquired, observed atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, 32)
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := s.Claim(context.Background(), claimParams(key, oncekeystore.Effectful))
				switch {
				case err != nil:
					errs <- err
				case res.Acquired:
					acquired.Add(1)
				default:
					observed.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, int32(1), acquired.Load(), "round %d: exactly one of 32 concurrent claims acquires", round)
		require.Equal(t, int32(31), observed.Load())
		var rows int
		require.NoError(t, pool.QueryRow(ctxT(t), `SELECT count(*) FROM oncekey_operations WHERE operation_key = $1`, key).Scan(&rows))
		require.Equal(t, 1, rows)
	}
}

// countingConn counts the writes a client makes to the server: one per round trip.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// statementCounter is a pgx QueryTracer counting statements.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// countingPool returns a migrated pool of one connection, the count of its writes to the server
// (one per round trip) and the count of its statements.
func countingPool(t *testing.T) (*pgxpool.Pool, *atomic.Int64, *statementCounter) {
	t.Helper()
	writes := new(atomic.Int64)
	stmts := &statementCounter{}
	pool := newPool(t, func(cfg *pgxpool.Config) {
		cfg.MaxConns, cfg.MinConns = 1, 1
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		cfg.ConnConfig.Tracer = stmts
		dial := cfg.ConnConfig.DialFunc
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: c, writes: writes}, nil
		}
	})
	return pool, writes, stmts
}

func TestClaimAndCompleteAreOneRoundTrip(t *testing.T) {
	t.Parallel()
	pool, writes, stmts := countingPool(t)
	s := pgstore.New(pool, nil)
	ctx := ctxT(t)
	// Warm the connection's statement cache (the first use of a statement also prepares it).
	warm, err := s.Claim(ctx, claimParams("ok1_warm", oncekeystore.Effectful))
	require.NoError(t, err)
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_warm", Epoch: warm.Record.Epoch, Status: oncekeystore.StatusApplied})
	require.NoError(t, err)
	_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: "ok1_warm", Epoch: warm.Record.Epoch, Lease: time.Second})
	require.ErrorIs(t, err, oncekeystore.ErrLostClaim)

	measure := func(what string, fn func()) {
		t.Helper()
		w0, s0 := writes.Load(), stmts.n.Load()
		fn()
		require.Equal(t, int64(1), stmts.n.Load()-s0, "%s: statements", what)
		require.Equal(t, int64(1), writes.Load()-w0, "%s: round trips", what)
	}
	var rec *oncekeystore.Record
	measure("claim of a new key", func() {
		res, err := s.Claim(ctx, claimParams("ok1_one", oncekeystore.Effectful))
		require.NoError(t, err)
		require.True(t, res.Acquired)
		rec = res.Record
	})
	measure("claim of a pending key", func() {
		res, err := s.Claim(ctx, claimParams("ok1_one", oncekeystore.Effectful))
		require.NoError(t, err)
		require.False(t, res.Acquired)
	})
	measure("renew", func() {
		_, err := s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: "ok1_one", Epoch: rec.Epoch, Lease: time.Minute})
		require.NoError(t, err)
	})
	measure("complete", func() {
		_, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_one", Epoch: rec.Epoch, Status: oncekeystore.StatusApplied, Result: []byte("r")})
		require.NoError(t, err)
	})
	measure("claim replaying an applied key", func() {
		res, err := s.Claim(ctx, claimParams("ok1_one", oncekeystore.Effectful))
		require.NoError(t, err)
		require.Equal(t, "r", string(res.Record.Result))
	})
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url, schema := testenv.PostgresURL(t)
	named := schema + "_named"
	var pools []*pgxpool.Pool
	for range 2 {
		p, err := pgxpool.New(context.Background(), url)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		pools = append(pools, p)
	}
	t.Cleanup(func() {
		_, _ = pools[0].Exec(context.Background(), "DROP SCHEMA IF EXISTS "+named+" CASCADE")
	})
	for round := range 2 {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i, p := range pools {
			wg.Add(2)
			go func() { defer wg.Done(); errs[2*i] = pgstore.Migrate(context.Background(), p) }()
			go func() { defer wg.Done(); errs[2*i+1] = pgstore.MigrateSchema(context.Background(), p, named) }()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err, "round %d", round)
		}
	}
	for _, sc := range []string{schema, named} {
		var versions, indexes int
		require.NoError(t, pools[0].QueryRow(ctxT(t), `SELECT count(*) FROM `+sc+`.oncekey_migrations`).Scan(&versions))
		files, err := os.ReadDir("migrations")
		require.NoError(t, err)
		require.Equal(t, len(files)/2, versions, "schema %s: each migration recorded once", sc)
		require.NoError(t, pools[0].QueryRow(ctxT(t), `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND tablename = 'oncekey_operations'`, sc).Scan(&indexes))
		require.Equal(t, 5, indexes, "schema %s: primary key and four indexes", sc)
	}

	// The named schema works through Options.Schema from a pool whose search_path is elsewhere.
	s := pgstore.New(pools[1], &pgstore.Options{Schema: named})
	res, err := s.Claim(ctxT(t), claimParams("ok1_named", oncekeystore.Idempotent))
	require.NoError(t, err)
	require.True(t, res.Acquired)
	var n int
	require.NoError(t, pools[0].QueryRow(ctxT(t), `SELECT count(*) FROM `+named+`.oncekey_operations`).Scan(&n))
	require.Equal(t, 1, n)
	require.NoError(t, pools[0].QueryRow(ctxT(t), `SELECT count(*) FROM `+schema+`.oncekey_operations`).Scan(&n))
	require.Equal(t, 0, n)

	// Down and up again.
	require.NoError(t, pgstore.MigrateDownSchema(ctxT(t), pools[0], named, 0))
	var exists bool
	require.NoError(t, pools[0].QueryRow(ctxT(t), `SELECT to_regclass($1) IS NOT NULL`, named+".oncekey_operations").Scan(&exists))
	require.False(t, exists)
	require.NoError(t, pgstore.MigrateSchema(ctxT(t), pools[0], named))
	require.NoError(t, pools[0].QueryRow(ctxT(t), `SELECT to_regclass($1) IS NOT NULL`, named+".oncekey_operations").Scan(&exists))
	require.True(t, exists)
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

func TestUnreachableIsStoreUnavailable(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), fmt.Sprintf("postgres://root@127.0.0.1:%d/test?connect_timeout=2", closedPort(t)))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := pgstore.New(pool, nil)
	ctx := ctxT(t)
	check := func(what string, err error) {
		t.Helper()
		var su *oncekeystore.StoreUnavailableError
		require.ErrorAs(t, err, &su, "%s: %v", what, err)
		require.NotErrorIs(t, err, oncekeystore.ErrLostClaim)
		require.NotErrorIs(t, err, oncekeystore.ErrNotFound)
	}
	_, err = s.Claim(ctx, claimParams("ok1_x", oncekeystore.Effectful))
	check("claim", err)
	_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: "ok1_x", Epoch: 1, Lease: time.Second})
	check("renew", err)
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_x", Epoch: 1, Status: oncekeystore.StatusApplied})
	check("complete", err)
	_, err = s.Release(ctx, &oncekeystore.ReleaseParams{Tenant: "acme", OperationKey: "ok1_x", Epoch: 1})
	check("release", err)
	_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: "acme", OperationKey: "ok1_x", Epoch: 1})
	check("mark unknown", err)
	_, err = s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: "acme", OperationKey: "ok1_x", Epoch: 1, Status: oncekeystore.StatusApplied})
	check("resolve", err)
	_, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_x"})
	check("get", err)
	_, err = s.List(ctx, &oncekeystore.ListParams{})
	check("list", err)
	_, err = s.Purge(ctx, &oncekeystore.PurgeParams{})
	check("purge", err)
	_, err = s.Forget(ctx, &oncekeystore.ForgetParams{Tenant: "acme"})
	check("forget", err)
	check("migrate", pgstore.Migrate(ctx, pool))
}

func TestLeaseOnDatabaseClock(t *testing.T) {
	t.Parallel()
	pool, s := setup(t)
	ctx := ctxT(t)
	var before, after time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&before))
	res, err := s.Claim(ctx, claimParams("ok1_clock", oncekeystore.Effectful))
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&after))
	r := res.Record
	require.False(t, r.CreatedAt.Before(before), "created on the database clock")
	require.False(t, r.CreatedAt.After(after))
	require.Equal(t, 30*time.Second, r.LeaseUntil.Sub(r.CreatedAt))
	// The lease is judged with now() in SQL: a row whose lease_until the database sees as past
	// is expired whatever the caller's clock says.
	_, err = pool.Exec(ctx, `UPDATE oncekey_operations SET lease_until = now() - interval '1 microsecond' WHERE operation_key = 'ok1_clock'`)
	require.NoError(t, err)
	res, err = s.Claim(ctx, claimParams("ok1_clock", oncekeystore.Effectful))
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, res.Record.Status)
}

func TestResultLimit(t *testing.T) {
	t.Parallel()
	pool, _ := setup(t)
	s := pgstore.New(pool, &pgstore.Options{MaxResultBytes: 1024})
	ctx := ctxT(t)
	res, err := s.Claim(ctx, claimParams("ok1_big", oncekeystore.Effectful))
	require.NoError(t, err)
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_big", Epoch: res.Record.Epoch, Status: oncekeystore.StatusApplied, Result: make([]byte, 1025)})
	var tooLarge *oncekeystore.ResultTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	require.Equal(t, 1025, tooLarge.Size)
	require.Equal(t, 1024, tooLarge.Limit)
	got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_big"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusPending, got.Status, "a refused result changes nothing")
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_big", Epoch: res.Record.Epoch, Status: oncekeystore.StatusApplied, Result: make([]byte, 1024)})
	require.NoError(t, err)
}

// lockRow holds a row lock on (acme, key) in an open transaction until the returned func runs.
func lockRow(t *testing.T, pool *pgxpool.Pool, key string) func() {
	t.Helper()
	tx, err := pool.Begin(ctxT(t))
	require.NoError(t, err)
	var k string
	require.NoError(t, tx.QueryRow(ctxT(t), `SELECT operation_key FROM oncekey_operations WHERE tenant = 'acme' AND operation_key = $1 FOR UPDATE`, key).Scan(&k))
	var once sync.Once
	release := func() { once.Do(func() { _ = tx.Rollback(context.Background()) }) }
	t.Cleanup(release)
	return release
}

func TestStatementTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	opts := &pgstore.Options{StatementTimeout: 300 * time.Millisecond}
	pool := newPool(t, func(cfg *pgxpool.Config) { pgstore.ConfigurePool(cfg, opts) })
	s := pgstore.New(pool, opts)
	ctx := ctxT(t)
	_, err := s.Claim(ctx, claimParams("ok1_locked", oncekeystore.Effectful))
	require.NoError(t, err)
	release := lockRow(t, pool, "ok1_locked")

	// A complete stuck behind a row lock fails after the statement timeout, fail-closed.
	start := time.Now()
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_locked", Epoch: 1, Status: oncekeystore.StatusApplied, Result: []byte("timed out")})
	var su *oncekeystore.StoreUnavailableError
	require.ErrorAs(t, err, &su)
	require.Less(t, time.Since(start), 10*time.Second)

	// The caller's context is honoured too. The store without a timeout has its own pool,
	// configured as ConfigurePool says: on the first pool the server's statement_timeout (300ms)
	// could end the statement before cancel() does, and the cancel request pgx sent when the
	// first complete's timeout passed could reach the server late, after that connection was
	// handed out again, and cancel this statement (57014, with the caller's context still live).
	slowOpts := &pgstore.Options{StatementTimeout: -1}
	cfg := pool.Config()
	delete(cfg.ConnConfig.RuntimeParams, "statement_timeout")
	pgstore.ConfigurePool(cfg, slowOpts)
	slowPool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(slowPool.Close)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	slow := pgstore.New(slowPool, slowOpts)
	go func() {
		_, err := slow.Complete(cctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_locked", Epoch: 1, Status: oncekeystore.StatusApplied, Result: []byte("canceled")})
		done <- err
	}()
	require.Eventually(t, func() bool {
		var waiting int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE 'UPDATE%'`).Scan(&waiting)
		return waiting > 0
	}, 10*time.Second, 10*time.Millisecond, "the complete never blocked on the row lock")
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorAs(t, err, &su)

	// The server stopped both statements: once the lock is gone nothing lands late.
	release()
	require.Eventually(t, func() bool {
		var waiting int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting)
		return waiting == 0
	}, 10*time.Second, 10*time.Millisecond)
	got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_locked"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusPending, got.Status)
	require.Nil(t, got.Result)
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_locked", Epoch: 1, Status: oncekeystore.StatusApplied, Result: []byte("owner")})
	require.NoError(t, err)
}

func TestPurgeSkipsLockedRows(t *testing.T) {
	t.Parallel()
	pool, s := setup(t)
	ctx := ctxT(t)
	for i := range 5 {
		p := claimParams(fmt.Sprintf("ok1_p%d", i), oncekeystore.Effectful)
		p.Retention = 100 * time.Millisecond
		res, err := s.Claim(ctx, p)
		require.NoError(t, err)
		_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: p.OperationKey, Epoch: res.Record.Epoch, Status: oncekeystore.StatusApplied})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM oncekey_operations WHERE expires_at <= now()`).Scan(&n)
		return n == 5
	}, 10*time.Second, 10*time.Millisecond)
	release := lockRow(t, pool, "ok1_p2")
	res, err := s.Purge(ctx, &oncekeystore.PurgeParams{BatchSize: 2})
	require.NoError(t, err, "purge does not wait for a row a claim holds")
	require.Equal(t, int64(4), res.Tombstoned)
	release()
	res, err = s.Purge(ctx, &oncekeystore.PurgeParams{BatchSize: 2})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Tombstoned, "the skipped row is purged next time")
}

// Purge walks a table of many pages in ranges: every settled record past its window is
// deleted, no batch changes more than BatchSize rows, and the pending and unknown records
// spread among them stay.
func TestPurgeWalksManyPages(t *testing.T) {
	t.Parallel()
	pool, s := setup(t)
	ctx := ctxT(t)
	_, err := pool.Exec(ctx, `INSERT INTO oncekey_operations (tenant, operation_key, tool, version, fingerprint, effect, status,
    epoch, lease_until, result, created_at, updated_at, expires_at, tombstone_until)
SELECT 'acme', 'ok1_walk_' || g, 'create_ticket', 'v1', md5(g::text), 3,
    CASE WHEN g % 97 = 0 THEN 'pending' WHEN g % 89 = 0 THEN 'unknown' ELSE 'applied' END, 1,
    CASE WHEN g % 97 = 0 THEN now() + interval '1 hour' END, decode(repeat('ab', 300), 'hex'),
    now() - interval '40 days', now() - interval '40 days', now() - interval '30 days', now() - interval '1 day'
FROM generate_series(1, 5000) AS g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE oncekey_operations`)
	require.NoError(t, err)
	var unsettled int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM oncekey_operations WHERE status IN ('pending', 'unknown')`).Scan(&unsettled))
	var prev int64
	res, err := s.Purge(ctx, &oncekeystore.PurgeParams{BatchSize: 100, Rest: -1, Progress: func(r oncekeystore.PurgeResult) {
		require.LessOrEqual(t, r.Deleted-prev, int64(100), "a batch deletes at most BatchSize records")
		prev = r.Deleted
	}})
	require.NoError(t, err)
	require.Equal(t, 5000-unsettled, res.Deleted)
	require.Equal(t, unsettled, res.Unsettled)
	require.GreaterOrEqual(t, res.Batches, 50)
	var left, pending int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'pending') FROM oncekey_operations`).Scan(&left, &pending))
	require.Equal(t, unsettled, left)
	require.Equal(t, int64(5000/97), pending)
}
