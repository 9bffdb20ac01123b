package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testenv"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// setup returns a migrated pool on a fresh schema (search_path) and a Store on it.
func setup(t *testing.T) (*pgxpool.Pool, *pgstore.Store) {
	t.Helper()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	return pool, pgstore.New(pool, nil)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oncekey.Store {
		_, s := setup(t)
		return s
	})
}
