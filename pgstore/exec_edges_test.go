package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// The store runs its keyed statements as its own prepared statements in pgx's default mode and
// through pgx.Conn.Query in every other; these tests hold both paths to the same answers at
// the edges: values, connections lost or reset under them, schemas sharing a pool, and many
// goroutines at once.

// bothPaths are one mode of each of the store's two paths: prepared statements run with pgconn,
// and pgx.Conn.Query.
var bothPaths = []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec}

var allExecModes = []pgx.QueryExecMode{
	pgx.QueryExecModeCacheStatement,
	pgx.QueryExecModeCacheDescribe,
	pgx.QueryExecModeDescribeExec,
	pgx.QueryExecModeExec,
	pgx.QueryExecModeSimpleProtocol,
}

// Results and failures of every size the store accepts (up to the limit in the binary-format
// modes), nil and empty kept apart, text with quotes, backslashes, escapes and non-ASCII
// letters, and epochs and windows at the ends of their ranges come back exactly, from every
// statement that returns them, in every exec mode.
func TestValuesAtTheEdgesInEveryExecMode(t *testing.T) {
	t.Parallel()
	full := make([]byte, pgstore.DefaultMaxResultBytes)
	for i := range full {
		full[i] = byte(i*31 + i>>8)
	}
	results := []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"one NUL", []byte{0}},
		{"bytea escapes", []byte(`\x41\\' "`)},
		{"limit-1", full[:len(full)-1]},
		{"limit", full},
	}
	texts := []string{
		"",
		`O'Brien "q" \back\\slash \x41 E'\n' $1 %s`,
		"Grüße, 漢字, emoji 🙂, RTL שלום, combining é",
		strings.Repeat(`\'"`, 5000),
	}
	for _, mode := range allExecModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			pool := newPool(t, func(cfg *pgxpool.Config) {
				cfg.MaxConns = 2
				cfg.ConnConfig.DefaultQueryExecMode = mode
			})
			s := pgstore.New(pool, nil)
			ctx := ctxWalk(t)
			n := 0
			key := func() string { n++; return fmt.Sprintf("ok1_edge_%d", n) }

			for _, r := range results {
				if len(r.b) > 1<<20 && mode != pgx.QueryExecModeCacheStatement && mode != pgx.QueryExecModeDescribeExec {
					continue // text-format results: 32 MiB of hex per value is slow under -race; the conformance suite has 1 MiB
				}
				for _, asFailure := range []bool{false, true} {
					what := fmt.Sprintf("%s as failure=%v", r.name, asFailure)
					k := key()
					res, err := s.Claim(ctx, claimParams(k, oncekeystore.Effectful))
					require.NoError(t, err)
					cp := &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: k, Epoch: res.Record.Epoch, Status: oncekeystore.StatusApplied, Result: r.b}
					if asFailure {
						cp.Status, cp.Result, cp.Failure = oncekeystore.StatusFailed, nil, r.b
					}
					done, err := s.Complete(ctx, cp)
					require.NoError(t, err, what)
					got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: k})
					require.NoError(t, err, what)
					replay, err := s.Claim(ctx, claimParams(k, oncekeystore.Effectful))
					require.NoError(t, err, what)
					for _, rec := range []*oncekeystore.Record{done, got, replay.Record} {
						if asFailure {
							requireSameBytes(t, r.b, rec.Failure, what+": failure")
							require.Nil(t, rec.Result, what)
						} else {
							requireSameBytes(t, r.b, rec.Result, what+": result")
							require.Nil(t, rec.Failure, what)
						}
					}

					// Mark unknown with the bytes as the failure, then resolve with them.
					k = key()
					res, err = s.Claim(ctx, claimParams(k, oncekeystore.Effectful))
					require.NoError(t, err)
					m, err := s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: "acme", OperationKey: k, Epoch: res.Record.Epoch, Failure: r.b})
					require.NoError(t, err, what)
					requireSameBytes(t, r.b, m.Failure, what+": mark unknown")
					rp := &oncekeystore.ResolveParams{Tenant: "acme", OperationKey: k, Epoch: m.Epoch, Status: oncekeystore.StatusApplied, Result: r.b, ResolvedBy: "op"}
					if asFailure {
						rp.Status, rp.Result, rp.Failure = oncekeystore.StatusFailed, nil, r.b
					}
					rv, err := s.Resolve(ctx, rp)
					require.NoError(t, err, what)
					got, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: k})
					require.NoError(t, err, what)
					for _, rec := range []*oncekeystore.Record{rv, got} {
						if asFailure {
							requireSameBytes(t, r.b, rec.Failure, what+": resolved failure")
						} else {
							requireSameBytes(t, r.b, rec.Result, what+": resolved result")
						}
					}
				}
			}
			over := append(full, 0)
			k := key()
			res, err := s.Claim(ctx, claimParams(k, oncekeystore.Effectful))
			require.NoError(t, err)
			_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: k, Epoch: res.Record.Epoch, Status: oncekeystore.StatusApplied, Result: over})
			var tooLarge *oncekeystore.ResultTooLargeError
			require.ErrorAs(t, err, &tooLarge)

			for i, txt := range texts {
				p := claimParams(key(), oncekeystore.Effectful)
				p.Tenant = "tenant " + txt
				p.OperationKey += txt
				p.Tool, p.Version, p.WorkflowID, p.StepID, p.Fingerprint = "tool"+txt, txt, txt, "step"+txt, "fp"+txt
				res, err := s.Claim(ctx, p)
				require.NoError(t, err, "text %d", i)
				require.True(t, res.Acquired)
				for _, rec := range []*oncekeystore.Record{res.Record} {
					require.Equal(t, p.Tenant, rec.Tenant)
					require.Equal(t, p.OperationKey, rec.OperationKey)
					require.Equal(t, p.Tool, rec.Tool)
					require.Equal(t, p.Version, rec.Version)
					require.Equal(t, p.WorkflowID, rec.WorkflowID)
					require.Equal(t, p.StepID, rec.StepID)
					require.Equal(t, p.Fingerprint, rec.Fingerprint)
				}
				_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: 1})
				require.NoError(t, err)
				rv, err := s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: 1, Status: oncekeystore.StatusApplied,
					EffectReference: "ref" + txt, ResolvedBy: "by" + txt, Note: txt})
				require.NoError(t, err, "text %d", i)
				got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: p.Tenant, OperationKey: p.OperationKey})
				require.NoError(t, err)
				for _, rec := range []*oncekeystore.Record{rv, got} {
					require.Equal(t, p.Tenant, rec.Tenant)
					require.Equal(t, p.OperationKey, rec.OperationKey)
					require.Equal(t, "ref"+txt, rec.EffectReference)
					require.Equal(t, "by"+txt, rec.ResolvedBy)
					require.Equal(t, txt, rec.Note)
					require.Equal(t, p.Fingerprint, rec.Fingerprint)
				}
			}

			// Epochs at the top of bigint: fenced writes carry them exactly; one more
			// takeover is refused by the database, not wrapped around, and changes nothing.
			k = key()
			p := claimParams(k, oncekeystore.Idempotent)
			_, err = s.Claim(ctx, p)
			require.NoError(t, err)
			_, err = pool.Exec(ctx, `UPDATE oncekey_operations SET epoch = $1 WHERE operation_key = $2`, int64(math.MaxInt64), k)
			require.NoError(t, err)
			_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: k, Epoch: math.MaxInt64 - 1, Lease: time.Minute})
			require.ErrorIs(t, err, oncekeystore.ErrLostClaim)
			rn, err := s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: k, Epoch: math.MaxInt64, Lease: time.Minute})
			require.NoError(t, err)
			require.Equal(t, int64(math.MaxInt64), rn.Epoch)
			_, err = s.Release(ctx, &oncekeystore.ReleaseParams{Tenant: "acme", OperationKey: k, Epoch: math.MaxInt64})
			require.NoError(t, err)
			_, err = s.Claim(ctx, p)
			require.Error(t, err, "a takeover past the largest epoch")
			var su *oncekeystore.StoreUnavailableError
			require.False(t, errors.As(err, &su), "an out-of-range epoch is not an outage: %v", err)
			got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: k})
			require.NoError(t, err)
			require.Equal(t, oncekeystore.StatusReleased, got.Status)
			require.Equal(t, int64(math.MaxInt64), got.Epoch)

			// The longest windows a time.Duration holds.
			p = claimParams(key(), oncekeystore.Effectful)
			p.Lease, p.Retention, p.Tombstone = math.MaxInt64, math.MaxInt64, math.MaxInt64
			res, err = s.Claim(ctx, p)
			require.NoError(t, err)
			require.True(t, res.Acquired)
			// Postgres multiplies an interval by a bigint in float8, exact only up to 2^53 µs
			// (about 285 years): this lease may land a microsecond off.
			want := res.Record.CreatedAt.Add(time.Duration(math.MaxInt64).Truncate(time.Microsecond))
			require.WithinDuration(t, want, res.Record.LeaseUntil, time.Microsecond)
			_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: p.OperationKey, Epoch: 1, Lease: math.MaxInt64})
			require.NoError(t, err)
		})
	}
}

