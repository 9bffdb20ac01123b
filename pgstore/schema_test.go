package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// poolOn returns a pool on url whose connections run in mode; it is not migrated.
func poolOn(t *testing.T, url string, mode pgx.QueryExecMode) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.DefaultQueryExecMode = mode
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// requireSchemaError asserts that err is a *oncekeystore.StoreSchemaError, never a
// *oncekeystore.StoreUnavailableError, that it still wraps the server's error with code, and that its
// message contains every one of want.
func requireSchemaError(t *testing.T, err error, code string, want ...string) *oncekeystore.StoreSchemaError {
	t.Helper()
	require.Error(t, err)
	var su *oncekeystore.StoreUnavailableError
	require.False(t, errors.As(err, &su), "a missing table is not an unreachable store: %v", err)
	var se *oncekeystore.StoreSchemaError
	require.ErrorAs(t, err, &se)
	if code != "" {
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, "the server's error stays in the chain")
		require.Equal(t, code, pgErr.Code)
	}
	for _, w := range want {
		require.Contains(t, err.Error(), w)
	}
	return se
}

// everyCall runs each of the store's calls once and returns their errors by name.
func everyCall(ctx context.Context, s *pgstore.Store) map[string]error {
	key := claimParams("ok1_schema", oncekeystore.Effectful)
	out := map[string]error{}
	_, out["claim"] = s.Claim(ctx, key)
	_, out["renew"] = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: key.OperationKey, Epoch: 1, Lease: time.Minute})
	_, out["complete"] = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: key.OperationKey, Epoch: 1, Status: oncekeystore.StatusApplied})
	_, out["release"] = s.Release(ctx, &oncekeystore.ReleaseParams{Tenant: "acme", OperationKey: key.OperationKey, Epoch: 1})
	_, out["mark unknown"] = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: "acme", OperationKey: key.OperationKey, Epoch: 1})
	_, out["resolve"] = s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: "acme", OperationKey: key.OperationKey, Epoch: 1, Status: oncekeystore.StatusApplied, ResolvedBy: "op"})
	_, out["get"] = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: key.OperationKey})
	_, out["list"] = s.List(ctx, &oncekeystore.ListParams{})
	_, out["purge"] = s.Purge(ctx, &oncekeystore.PurgeParams{})
	_, out["forget"] = s.Forget(ctx, &oncekeystore.ForgetParams{Tenant: "acme"})
	_, out["purge preview"] = s.PurgePreview(ctx)
	_, out["stats"] = s.Stats(ctx, "")
	for op, err := range approvalCalls(ctx, s) {
		out[op] = err
	}
	return out
}

// The case a new user met: the tables were migrated into a named schema, the store was built
// without Options.Schema. Every call fails with a StoreSchemaError (not StoreUnavailable) that
// names the table, the search_path it looked in, the schema that has the table, and the fix;
// Check says the same at startup. Migrating where the store looks makes the same Store work.
func TestStoreOnSchemaNeverMigrated(t *testing.T) {
	t.Parallel()
	for _, mode := range bothPaths {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			url, searchPath := testenv.PostgresURL(t)
			pool := poolOn(t, url, mode)
			ctx := ctxT(t)
			// The message lists the first few schemas (in byte order) that have the table, and the
			// test database holds many: this name sorts before the tests' own "t_…" schemas.
			migrated := "A_" + searchPath
			t.Cleanup(func() {
				_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{migrated}.Sanitize()+" CASCADE")
				require.NoError(t, err)
			})
			require.NoError(t, pgstore.MigrateSchema(ctx, pool, migrated))
			s := pgstore.New(pool, nil)

			fix := []string{
				"table oncekey_operations not found in the connection's search_path (" + searchPath +
					"), where the store looks when pgstore.Options.Schema is empty",
				"run pgstore.Migrate / pgstore.MigrateSchema (or `oncekey migrate [--schema S]`) on this database",
				"or set pgstore.Options.Schema to the schema you migrated",
				`has oncekey_operations in schema `,
			}
			_, err := s.Claim(ctx, claimParams("ok1_first", oncekeystore.Effectful))
			se := requireSchemaError(t, err, "42P01", fix...)
			require.Contains(t, se.Fix, `"`+migrated+`"`, "the schema that has the table is named")
			t.Logf("claim: %v", err)
			require.Equal(t, "claim", se.Op)
			require.Equal(t, "oncekey_operations", se.Table)
			for op, err := range everyCall(ctx, s) {
				se := requireSchemaError(t, err, "42P01", fix...)
				require.Equal(t, op, se.Op)
			}
			err = s.Check(ctx)
			se = requireSchemaError(t, err, "", fix...)
			require.Equal(t, "check", se.Op)

			require.NoError(t, pgstore.Migrate(ctx, pool))
			require.NoError(t, s.Check(ctx), "the same Store, no restart")
			res, err := s.Claim(ctx, claimParams("ok1_first", oncekeystore.Effectful))
			require.NoError(t, err)
			require.True(t, res.Acquired)
		})
	}
}

