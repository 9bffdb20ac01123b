package pgstore_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storetest"
	"github.com/oncekey/oncekey/pgstore"
)

// The store runs its statements as prepared statements through pgconn when the pool uses
// pgx's default mode, and through pgx.Conn.Query otherwise. The conformance suite covers the
// default; these cover the other modes.

// TestConformance covers pgx's default mode (the prepared fast path); this runs the suite in
// every other mode, where the store goes through pgx.Conn.Query.
func TestConformanceOtherExecModes(t *testing.T) {
	for _, mode := range allExecModes {
		if mode == pgx.QueryExecModeCacheStatement {
			continue
		}
		t.Run(mode.String(), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) oncekeystore.Store {
				pool := newPool(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.DefaultQueryExecMode = mode })
				return pgstore.New(pool, nil)
			})
		})
	}
}

// A column's type changed under the prepared statements (a migration ran while the store was
// in use): Postgres refuses the old plan with "cached plan must not change result type"; the
// store prepares the statement again and the call succeeds.
func TestPreparedStatementsSurviveAColumnTypeChange(t *testing.T) {
	t.Parallel()
	pool := newPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns, cfg.MinConns = 1, 1 })
	s := pgstore.New(pool, nil)
	ctx := ctxT(t)
	first, err := s.Claim(ctx, claimParams("ok1_before", oncekeystore.Effectful))
	require.NoError(t, err)
	require.True(t, first.Acquired)

	_, err = pool.Exec(ctx, `ALTER TABLE oncekey_operations ALTER COLUMN note TYPE varchar(4000)`)
	require.NoError(t, err)

	res, err := s.Claim(ctx, claimParams("ok1_after", oncekeystore.Effectful))
	require.NoError(t, err)
	require.True(t, res.Acquired)
	again, err := s.Claim(ctx, claimParams("ok1_before", oncekeystore.Effectful))
	require.NoError(t, err)
	require.False(t, again.Acquired)
	require.Equal(t, first.Record.Epoch, again.Record.Epoch)
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_after", Epoch: res.Record.Epoch,
		Status: oncekeystore.StatusApplied, Result: []byte("r")})
	require.NoError(t, err)
}
