package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// The Transactional class's store side: a body's writes (rows in ledger, the effects counted by
// every test) commit with the record's completion or not at all. These tests do not run in
// parallel: some set the package's commit hooks.

func setupTx(t *testing.T) (*pgxpool.Pool, *pgstore.Store) {
	t.Helper()
	pool, s := setup(t)
	_, err := pool.Exec(ctxT(t), `CREATE TABLE ledger (op_key text NOT NULL, amount bigint NOT NULL)`)
	require.NoError(t, err)
	return pool, s
}

func txClaim(t *testing.T, s *pgstore.Store, key string, lease time.Duration) *oncekeystore.ClaimResult {
	t.Helper()
	res, err := s.Claim(ctxT(t), &oncekeystore.ClaimParams{Tenant: "t", OperationKey: key, Tool: "credit", Fingerprint: "fp",
		Effect: oncekeystore.Transactional, Lease: lease, Retention: time.Hour, Tombstone: time.Hour})
	require.NoError(t, err)
	return res
}

func ledgerRows(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(ctxT(t), `SELECT count(*) FROM ledger`).Scan(&n))
	return n
}

// begin begins key's transaction at epoch and returns it with the body's pgx.Tx.
func begin(t *testing.T, s *pgstore.Store, key string, epoch int64) (oncekeystore.StoreTx, pgx.Tx, context.Context) {
	t.Helper()
	stx, err := s.BeginTx(ctxT(t), &oncekeystore.BeginTxParams{Tenant: "t", OperationKey: key, Epoch: epoch, Lease: time.Minute, Tool: "credit"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = stx.Rollback(context.Background()) })
	ctx := stx.Context(ctxT(t))
	tx, err := pgstore.Tx(ctx)
	require.NoError(t, err)
	return stx, tx, ctx
}

// claimedWrite claims "k", begins its transaction and writes one ledger row in it.
func claimedWrite(t *testing.T, s *pgstore.Store) (*oncekeystore.ClaimResult, oncekeystore.StoreTx, pgx.Tx, context.Context) {
	t.Helper()
	c := txClaim(t, s, "k", time.Minute)
	stx, tx, ctx := begin(t, s, "k", c.Record.Epoch)
	_, err := tx.Exec(ctx, `INSERT INTO ledger VALUES ('k', 5)`)
	require.NoError(t, err)
	return c, stx, tx, ctx
}

func applied(epoch int64) *oncekeystore.CompleteParams {
	return &oncekeystore.CompleteParams{Tenant: "t", OperationKey: "k", Epoch: epoch, Status: oncekeystore.StatusApplied, Result: []byte("r")}
}

func TestTxCommitsWritesWithCompletion(t *testing.T) {
	pool, s := setupTx(t)
	c := txClaim(t, s, "k", time.Minute)
	require.True(t, c.Acquired)
	stx, tx, _ := begin(t, s, "k", c.Record.Epoch)
	_, err := tx.Exec(ctxT(t), `INSERT INTO ledger VALUES ('k', 5)`)
	require.NoError(t, err)
	require.Equal(t, 0, ledgerRows(t, pool), "the body's write is visible before the commit")
	rec, err := stx.Commit(ctxT(t), applied(c.Record.Epoch))
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, 1, ledgerRows(t, pool))

	again := txClaim(t, s, "k", time.Minute)
	require.False(t, again.Acquired)
	require.Equal(t, oncekeystore.StatusApplied, again.Record.Status, "a repeat replays")
	require.Equal(t, []byte("r"), again.Record.Result)

	_, err = pgstore.Tx(context.Background())
	require.ErrorIs(t, err, pgstore.ErrNoTx)
}

