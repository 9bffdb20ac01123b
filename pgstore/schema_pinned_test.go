package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestTableSchemaPinned pins the table the migrations build: every column (name, type, NOT NULL,
// collation, default), the primary key and the indexes, as Postgres reports them.
//
// CHANGING IT IS A BREAKING CHANGE (docs/compatibility.md): workers of two versions share the table
// during a deploy, and other tools read it. A change is a new numbered migration (never an edit of
// an applied one), a new pinned value below, and a Changed entry in CHANGELOG.md saying what an
// operator must do, all in the same commit.
func TestTableSchemaPinned(t *testing.T) {
	pool, _ := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	rows, err := pool.Query(ctx, `SELECT column_name, data_type, is_nullable, coalesce(collation_name, ''), coalesce(column_default, '')
FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'oncekey_operations'
ORDER BY ordinal_position`)
	require.NoError(t, err)
	var columns []string
	var name, typ, nullable, collation, def string
	_, err = pgx.ForEachRow(rows, []any{&name, &typ, &nullable, &collation, &def}, func() error {
		c := fmt.Sprintf("%s %s", name, typ)
		if nullable == "NO" {
			c += " NOT NULL"
		}
		if collation != "" {
			c += " COLLATE " + collation
		}
		if def != "" {
			c += " DEFAULT " + def
		}
		columns = append(columns, c)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{
		"tenant text NOT NULL COLLATE C",
		"operation_key text NOT NULL COLLATE C",
		"tool text NOT NULL",
		"version text NOT NULL DEFAULT ''::text",
		"fingerprint text NOT NULL",
		"workflow_id text NOT NULL DEFAULT ''::text",
		"step_id text NOT NULL DEFAULT ''::text",
		"effect smallint NOT NULL",
		"status text NOT NULL",
		"epoch bigint NOT NULL",
		"lease_until timestamp with time zone",
		"claim_token bigint",
		"result bytea",
		"failure bytea",
		"effect_ref text NOT NULL DEFAULT ''::text",
		"resolved_by text NOT NULL DEFAULT ''::text",
		"note text NOT NULL DEFAULT ''::text",
		"created_at timestamp with time zone NOT NULL",
		"updated_at timestamp with time zone NOT NULL",
		"expires_at timestamp with time zone NOT NULL",
		"tombstone_until timestamp with time zone NOT NULL",
		"namespace text NOT NULL DEFAULT ''::text",
		"signature bytea",
		"signature_epoch bigint",
	}, columns, "the columns of oncekey_operations")

	rows, err = pool.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = current_schema() AND tablename = 'oncekey_operations' ORDER BY indexname`)
	require.NoError(t, err)
	var schema string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))
	var indexes []string
	var idx, idxDef string
	_, err = pgx.ForEachRow(rows, []any{&idx, &idxDef}, func() error {
		indexes = append(indexes, strings.ReplaceAll(idxDef, schema+".", ""))
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{
		"CREATE INDEX oncekey_operations_expires_idx ON oncekey_operations USING btree (expires_at) WHERE (status <> 'expired'::text)",
		"CREATE UNIQUE INDEX oncekey_operations_pkey ON oncekey_operations USING btree (tenant, operation_key)",
		"CREATE INDEX oncekey_operations_tombstone_idx ON oncekey_operations USING btree (tombstone_until)",
		"CREATE INDEX oncekey_operations_unknown_idx ON oncekey_operations USING btree (updated_at, tenant, operation_key) WHERE (status = 'unknown'::text)",
		"CREATE INDEX oncekey_operations_updated_idx ON oncekey_operations USING btree (updated_at, tenant, operation_key)",
	}, indexes, "the indexes of oncekey_operations")

	rows, err = pool.Query(ctx, `SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
WHERE conrelid = 'oncekey_operations'::regclass ORDER BY conname`)
	require.NoError(t, err)
	constraints, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{
		"oncekey_operations_effect_check CHECK ((effect = ANY (ARRAY[2, 3, 4])))",
		"oncekey_operations_epoch_check CHECK ((epoch >= 1))",
		"oncekey_operations_pkey PRIMARY KEY (tenant, operation_key)",
		"oncekey_operations_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'applied'::text, 'failed'::text, 'unknown'::text, 'released'::text, 'expired'::text])))",
	}, constraints, "the constraints of oncekey_operations")
}

// TestGrantTablePinned pins the standing grants' table (migrations 008, 009, 010 and 011): its columns and
// indexes, as Postgres reports them. The worker's lookup of one scope's active grants depends on
// oncekey_grants_active_idx, Purge on oncekey_grants_purge_idx.
//
// CHANGING IT IS A BREAKING CHANGE (docs/compatibility.md), as for TestTableSchemaPinned.
func TestGrantTablePinned(t *testing.T) {
	pool, _ := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var schema string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))

	rows, err := pool.Query(ctx, `SELECT column_name || ' ' || data_type || CASE WHEN is_nullable = 'NO' THEN ' NOT NULL' ELSE '' END
    || coalesce(' COLLATE ' || collation_name, '') || coalesce(' DEFAULT ' || column_default, '')
FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'oncekey_grants' ORDER BY ordinal_position`)
	require.NoError(t, err)
	columns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{
		"id text NOT NULL COLLATE C",
		"namespace text NOT NULL",
		"tenant text NOT NULL COLLATE C",
		"tool text NOT NULL",
		"workflow_id text NOT NULL DEFAULT ''::text",
		"rule text NOT NULL DEFAULT ''::text",
		"created_by text NOT NULL",
		"reason text NOT NULL DEFAULT ''::text",
		"created_at timestamp with time zone NOT NULL",
		"expires_at timestamp with time zone NOT NULL",
		"revoked_at timestamp with time zone",
		"revoked_by text NOT NULL DEFAULT ''::text",
		"purge_at timestamp with time zone NOT NULL DEFAULT (now() + '120 days'::interval)",
		"signature bytea",
		"revocation_signature bytea",
	}, columns, "the columns of oncekey_grants")

	rows, err = pool.Query(ctx, `SELECT indexdef FROM pg_indexes
WHERE schemaname = current_schema() AND tablename = 'oncekey_grants' ORDER BY indexname`)
	require.NoError(t, err)
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for i := range indexes {
		indexes[i] = strings.ReplaceAll(indexes[i], schema+".", "")
	}
	require.Equal(t, []string{
		"CREATE INDEX oncekey_grants_active_idx ON oncekey_grants USING btree (namespace, tenant, tool, expires_at) WHERE (revoked_at IS NULL)",
		"CREATE INDEX oncekey_grants_namespace_idx ON oncekey_grants USING btree (namespace, created_at, id)",
		"CREATE UNIQUE INDEX oncekey_grants_pkey ON oncekey_grants USING btree (id)",
		"CREATE INDEX oncekey_grants_purge_idx ON oncekey_grants USING btree (purge_at)",
		"CREATE INDEX oncekey_grants_scope_idx ON oncekey_grants USING btree (tenant, tool, created_at, id)",
	}, indexes, "the indexes of oncekey_grants")
}