// requireSameBytes compares byte slices, telling nil from empty, without printing megabytes.
func requireSameBytes(t *testing.T, want, got []byte, what string) {
	t.Helper()
	require.Equal(t, want == nil, got == nil, "%s: nil-ness (want nil %v)", what, want == nil)
	require.Equal(t, len(want), len(got), "%s: length", what)
	require.True(t, string(want) == string(got), "%s: bytes differ", what)
}

// Two Stores on one pool with different schemas: their statements have different texts (the
// table is schema-qualified), so their prepared names differ, and each store reads and writes
// only its own table, whichever order they first prepare in on the one connection.
func TestTwoSchemasOnOneConnection(t *testing.T) {
	t.Parallel()
	url, _ := testenv.PostgresURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns, cfg.MinConns = 1, 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ctx := ctxT(t)
	var b [4]byte
	for i := range b {
		b[i] = byte('a' + rand.IntN(26))
	}
	schemas := []string{"oncekey_a_" + string(b[:]), "Oncekey_A_" + string(b[:])} // differ only in case: two schemas
	t.Cleanup(func() {
		for _, sc := range schemas {
			_, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{sc}.Sanitize()+` CASCADE`)
		}
	})
	stores := make([]*pgstore.Store, len(schemas))
	for i, sc := range schemas {
		require.NoError(t, pgstore.MigrateSchema(ctx, pool, sc))
		stores[i] = pgstore.New(pool, &pgstore.Options{Schema: sc})
	}
	for i, s := range stores {
		p := claimParams("ok1_same", oncekeystore.Effectful)
		p.Fingerprint = fmt.Sprintf("fp%d", i)
		res, err := s.Claim(ctx, p)
		require.NoError(t, err)
		require.True(t, res.Acquired, "store %d acquires in its own table", i)
		_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_same", Epoch: 1, Status: oncekeystore.StatusApplied,
			Result: []byte(fmt.Sprintf("result %d", i))})
		require.NoError(t, err)
	}
	for i := len(stores) - 1; i >= 0; i-- {
		got, err := stores[i].Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_same"})
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("fp%d", i), got.Fingerprint)
		require.Equal(t, fmt.Sprintf("result %d", i), string(got.Result))
	}
	for _, sc := range schemas {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{sc, "oncekey_operations"}.Sanitize()).Scan(&n))
		require.Equal(t, 1, n, sc)
	}
	var prepared []string
	rows, err := pool.Query(ctx, `SELECT name FROM pg_prepared_statements WHERE name LIKE 'oncekey\_%' ORDER BY name`)
	require.NoError(t, err)
	prepared, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	// Claim, complete and get for each store: six different names on the one connection.
	require.Len(t, prepared, 6, "%v", prepared)
}