// A store given a schema that was never migrated names that schema and the command for it; a
// schema that does not exist is said to be missing. MigrateSchema makes the same Store work.
func TestStoreOnNamedSchemaNeverMigrated(t *testing.T) {
	t.Parallel()
	for _, mode := range bothPaths {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			url, _ := testenv.PostgresURL(t)
			_, empty := testenv.PostgresURL(t)
			pool := poolOn(t, url, mode)
			ctx := ctxT(t)
			s := pgstore.New(pool, &pgstore.Options{Schema: empty})
			fix := []string{
				`table oncekey_operations not found in schema "` + empty + `" (pgstore.Options.Schema)`,
				`run pgstore.MigrateSchema(ctx, pool, "` + empty + `") (or ` + "`oncekey migrate --schema " + empty + "`" + `) on this database`,
				"or set pgstore.Options.Schema to the schema you migrated",
			}
			_, err := s.Claim(ctx, claimParams("ok1_named", oncekeystore.Effectful))
			requireSchemaError(t, err, "42P01", fix...)
			requireSchemaError(t, s.Check(ctx), "", fix...)

			missing := empty + "_missing"
			gone := pgstore.New(pool, &pgstore.Options{Schema: missing})
			_, err = gone.Claim(ctx, claimParams("ok1_named", oncekeystore.Effectful))
			requireSchemaError(t, err, "42P01", `schema "`+missing+`" (pgstore.Options.Schema) does not exist`)
			requireSchemaError(t, gone.Check(ctx), "", `schema "`+missing+`" (pgstore.Options.Schema) does not exist`)

			require.NoError(t, pgstore.MigrateSchema(ctx, pool, empty))
			require.NoError(t, s.Check(ctx))
			res, err := s.Claim(ctx, claimParams("ok1_named", oncekeystore.Effectful))
			require.NoError(t, err)
			require.True(t, res.Acquired)
		})
	}
}

// A table that lacks a column this build uses (what an older migration leaves) is a
// StoreSchemaError too; Check finds migrations missing from oncekey_migrations, and a table
// made without Migrate.
func TestStoreOnOutdatedSchema(t *testing.T) {
	t.Parallel()
	for _, mode := range bothPaths {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			url, schema := testenv.PostgresURL(t)
			pool := poolOn(t, url, mode)
			ctx := ctxT(t)
			require.NoError(t, pgstore.Migrate(ctx, pool))
			s := pgstore.New(pool, nil)
			require.NoError(t, s.Check(ctx))

			_, err := pool.Exec(ctx, `ALTER TABLE oncekey_operations DROP COLUMN note`)
			require.NoError(t, err)
			_, err = s.Claim(ctx, claimParams("ok1_old", oncekeystore.Effectful))
			requireSchemaError(t, err, "42703", "table oncekey_operations in the connection's search_path ("+schema+
				") is not at the migration this version of oncekey expects",
				"run pgstore.Migrate / pgstore.MigrateSchema")

			_, err = pool.Exec(ctx, `DELETE FROM oncekey_migrations`)
			require.NoError(t, err)
			requireSchemaError(t, s.Check(ctx), "", `migrations 001_operations, 002_namespace, 003_approvals, 004_approval_token, 005_transactional, 006_outbox, 007_approval_edits, 008_grants, 009_grant_scope, 010_decision_signatures, 011_grant_revocation_signatures, 012_approval_cosignatures are not applied in schema "`+schema+`"`)

			_, err = pool.Exec(ctx, `DROP TABLE oncekey_migrations`)
			require.NoError(t, err)
			requireSchemaError(t, s.Check(ctx), "", `schema "`+schema+`" has no oncekey_migrations table`)
		})
	}
}

