package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storetest"
	"github.com/oncekey/oncekey/pgstore"
)

// The tests in this file run the store through a private PgBouncer in transaction mode
// (testenv.PgBouncer, four server connections) in front of the test database: every
// transaction, and every statement outside one, goes to whichever server connection is free,
// and nothing a client leaves on one (a prepared statement, a session setting) is its own.

// throughBouncer returns a pool reaching the test database through PgBouncer at url, built by
// build (pgxpool.New for a pool in pgx's default mode, the one users forget to change), a
// fresh schema migrated through it, and a Store with opts naming that schema (PgBouncer passes
// on no search_path).
func throughBouncer(t *testing.T, url string, build func(ctx context.Context, url string) (*pgxpool.Pool, error), opts pgstore.Options) (*pgxpool.Pool, *pgstore.Store) {
	t.Helper()
	_, schema := testenv.SchemaIn(t, testenv.DatabaseURL())
	pool, err := build(ctxT(t), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pgstore.MigrateSchema(ctxT(t), pool, schema))
	opts.Schema = schema
	return pool, pgstore.New(pool, &opts)
}

func defaultPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return pgxpool.New(ctx, url)
}

func storePool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return pgstore.NewPool(ctx, url, nil)
}

// TestPgBouncerLosesPreparedStatements pins what the store must survive behind PgBouncer 1.18
// in transaction mode: a statement prepared by one round trip is gone for the next when
// another client took its server connection in between. PgBouncer reuses server connections
// last in, first out, so A's BEGIN takes the one B prepared on and B's next statement goes to
// the other.
func TestPgBouncerLosesPreparedStatements(t *testing.T) {
	t.Parallel()
	url := testenv.PgBouncer(t, testenv.DatabaseURL())
	ctx := ctxT(t)
	a, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer a.Close(context.Background())
	b, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer b.Close(context.Background())
	// Two server connections, both idle.
	txA, err := a.Begin(ctx)
	require.NoError(t, err)
	txB, err := b.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, txA.Commit(ctx))
	require.NoError(t, txB.Commit(ctx))

	_, err = b.Prepare(ctx, "oncekey_probe", "SELECT 1")
	require.NoError(t, err)
	txA, err = a.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txA.Rollback(context.Background()) }()
	_, err = b.Exec(ctx, "oncekey_probe")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "26000", pgErr.Code, "prepared statement does not exist: %v", err)

	pooled, err := pgstore.DetectPooler(ctx, mustParse(t, url))
	require.NoError(t, err)
	require.True(t, pooled, "DetectPooler through PgBouncer")
	pooled, err = pgstore.DetectPooler(ctx, mustParse(t, testenv.DatabaseURL()))
	require.NoError(t, err)
	require.False(t, pooled, "DetectPooler straight to Postgres")
}

func mustParse(t *testing.T, url string) *pgxpool.Config {
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	return cfg
}

// TestConformanceThroughPgBouncer runs the store contract through PgBouncer in transaction
// mode: on a pool in pgx's default mode, which the store finds behind a pooler by itself, and
// on a coalescing Store over pgstore.NewPool's pool, which DetectPooler switched to
// QueryExecModeExec.
func TestConformanceThroughPgBouncer(t *testing.T) {
	url := testenv.PgBouncer(t, testenv.DatabaseURL())
	t.Run("DefaultPool", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) oncekeystore.Store {
			_, s := throughBouncer(t, url, defaultPool, pgstore.Options{})
			return s
		})
	})
	t.Run("NewPoolCoalesced", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) oncekeystore.Store {
			pool, s := throughBouncer(t, url, storePool, pgstore.Options{Coalesce: true})
			require.Equal(t, pgx.QueryExecModeExec, pool.Config().ConnConfig.DefaultQueryExecMode)
			_, ok := pool.Config().ConnConfig.RuntimeParams["statement_timeout"]
			require.False(t, ok, "NewPool left statement_timeout, which PgBouncer refuses, out")
			return s
		})
	})
}

