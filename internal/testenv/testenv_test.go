package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

func TestPostgresSchemaIsolated(t *testing.T) {
	pool := Postgres(t)
	ctx := context.Background()
	var schema string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema))
	require.Regexp(t, `^t_[0-9a-f]{12}$`, schema)
	_, err := pool.Exec(ctx, "CREATE TABLE probe (id int)")
	require.NoError(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'probe'", schema).Scan(&n))
	require.Equal(t, 1, n)
}

func TestTemporalDevServer(t *testing.T) {
	c := Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.CheckHealth(ctx, nil)
	require.NoError(t, err)
}