// Session resets behind the store on every use of a connection (a pool that runs DISCARD ALL
// when a connection comes back, as some multi-tenant setups do): every call still works.
func TestDiscardAllOnEveryRelease(t *testing.T) {
	t.Parallel()
	pool := newPool(t, func(cfg *pgxpool.Config) {
		cfg.MaxConns, cfg.MinConns = 1, 1
		cfg.AfterRelease = func(c *pgx.Conn) bool {
			_, err := c.Exec(context.Background(), "DISCARD ALL")
			return err == nil
		}
	})
	s := pgstore.New(pool, nil)
	ctx := ctxT(t)
	for i := range 5 {
		k := fmt.Sprintf("ok1_reset_%d", i)
		res, err := s.Claim(ctx, claimParams(k, oncekeystore.Effectful))
		require.NoError(t, err, "claim %d", i)
		require.True(t, res.Acquired)
		_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: k, Epoch: 1, Lease: time.Minute})
		require.NoError(t, err, "renew %d", i)
		_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: k, Epoch: 1, Status: oncekeystore.StatusApplied, Result: []byte("r")})
		require.NoError(t, err, "complete %d", i)
		got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: k})
		require.NoError(t, err, "get %d", i)
		require.Equal(t, "r", string(got.Result))
	}
}

// The table is dropped and made again (MigrateDown, then Migrate) under statements prepared on
// a live connection: while it is gone calls fail and change nothing; once it is back they work.
func TestTableRecreatedUnderPreparedStatements(t *testing.T) {
	t.Parallel()
	url, schema := testenv.PostgresURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns, cfg.MinConns = 1, 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ctx := ctxT(t)
	require.NoError(t, pgstore.Migrate(ctx, pool))
	s := pgstore.New(pool, nil)
	_, err = s.Claim(ctx, claimParams("ok1_old", oncekeystore.Effectful))
	require.NoError(t, err)
	_, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_old"})
	require.NoError(t, err)

	require.NoError(t, pgstore.MigrateDownSchema(ctx, pool, schema, 0))
	_, err = s.Claim(ctx, claimParams("ok1_gone", oncekeystore.Effectful))
	require.Error(t, err)
	require.NoError(t, pgstore.Migrate(ctx, pool))

	res, err := s.Claim(ctx, claimParams("ok1_old", oncekeystore.Effectful))
	require.NoError(t, err)
	require.True(t, res.Acquired, "the new table is empty")
	got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_old"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusPending, got.Status)
}

