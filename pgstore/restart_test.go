package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// TestSurvivesPostgresRestart stops and restarts a Postgres server under a live Store: while it
// is down every call fails closed with *oncekeystore.StoreUnavailableError; once it is back the same
// Store works again and the record written before is intact. The server is a private instance
// the test starts (testenv.PrivatePostgres), so no shared server is disturbed.
func TestSurvivesPostgresRestart(t *testing.T) {
	pg := testenv.PrivatePostgres(t)
	pool, err := pgxpool.New(context.Background(), pg.URL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pgstore.Migrate(ctxT(t), pool))
	s := pgstore.New(pool, nil)
	ctx := ctxT(t)
	first, err := s.Claim(ctx, claimParams("ok1_restart", oncekeystore.Effectful))
	require.NoError(t, err)
	require.True(t, first.Acquired)

	pg.Stop()
	for range 3 {
		_, err = s.Claim(ctx, claimParams("ok1_down", oncekeystore.Effectful))
		var su *oncekeystore.StoreUnavailableError
		require.ErrorAs(t, err, &su, "claim while the server is down: %v", err)
		_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_restart", Epoch: 1, Status: oncekeystore.StatusApplied})
		require.ErrorAs(t, err, &su, "complete while the server is down: %v", err)
	}
	require.NoError(t, pg.Start(ctx))

	// Every failure on the way back up is StoreUnavailable; then the same Store works.
	require.Eventually(t, func() bool {
		res, err := s.Claim(context.Background(), claimParams("ok1_restart", oncekeystore.Effectful))
		if err != nil {
			var su *oncekeystore.StoreUnavailableError
			require.ErrorAs(t, err, &su)
			return false
		}
		require.False(t, res.Acquired)
		require.Equal(t, first.Record.Epoch, res.Record.Epoch, "the record survived the restart")
		return true
	}, 60*time.Second, 100*time.Millisecond)
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_restart", Epoch: 1, Status: oncekeystore.StatusApplied, Result: []byte("after restart")})
	require.NoError(t, err)

	// A restart while the pool holds idle connections: the next calls recover by themselves.
	pg.Stop()
	require.NoError(t, pg.Start(ctx))
	require.Eventually(t, func() bool {
		r, err := s.Get(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_restart"})
		if err != nil {
			var su *oncekeystore.StoreUnavailableError
			require.ErrorAs(t, err, &su)
			return false
		}
		return string(r.Result) == "after restart"
	}, 60*time.Second, 100*time.Millisecond)
}
