package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// TestThroughPgBouncer runs the CLI through a private PgBouncer in transaction mode in front of
// the test database: migrate, list, stats and purge work with --schema; a search_path in the
// URL, which PgBouncer refuses at startup, is a configuration error naming the parameter.
func TestThroughPgBouncer(t *testing.T) {
	needsServices(t)
	url := testenv.PgBouncer(t, testenv.DatabaseURL())
	_, schema := testenv.SchemaIn(t, testenv.DatabaseURL())
	r := cli(t, nil, "migrate", "--database-url", url, "--schema", schema)
	require.Equal(t, 0, r.code, r.stderr)
	r = cli(t, nil, "migrate", "--check", "--database-url", url, "--schema", schema)
	require.Equal(t, 0, r.code, r.stderr)

	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := pgstore.New(pool, &pgstore.Options{Schema: schema})
	unknown := seed(t, s, "acme", "IssueRefund", "wf-1", "issue_refund", oncekeystore.StatusUnknown, nil)
	applied := seed(t, s, "acme", "CreateTicket", "wf-1", "create_ticket", oncekeystore.StatusApplied, nil)

	env := map[string]string{"DATABASE_URL": url}
	r = cli(t, env, "list", "--schema", schema, "--status", "unknown")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, unknown)
	require.NotContains(t, r.stdout, applied)
	r = cli(t, env, "stats", "--schema", schema)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "IssueRefund")
	r = cli(t, env, "purge", "--schema", schema)
	require.Equal(t, 0, r.code, r.stderr)

	r = cli(t, nil, "list", "--database-url", url+"&search_path="+schema)
	require.Equal(t, exitConfig, r.code, r.stderr)
	require.Contains(t, r.stderr, "refuses the startup parameter search_path")
	require.Contains(t, r.stderr, "pgstore.Options.Schema (oncekey --schema)")
}