// backendPID returns the server process of the pool's one connection.
func backendPID(t *testing.T, pool *pgxpool.Pool) uint32 {
	t.Helper()
	c, err := pool.Acquire(ctxT(t))
	require.NoError(t, err)
	defer c.Release()
	return c.Conn().PgConn().PID()
}

// The pooled connection's backend is terminated between calls: the next call fails closed
// (*oncekeystore.StoreUnavailableError) or succeeds, and the one after it works on a new connection.
func TestBackendTerminatedBetweenCalls(t *testing.T) {
	t.Parallel()
	for _, mode := range bothPaths {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			pool := newPool(t, oneConn(mode))
			s := pgstore.New(pool, nil)
			ctx := ctxT(t)
			res, err := s.Claim(ctx, claimParams("ok1_term", oncekeystore.Effectful))
			require.NoError(t, err)
			for i := range 3 {
				pid := backendPID(t, pool)
				terminate(t, pid)
				_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: "ok1_term", Epoch: res.Record.Epoch, Lease: time.Minute})
				if err != nil {
					var su *oncekeystore.StoreUnavailableError
					require.ErrorAs(t, err, &su, "round %d: %v", i, err)
				}
				_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: "ok1_term", Epoch: res.Record.Epoch, Lease: time.Minute})
				require.NoError(t, err, "round %d: the call after works", i)
				require.NotEqual(t, pid, backendPID(t, pool))
			}
			_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_term", Epoch: res.Record.Epoch, Status: oncekeystore.StatusApplied})
			require.NoError(t, err)
		})
	}
}

// The backend of a call waiting on a row lock is terminated: the call fails closed, the record
// is unchanged, and the pool's next call works.
func TestBackendTerminatedDuringACall(t *testing.T) {
	t.Parallel()
	for _, mode := range bothPaths {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			pool := newPool(t, oneConn(mode))
			s := pgstore.New(pool, nil)
			ctx := ctxT(t)
			res, err := s.Claim(ctx, claimParams("ok1_locked", oncekeystore.Effectful))
			require.NoError(t, err)
			pid := backendPID(t, pool)
			other := testenv.Postgres(t) // the lock holder; it names the table with its schema
			var schema string
			require.NoError(t, pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))
			tx, err := other.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(context.Background()) }()
			_, err = tx.Exec(ctx, `SELECT 1 FROM `+pgx.Identifier{schema, "oncekey_operations"}.Sanitize()+` WHERE operation_key = 'ok1_locked' FOR UPDATE`)
			require.NoError(t, err)

			done := make(chan error, 1)
			go func() {
				_, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_locked", Epoch: res.Record.Epoch,
					Status: oncekeystore.StatusApplied, Result: []byte("late")})
				done <- err
			}()
			require.Eventually(t, func() bool {
				var waiting bool
				_ = other.QueryRow(ctx, `SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1`, int32(pid)).Scan(&waiting)
				return waiting
			}, 10*time.Second, 10*time.Millisecond, "the complete never waited on the row lock")
			terminate(t, pid)
			err = <-done
			var su *oncekeystore.StoreUnavailableError
			require.ErrorAs(t, err, &su, "%v", err)
			require.NoError(t, tx.Rollback(ctx))

			got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_locked"})
			require.NoError(t, err)
			require.Equal(t, oncekeystore.StatusPending, got.Status)
			require.Nil(t, got.Result)
			_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_locked", Epoch: res.Record.Epoch,
				Status: oncekeystore.StatusApplied, Result: []byte("owner")})
			require.NoError(t, err)
		})
	}
}