// A Transactional claim on a table whose effect check predates migration 005 is a
// StoreSchemaError that says to migrate, not the check violation as it is; an Effectful claim
// on the same table works.
func TestTransactionalClaimBeforeMigration005(t *testing.T) {
	t.Parallel()
	url, schema := testenv.PostgresURL(t)
	pool := poolOn(t, url, bothPaths[0])
	ctx := ctxT(t)
	require.NoError(t, pgstore.Migrate(ctx, pool))
	require.NoError(t, pgstore.MigrateDownSchema(ctx, pool, "", 4))
	s := pgstore.New(pool, nil)
	_, err := s.Claim(ctx, claimParams("ok1_tx_old", oncekeystore.Transactional))
	requireSchemaError(t, err, "23514", "table oncekey_operations in the connection's search_path ("+schema+
		") is not at the migration this version of oncekey expects", "run pgstore.Migrate / pgstore.MigrateSchema")
	c, err := s.Claim(ctx, claimParams("ok1_fx_old", oncekeystore.Effectful))
	require.NoError(t, err)
	require.True(t, c.Acquired)
}

// Check on a server that cannot be reached is StoreUnavailable, not a schema problem.
func TestCheckUnreachable(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig("postgres://root@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	err = pgstore.New(pool, nil).Check(ctxT(t))
	var su *oncekeystore.StoreUnavailableError
	require.ErrorAs(t, err, &su)
	var se *oncekeystore.StoreSchemaError
	require.False(t, errors.As(err, &se))
	require.True(t, strings.HasPrefix(err.Error(), "pgstore: check: "), err.Error())
}

// A schema migrated up to a version before the outbox, the grants or the grants' scope: the
// calls that use what is missing fail with a StoreSchemaError naming the earliest migration
// missing, never saying that the records' table itself is missing.
func TestStoreBeforeGrantMigrations(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		version int
		want    string
		calls   []string
	}{
		{5, "there is no table oncekey_outbox beside it (migration 006_outbox is not applied)", []string{"forget", "purge preview"}},
		{7, "there is no table oncekey_grants beside it (migration 008_grants is not applied)", []string{"forget", "purge preview", "list grants"}},
		{8, "the column purge_at is missing (migration 009_grant_scope is not applied)", []string{"purge preview"}},
		{10, "the column revocation_signature is missing (migration 011_grant_revocation_signatures is not applied)", []string{"list grants"}},
	} {
		t.Run(fmt.Sprint(c.version), func(t *testing.T) {
			t.Parallel()
			url, schema := testenv.PostgresURL(t)
			pool := poolOn(t, url, bothPaths[0])
			ctx := ctxT(t)
			require.NoError(t, pgstore.Migrate(ctx, pool))
			require.NoError(t, pgstore.MigrateDownSchema(ctx, pool, "", c.version))
			s := pgstore.New(pool, nil)
			errs := map[string]error{}
			_, errs["forget"] = s.Forget(ctx, &oncekeystore.ForgetParams{Tenant: "acme"})
			_, errs["purge preview"] = s.PurgePreview(ctx)
			_, errs["list grants"] = s.ListGrants(ctx, &oncekeystore.ListGrantsParams{Namespace: "default", Tenant: "acme", Tool: "create_ticket"})
			for _, op := range c.calls {
				se := requireSchemaError(t, errs[op], "", "table oncekey_operations in the connection's search_path ("+schema+
					") is not at the migration this version of oncekey expects: "+c.want, "run pgstore.Migrate / pgstore.MigrateSchema")
				require.Equal(t, op, se.Op)
			}
		})
	}
}