// TestClaimSoakThroughPgBouncer has 16 goroutines claim and complete keys through PgBouncer,
// on a pool in pgx's default mode: each its own 40 keys, and 40 keys all of them claim. The
// effect of each key (counted where an acquired claim would run the tool) happens exactly once,
// and every key ends applied at epoch 1, with no call failing.
func TestClaimSoakThroughPgBouncer(t *testing.T) {
	t.Parallel()
	url := testenv.PgBouncer(t, testenv.DatabaseURL())
	for _, coalesced := range []bool{false, true} {
		t.Run(fmt.Sprintf("Coalesce=%v", coalesced), func(t *testing.T) {
			pool, s := throughBouncer(t, url, func(ctx context.Context, url string) (*pgxpool.Pool, error) {
				cfg, err := pgxpool.ParseConfig(url)
				if err != nil {
					return nil, err
				}
				cfg.MaxConns = 16
				return pgxpool.NewWithConfig(ctx, cfg)
			}, pgstore.Options{Coalesce: coalesced})
			require.Equal(t, pgx.QueryExecModeCacheStatement, pool.Config().ConnConfig.DefaultQueryExecMode)
			const workers, keys = 16, 40
			var effects sync.Map // operation key -> *atomic.Int32
			effect := func(key string) {
				n, _ := effects.LoadOrStore(key, new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
			}
			ctx := ctxT(t)
			errs := make(chan error, workers)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range keys {
						for _, key := range []string{fmt.Sprintf("ok1_own_%d_%d", w, i), fmt.Sprintf("ok1_shared_%d", i)} {
							res, err := s.Claim(ctx, claimParams(key, oncekeystore.Effectful))
							if err != nil {
								errs <- fmt.Errorf("worker %d: %w", w, err)
								return
							}
							if !res.Acquired {
								continue // in flight or applied: the owner completes it
							}
							effect(key)
							if _, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: key, Epoch: res.Record.Epoch,
								Status: oncekeystore.StatusApplied, Result: []byte(key)}); err != nil {
								errs <- fmt.Errorf("worker %d: %w", w, err)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			total := 0
			effects.Range(func(k, n any) bool {
				total++
				require.EqualValues(t, 1, n.(*atomic.Int32).Load(), "effects of %s", k)
				return true
			})
			require.Equal(t, workers*keys+keys, total, "keys with an effect")
			list, err := s.List(ctx, &oncekeystore.ListParams{Status: oncekeystore.StatusApplied, Limit: 10_000})
			require.NoError(t, err)
			require.Len(t, list.Records, workers*keys+keys, "applied records")
			for i := range keys {
				r, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: fmt.Sprintf("ok1_shared_%d", i)})
				require.NoError(t, err)
				require.Equal(t, oncekeystore.StatusApplied, r.Status)
				require.EqualValues(t, 1, r.Epoch)
			}
		})
	}
}

// TestPoolerErrorNamesTheSetting: a startup parameter PgBouncer refuses is a *PoolerError
// naming it, from the store's calls and from NewPool, never a *StoreUnavailableError.
func TestPoolerErrorNamesTheSetting(t *testing.T) {
	t.Parallel()
	url := testenv.PgBouncer(t, testenv.DatabaseURL())
	ctx := ctxT(t)

	// A pool configured by ConfigurePool but built without DetectPooler asks for
	// statement_timeout at startup.
	cfg := mustParse(t, url)
	pgstore.ConfigurePool(cfg, nil)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	err = pgstore.New(pool, nil).Check(ctx)
	var pe *pgstore.PoolerError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "statement_timeout", pe.Setting)
	var su *oncekeystore.StoreUnavailableError
	require.False(t, errors.As(err, &su), "not an outage: %v", err)
	require.Contains(t, err.Error(), "pgstore.NewPool")

	// search_path in the URL: nothing the store can leave out for the user.
	_, err = pgstore.NewPool(ctx, url+"&search_path=elsewhere", nil)
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "search_path", pe.Setting)
	require.False(t, errors.As(err, &su), "not an outage: %v", err)
	require.Contains(t, err.Error(), "pgstore.Options.Schema")
}