// The server's statement_timeout stops a call stuck on a row lock: the call fails closed and
// the connection, which the server left usable, is kept, with its prepared statements working.
func TestServerStatementTimeoutKeepsTheConnection(t *testing.T) {
	t.Parallel()
	// Two seconds: long enough that the statements not stuck on the lock (a cold connection's
	// prepares under make test's load) finish within it.
	opts := &pgstore.Options{StatementTimeout: 2 * time.Second}
	// Migrated on a pool of its own first: the server's limit would also stop a migration
	// slowed by a loaded machine, which is not what this test is about.
	url, _ := testenv.PostgresURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns, cfg.MinConns = 1, 0
	pgstore.ConfigurePool(cfg, opts)
	migrated, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	require.NoError(t, pgstore.Migrate(ctxT(t), migrated))
	migrated.Close()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// The client-side limit is left out so that only the server's statement_timeout acts.
	s := pgstore.New(pool, &pgstore.Options{StatementTimeout: -1})
	ctx := ctxT(t)
	res, err := s.Claim(ctx, claimParams("ok1_slow", oncekeystore.Effectful))
	require.NoError(t, err)
	_, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_slow"})
	require.NoError(t, err)
	pid := backendPID(t, pool)

	other := testenv.Postgres(t)
	var schema string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))
	tx, err := other.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, `SELECT 1 FROM `+pgx.Identifier{schema, "oncekey_operations"}.Sanitize()+` WHERE operation_key = 'ok1_slow' FOR UPDATE`)
	require.NoError(t, err)

	for _, call := range []func() error{
		func() error {
			_, err := s.Claim(ctx, claimParams("ok1_slow", oncekeystore.Effectful))
			return err
		},
		func() error {
			_, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_slow", Epoch: res.Record.Epoch, Status: oncekeystore.StatusApplied})
			return err
		},
	} {
		err := call()
		var su *oncekeystore.StoreUnavailableError
		require.ErrorAs(t, err, &su, "%v", err)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "the server stopped it, not the client")
		// The same connection answers the next call.
		got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_slow"})
		require.NoError(t, err)
		require.Equal(t, oncekeystore.StatusPending, got.Status)
		require.Equal(t, pid, backendPID(t, pool))
	}
	require.NoError(t, tx.Rollback(ctx))
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_slow", Epoch: res.Record.Epoch, Status: oncekeystore.StatusApplied})
	require.NoError(t, err)
	require.Equal(t, pid, backendPID(t, pool))
}