// A body that outlives its lease: another attempt takes the record over (a pending Transactional
// record whose lease ran out is free: its transaction left nothing), and the first attempt's
// completion at the stale epoch rolls back its writes.
func TestTxStaleEpochRollsBack(t *testing.T) {
	pool, s := setupTx(t)
	c := txClaim(t, s, "k", 100*time.Millisecond)
	stx, tx, _ := begin(t, s, "k", c.Record.Epoch)
	_, err := tx.Exec(ctxT(t), `INSERT INTO ledger VALUES ('k', 5)`)
	require.NoError(t, err)

	var taken *oncekeystore.ClaimResult
	require.Eventually(t, func() bool {
		taken = txClaim(t, s, "k", time.Minute)
		return taken.Acquired
	}, 30*time.Second, 50*time.Millisecond, "the lease never ran out")
	require.True(t, taken.TookOver)
	require.Equal(t, c.Record.Epoch+1, taken.Record.Epoch)

	_, err = stx.Commit(ctxT(t), applied(c.Record.Epoch))
	require.ErrorIs(t, err, oncekeystore.ErrLostClaim)
	require.Equal(t, 0, ledgerRows(t, pool), "the stale attempt's write committed")
	rec, err := s.Get(ctxT(t), &oncekeystore.GetParams{Tenant: "t", OperationKey: "k"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusPending, rec.Status)
	require.Equal(t, taken.Record.Epoch, rec.Epoch)
}

func TestTxMisuse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		misuse func(ctx context.Context, tx pgx.Tx) error
	}{
		{"commit", func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }},
		{"rollback", func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) }},
		{"two goroutines", func(ctx context.Context, tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT generate_series(1, 3)`)
			if err != nil {
				return err
			}
			defer rows.Close()
			var wg sync.WaitGroup
			var other error
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, other = tx.Exec(ctx, `INSERT INTO ledger VALUES ('k', 7)`)
			}()
			wg.Wait()
			return other
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, s := setupTx(t)
			c, stx, tx, ctx := claimedWrite(t, s)
			err := tc.misuse(ctx, tx)
			var misuse *oncekeystore.TxMisuseError
			require.ErrorAs(t, err, &misuse)
			// Further use is refused too, and oncekey's commit rolls everything back.
			_, err = tx.Exec(ctx, `INSERT INTO ledger VALUES ('k', 6)`)
			require.ErrorAs(t, err, &misuse)
			_, err = stx.Commit(ctxT(t), applied(c.Record.Epoch))
			require.ErrorAs(t, err, &misuse)
			require.Equal(t, 0, ledgerRows(t, pool), "a misused transaction left writes")
			rec, err := s.Get(ctxT(t), &oncekeystore.GetParams{Tenant: "t", OperationKey: "k"})
			require.NoError(t, err)
			require.Equal(t, oncekeystore.StatusPending, rec.Status, "the completion was written")
		})
	}
}

// A body that keeps the transaction and uses it after it returned gets a TxMisuseError saying
// the late call was not run and what the body wrote before it returned went with the call (here
// committed), and writes nothing.
func TestTxUseAfterReturn(t *testing.T) {
	pool, s := setupTx(t)
	c, stx, tx, ctx := claimedWrite(t, s)
	var err error
	_, err = stx.Commit(ctxT(t), applied(c.Record.Epoch))
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO ledger VALUES ('k', 6)`)
	var misuse *oncekeystore.TxMisuseError
	require.ErrorAs(t, err, &misuse)
	require.True(t, misuse.AfterReturn)
	require.Contains(t, err.Error(), "it was not run; what the body wrote before it returned was committed or rolled back with the call")
	require.NotContains(t, err.Error(), "nothing the body wrote is kept")
	require.ErrorAs(t, tx.QueryRow(ctx, `SELECT 1`).Scan(new(int)), &misuse)
	require.ErrorAs(t, tx.Commit(ctx), &misuse)
	require.True(t, misuse.AfterReturn)
	require.Equal(t, 1, ledgerRows(t, pool))
	rec, err := s.Get(ctxT(t), &oncekeystore.GetParams{Tenant: "t", OperationKey: "k"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
}

// A body that sends a statement ending the transaction, in any spelling and through any method,
// is refused before it reaches the server: nothing it wrote commits, before or after, whether it
// then fails (rollback) or returns (Commit, refused). Before the check, the statement committed
// the first row at once, and the rollback undid nothing.
func TestTxEndingStatementRefused(t *testing.T) {
	sends := map[string]func(ctx context.Context, tx pgx.Tx, sql string) error{
		"Exec": func(ctx context.Context, tx pgx.Tx, sql string) error { _, err := tx.Exec(ctx, sql); return err },
		"Query": func(ctx context.Context, tx pgx.Tx, sql string) error {
			rows, err := tx.Query(ctx, sql)
			if err == nil {
				rows.Close()
				err = rows.Err()
			}
			return err
		},
		"QueryRow": func(ctx context.Context, tx pgx.Tx, sql string) error {
			err := tx.QueryRow(ctx, sql).Scan()
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		},
		"SendBatch": func(ctx context.Context, tx pgx.Tx, sql string) error {
			b := &pgx.Batch{}
			b.Queue(`SELECT 1`)
			b.Queue(sql)
			return tx.SendBatch(ctx, b).Close()
		},
		"Prepare": func(ctx context.Context, tx pgx.Tx, sql string) error {
			if _, err := tx.Prepare(ctx, "ending", sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "ending")
			return err
		},
	}
	for _, sql := range []string{"COMMIT", "END", "commit; begin", "COMMIT AND CHAIN", "ROLLBACK", "abort", "/* done */ End Transaction"} {
		for name, send := range sends {
			for _, then := range []string{"fails", "returns"} {
				t.Run(sql+"/"+name+"/"+then, func(t *testing.T) {
					pool, s := setupTx(t)
					c, stx, tx, ctx := claimedWrite(t, s)
					err := send(ctx, tx, sql)
					var misuse *oncekeystore.TxMisuseError
					require.ErrorAs(t, err, &misuse)
					require.False(t, misuse.Ended)
					require.Contains(t, err.Error(), "ends the transaction")
					// Whatever the body does next stays in the transaction, and is refused.
					_, err = tx.Exec(ctx, `INSERT INTO ledger VALUES ('k', 6)`)
					require.ErrorAs(t, err, &misuse)
					if then == "fails" {
						require.NoError(t, stx.Rollback(ctxT(t)))
					} else {
						_, err = stx.Commit(ctxT(t), applied(c.Record.Epoch))
						require.ErrorAs(t, err, &misuse)
					}
					require.Equal(t, 0, ledgerRows(t, pool), "a row committed without the record")
					rec, err := s.Get(ctxT(t), &oncekeystore.GetParams{Tenant: "t", OperationKey: "k"})
					require.NoError(t, err)
					require.Equal(t, oncekeystore.StatusPending, rec.Status, "the completion was written")
				})
			}
		}
	}
}

// A statement sent through Conn bypasses the checks and commits at once: that cannot be undone,
// but it is found when the body returns, whether it fails (Rollback) or returns (Commit), as a
// TxMisuseError with Ended set, and the completion is not written outside the transaction.
func TestTxEndedThroughConn(t *testing.T) {
	for _, then := range []string{"fails", "returns"} {
		t.Run(then, func(t *testing.T) {
			pool, s := setupTx(t)
			c, stx, tx, ctx := claimedWrite(t, s)
			_, err := tx.Conn().Exec(ctx, "COMMIT")
			require.NoError(t, err)
			var misuse *oncekeystore.TxMisuseError
			if then == "fails" {
				require.ErrorAs(t, stx.Rollback(ctxT(t)), &misuse)
			} else {
				_, err = stx.Commit(ctxT(t), applied(c.Record.Epoch))
				require.ErrorAs(t, err, &misuse)
			}
			require.True(t, misuse.Ended)
			require.Contains(t, misuse.Error(), "may have committed without the record")
			require.NoError(t, stx.Rollback(ctxT(t)), "a second Rollback reports nothing")
			require.Equal(t, 1, ledgerRows(t, pool), "the row the body committed itself")
			rec, err := s.Get(ctxT(t), &oncekeystore.GetParams{Tenant: "t", OperationKey: "k"})
			require.NoError(t, err)
			require.Equal(t, oncekeystore.StatusPending, rec.Status, "the completion was written outside the transaction")
		})
	}
}

// The backend ends between the completion and COMMIT (pg_terminate_backend, as a Postgres
// restart or a dropped connection does): the commit fails, nothing was written, and the record
// is still pending at the epoch, so a release fenced at it lands: what the interceptor reads back.
func TestTxBackendEndsBeforeCommit(t *testing.T) {
	pool, s := setupTx(t)
	c, stx, _, _ := claimedWrite(t, s)
	var err error
	defer pgstore.SetCommitHooks(func(ctx context.Context, conn *pgx.Conn) {
		_, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, conn.PgConn().PID())
		require.NoError(t, err)
	}, nil)()
	_, err = stx.Commit(ctxT(t), applied(c.Record.Epoch))
	require.Error(t, err)
	require.NotErrorIs(t, err, oncekeystore.ErrLostClaim)
	require.Equal(t, 0, ledgerRows(t, pool))
	_, err = s.Release(ctxT(t), &oncekeystore.ReleaseParams{Tenant: "t", OperationKey: "k", Epoch: c.Record.Epoch})
	require.NoError(t, err, "the record is not pending at the epoch: the transaction committed")
}

// A body whose own statement failed leaves the transaction aborted: the completion fails, and
// nothing commits.
func TestTxAbortedByBodyError(t *testing.T) {
	pool, s := setupTx(t)
	c, stx, tx, ctx := claimedWrite(t, s)
	var err error
	_, err = tx.Exec(ctx, `INSERT INTO ledger VALUES (NULL, 5)`)
	require.Error(t, err)
	_, err = stx.Commit(ctxT(t), applied(c.Record.Epoch))
	require.Error(t, err)
	require.False(t, errors.Is(err, oncekeystore.ErrLostClaim))
	require.Equal(t, 0, ledgerRows(t, pool))
}

// A Transactional claim commits without waiting for its WAL flush (transactionalClaimStmt); the
// setting is the claim's transaction's alone, not left on the pooled connection.
func TestTxClaimAsyncCommitStaysLocal(t *testing.T) {
	pool := newPool(t, oneConn(pgx.QueryExecModeCacheStatement))
	s := pgstore.New(pool, nil)
	c := txClaim(t, s, "k", time.Minute)
	require.True(t, c.Acquired)
	require.Equal(t, "", c.Record.Namespace)
	var setting string
	require.NoError(t, pool.QueryRow(ctxT(t), `SHOW synchronous_commit`).Scan(&setting))
	require.Equal(t, "on", setting)
}

// Statements whose COMMIT Postgres runs though a plain reading of their literals puts it inside
// one: an escape string continued on a new line stays an escape string, and with
// standard_conforming_strings off (which the body may set first) a plain literal reads backslash
// escapes. On a connection of its own, each commits the row before it (the control); through
// pgstore.Tx each is refused, and nothing commits. Before the check read literals that way, the
// statement ran and the first row committed without the record.
func TestTxHiddenEndingStatementRefused(t *testing.T) {
	for _, tc := range []struct{ name, set, sql string }{
		{"continued escape string", "", "INSERT INTO ledger VALUES ('k', 5); SELECT E'a'\n'b\\''; COMMIT; --'"},
		{"standard_conforming_strings off", "SET standard_conforming_strings = off", "INSERT INTO ledger VALUES ('k', 5); SELECT 'a\\''; COMMIT; --'"},
		{"set_config", "SELECT set_config('standard_conforming_strings', 'off', true)", "INSERT INTO ledger VALUES ('k', 5); SELECT 'a\\''; END; --'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, s := setupTx(t)
			conn, err := pgx.ConnectConfig(ctxT(t), pool.Config().ConnConfig.Copy())
			require.NoError(t, err)
			defer conn.Close(context.Background())
			ctl, err := conn.Begin(ctxT(t))
			require.NoError(t, err)
			if tc.set != "" {
				_, err = ctl.Exec(ctxT(t), tc.set)
				require.NoError(t, err)
			}
			_, err = ctl.Exec(ctxT(t), tc.sql)
			require.NoError(t, err)
			require.NoError(t, ctl.Rollback(ctxT(t)))
			require.Equal(t, 1, ledgerRows(t, pool), "the control: Postgres ran the COMMIT")
			_, err = pool.Exec(ctxT(t), `DELETE FROM ledger`)
			require.NoError(t, err)

			c, stx, tx, ctx := claimedWrite(t, s)
			if tc.set != "" {
				_, err = tx.Exec(ctx, tc.set)
				require.NoError(t, err)
			}
			_, err = tx.Exec(ctx, tc.sql)
			var misuse *oncekeystore.TxMisuseError
			require.ErrorAs(t, err, &misuse)
			require.Contains(t, err.Error(), "ends the transaction")
			_, err = stx.Commit(ctxT(t), applied(c.Record.Epoch))
			require.ErrorAs(t, err, &misuse)
			require.Equal(t, 0, ledgerRows(t, pool), "a row committed without the record")
			rec, err := s.Get(ctxT(t), &oncekeystore.GetParams{Tenant: "t", OperationKey: "k"})
			require.NoError(t, err)
			require.Equal(t, oncekeystore.StatusPending, rec.Status, "the completion was written")
		})
	}
}