// TestTransactionalAndOutboxThroughPgBouncer runs Transactional calls through PgBouncer, four
// at a time, on a pool in pgx's default mode: each body writes a ledger row and reads it back
// through pgstore.Tx with arguments (sent unprepared behind the pooler), enqueues a message
// and commits with the record's completion; every fourth rolls back instead. The relay (FOR
// UPDATE SKIP LOCKED in one transaction) then delivers each committed message once and none of
// the rolled-back ones.
func TestTransactionalAndOutboxThroughPgBouncer(t *testing.T) {
	t.Parallel()
	url := testenv.PgBouncer(t, testenv.DatabaseURL())
	pool, s := throughBouncer(t, url, defaultPool, pgstore.Options{})
	ledger := pgx.Identifier{s.Schema(), "ledger"}.Sanitize()
	_, err := pool.Exec(ctxT(t), `CREATE TABLE `+ledger+` (key text PRIMARY KEY, amount int NOT NULL)`)
	require.NoError(t, err)

	const calls = 40
	call := func(ctx context.Context, i int) error {
		key := fmt.Sprintf("ok1_tx_%d", i)
		c, err := s.Claim(ctx, &oncekeystore.ClaimParams{Tenant: "t", OperationKey: key, Tool: "credit", Fingerprint: "fp",
			Effect: oncekeystore.Transactional, Lease: time.Minute, Retention: time.Hour, Tombstone: time.Hour})
		if err != nil || !c.Acquired {
			return fmt.Errorf("claim %s: acquired %v, %v", key, c != nil && c.Acquired, err)
		}
		stx, err := s.BeginTx(ctx, &oncekeystore.BeginTxParams{Tenant: "t", OperationKey: key, Epoch: c.Record.Epoch, Tool: "credit", Lease: time.Minute})
		if err != nil {
			return err
		}
		bctx := stx.Context(ctx)
		tx, err := pgstore.Tx(bctx)
		if err != nil {
			return err
		}
		var n int
		if _, err = tx.Exec(bctx, `INSERT INTO `+ledger+` (key, amount) VALUES ($1, $2)`, key, i); err == nil {
			err = tx.QueryRow(bctx, `SELECT amount FROM `+ledger+` WHERE key = $1`, key).Scan(&n)
		}
		if err == nil && n != i {
			err = fmt.Errorf("read back %d, wrote %d", n, i)
		}
		if err == nil {
			err = pgstore.Enqueue(bctx, "confirmation", []byte(key))
		}
		if err != nil || i%4 == 3 {
			return errors.Join(err, stx.Rollback(ctx))
		}
		_, err = stx.Commit(ctx, &oncekeystore.CompleteParams{Tenant: "t", OperationKey: key, Epoch: c.Record.Epoch, Status: oncekeystore.StatusApplied})
		return err
	}
	ctx := ctxT(t)
	errs := make(chan error, calls)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < calls; i += 4 {
				errs <- call(ctx, i)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+ledger).Scan(&rows))
	require.Equal(t, calls*3/4, rows, "the committed calls' rows, none of the rolled back")

	r := newReceiver()
	for {
		res, err := s.RelayOnce(ctx, r.deliver, &pgstore.RelayOptions{Batch: 7})
		require.NoError(t, err)
		if res.Found == 0 {
			break
		}
	}
	require.Len(t, r.effects, calls*3/4)
	for i := range calls {
		want := 1
		if i%4 == 3 {
			want = 0
		}
		require.Equal(t, want, r.effects[fmt.Sprintf("ok1_tx_%d/confirmation", i)], "call %d", i)
	}
}

// TestMigrateThroughPgBouncer migrates one schema from four pools at once through PgBouncer:
// the transaction-level advisory lock holds through transaction pooling, so one applies every
// migration and the others find nothing to do.
func TestMigrateThroughPgBouncer(t *testing.T) {
	t.Parallel()
	url := testenv.PgBouncer(t, testenv.DatabaseURL())
	_, schema := testenv.SchemaIn(t, testenv.DatabaseURL())
	ctx := ctxT(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			pool, err := pgxpool.New(ctx, url)
			if err == nil {
				err = pgstore.MigrateSchema(ctx, pool, schema)
				pool.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	pool, s := throughBouncer(t, url, defaultPool, pgstore.Options{})
	require.NoError(t, pgstore.New(pool, &pgstore.Options{Schema: schema}).Check(ctx))
	require.NoError(t, s.Check(ctx))
}