// Thirty-two goroutines claim, renew, complete, release, mark unknown, resolve and get on a
// few keys at a time (four per round of ten operations) through an eight-connection pool, in
// each of two modes, with leases of a few milliseconds and often a stale or a future epoch.
// Whatever the interleaving: an epoch is acquired by one claim at most, a fenced write lands
// only at an epoch some claim acquired and at most once, the result stored is the one its
// writer sent, and the only errors are the store's typed answers.
func TestConcurrentMixedCalls(t *testing.T) {
	t.Parallel()
	for _, mode := range bothPaths {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			pool := newPool(t, func(cfg *pgxpool.Config) {
				cfg.MaxConns = 8
				cfg.ConnConfig.DefaultQueryExecMode = mode
			})
			s := pgstore.New(pool, nil)
			ctx := ctxT(t)
			const workers, opsEach, keys, round = 32, 60, 4, 10
			type owner struct{ worker, op int }
			var (
				mu       sync.Mutex
				acquired = map[string]map[int64]owner{} // key -> epoch -> who acquired it
				written  = map[string]string{}          // key/epoch -> result its Complete wrote
				landed   = map[string]int{}             // what landed, counted by kind
			)
			keyOf := func(i, k int) string { return fmt.Sprintf("ok1_mix_%02d_%d", i/round, k) }
			errs := make(chan error, workers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					<-start
					fail := func(format string, args ...any) {
						errs <- fmt.Errorf("worker %d: "+format, append([]any{w}, args...)...)
					}
					typed := func(err error) bool {
						var conflict *oncekeystore.StatusConflictError
						var stale *oncekeystore.StaleDecisionError
						return err == nil || errors.Is(err, oncekeystore.ErrLostClaim) || errors.Is(err, oncekeystore.ErrNotFound) || errors.As(err, &conflict) || errors.As(err, &stale)
					}
					for i := range opsEach {
						key := keyOf(i, rng.IntN(keys))
						eff := oncekeystore.Idempotent
						if rng.IntN(2) == 0 {
							eff = oncekeystore.Effectful
						}
						p := claimParams(key, eff)
						p.Lease = time.Duration(1+rng.IntN(20)) * time.Millisecond
						res, err := s.Claim(ctx, p)
						if err != nil {
							fail("claim: %w", err)
							return
						}
						epoch := res.Record.Epoch
						if res.Acquired {
							mu.Lock()
							if acquired[key] == nil {
								acquired[key] = map[int64]owner{}
							}
							prev, twice := acquired[key][epoch]
							acquired[key][epoch] = owner{w, i}
							mu.Unlock()
							if twice {
								fail("%s epoch %d acquired twice: by %v and by op %d", key, epoch, prev, i)
								return
							}
						} else if rng.IntN(2) == 0 {
							epoch = max(1, epoch+int64(rng.IntN(3))-1) // a stale, current or future owner
						}
						op := rng.IntN(10)
						if res.Record.Status == oncekeystore.StatusUnknown && op < 5 {
							op = 10
						}
						var werr error
						switch {
						case op < 5:
							result := fmt.Sprintf("w%d-op%d-e%d", w, i, epoch)
							var rec *oncekeystore.Record
							rec, werr = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: key, Epoch: epoch,
								Status: oncekeystore.StatusApplied, Result: []byte(result)})
							if werr == nil {
								id := fmt.Sprintf("%s/%d", key, epoch)
								mu.Lock()
								prev, twice := written[id]
								written[id] = result
								landed["complete"]++
								mu.Unlock()
								if twice {
									fail("%s: two completes landed: %q and %q", id, prev, result)
									return
								}
								if string(rec.Result) != result || rec.Epoch != epoch || rec.Status != oncekeystore.StatusApplied {
									fail("%s: complete returned %s %d %q", id, rec.Status, rec.Epoch, rec.Result)
									return
								}
							}
						case op < 6:
							_, werr = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: key, Epoch: epoch, Lease: time.Millisecond})
						case op < 7:
							_, werr = s.Release(ctx, &oncekeystore.ReleaseParams{Tenant: "acme", OperationKey: key, Epoch: epoch})
							if werr == nil {
								mu.Lock()
								landed["release"]++
								mu.Unlock()
							}
						case op < 8:
							_, werr = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: "acme", OperationKey: key, Epoch: epoch, Failure: []byte("lost")})
						case op < 10:
							var rec *oncekeystore.Record
							rec, werr = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
							if werr == nil && rec.Status == oncekeystore.StatusApplied {
								mu.Lock()
								want, ok := written[fmt.Sprintf("%s/%d", key, rec.Epoch)]
								mu.Unlock()
								if ok && want != string(rec.Result) {
									fail("%s epoch %d: stored %q, its writer sent %q", key, rec.Epoch, rec.Result, want)
									return
								}
							}
						default:
							st := oncekeystore.StatusReleased
							if rng.IntN(2) == 0 {
								st = oncekeystore.StatusFailed
							}
							_, werr = s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: "acme", OperationKey: key, Epoch: epoch, Status: st, ResolvedBy: "op"})
							if werr == nil {
								mu.Lock()
								landed["resolve"]++
								mu.Unlock()
							}
						}
						if !typed(werr) {
							fail("%w", werr)
							return
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for id := range written {
				var key string
				var epoch int64
				_, err := fmt.Sscanf(strings.Replace(id, "/", " ", 1), "%s %d", &key, &epoch)
				require.NoError(t, err)
				_, ok := acquired[key][epoch]
				require.True(t, ok, "%s: a complete landed at an epoch no claim acquired", id)
			}
			taken := 0
			for _, m := range acquired {
				taken += len(m)
			}
			t.Logf("%d epochs acquired on %d keys; landed %v", taken, len(acquired), landed)
			require.Positive(t, landed["complete"])
			// Every record's epoch was acquired by a claim, and an applied record holds what its
			// writer sent.
			for key, m := range acquired {
				got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
				require.NoError(t, err)
				_, ok := m[got.Epoch]
				require.True(t, ok, "%s: epoch %d was never acquired", key, got.Epoch)
				if got.Status == oncekeystore.StatusApplied {
					require.Equal(t, written[fmt.Sprintf("%s/%d", key, got.Epoch)], string(got.Result))
				}
			}
		})
	}
}
