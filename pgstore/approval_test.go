package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// approvalCalls runs each of the store's approval calls once and returns their errors by name.
func approvalCalls(ctx context.Context, s *pgstore.Store) map[string]error {
	out := map[string]error{}
	_, out["request approval"] = s.RequestApproval(ctx, approvalParams("ok1_schema"))
	_, out["decide approval"] = s.DecideApproval(ctx, &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: "ok1_schema",
		Episode: 1, Status: oncekeystore.ApprovalApproved, Retention: time.Hour})
	_, out["get approval"] = s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_schema"})
	_, out["list approvals"] = s.ListApprovals(ctx, &oncekeystore.ListApprovalsParams{})
	return out
}

func approvalParams(key string) *oncekeystore.RequestApprovalParams {
	return &oncekeystore.RequestApprovalParams{Tenant: "acme", OperationKey: key, Namespace: "default", Tool: "refund",
		Fingerprint: "fp", WorkflowID: "wf", StepID: "step", Summary: "refund 120.00 EUR on order 42", Timeout: time.Hour}
}

// A schema migrated before 003_approvals (workers of an older version made it) keeps working for
// records; every approval call, and Purge and Forget, which clean approvals too, fail with a
// StoreSchemaError naming the missing migration, and Check names it. Migrating makes the same
// Store work.
func TestStoreBeforeApprovalMigration(t *testing.T) {
	t.Parallel()
	for _, mode := range bothPaths {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			url, schema := testenv.PostgresURL(t)
			pool := poolOn(t, url, mode)
			ctx := ctxT(t)
			require.NoError(t, pgstore.Migrate(ctx, pool))
			require.NoError(t, pgstore.MigrateDownSchema(ctx, pool, "", 2))
			s := pgstore.New(pool, nil)

			res, err := s.Claim(ctx, claimParams("ok1_old", oncekeystore.Effectful))
			require.NoError(t, err, "records work without the approvals table")
			require.True(t, res.Acquired)

			want := []string{"table oncekey_operations in the connection's search_path (" + schema +
				") is not at the migration this version of oncekey expects: there is no table oncekey_approvals beside it (migration 003_approvals is not applied)",
				"run pgstore.Migrate / pgstore.MigrateSchema"}
			calls := approvalCalls(ctx, s)
			_, calls["purge"] = s.Purge(ctx, &oncekeystore.PurgeParams{})
			_, calls["forget"] = s.Forget(ctx, &oncekeystore.ForgetParams{Tenant: "acme"})
			_, calls["purge preview"] = s.PurgePreview(ctx)
			for op, err := range calls {
				se := requireSchemaError(t, err, "42P01", want...)
				require.Equal(t, op, se.Op)
			}
			requireSchemaError(t, s.Check(ctx), "", `migrations 003_approvals, 004_approval_token, 005_transactional, 006_outbox, 007_approval_edits, 008_grants, 009_grant_scope, 010_decision_signatures, 011_grant_revocation_signatures, 012_approval_cosignatures are not applied in schema "`+schema+`"`)

			require.NoError(t, pgstore.Migrate(ctx, pool))
			require.NoError(t, s.Check(ctx))
			for op, err := range approvalCalls(ctx, s) {
				require.NoError(t, err, op)
			}
			a, err := s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_schema"})
			require.NoError(t, err)
			require.Equal(t, oncekeystore.ApprovalApproved, a.Status)
		})
	}
}

// Every approval call is one statement in one round trip, on a warm connection; a decision that
// changes nothing reads the approval once more to say why.
func TestApprovalCallsAreOneRoundTrip(t *testing.T) {
	t.Parallel()
	pool, writes, stmts := countingPool(t)
	s := pgstore.New(pool, nil)
	ctx := ctxT(t)
	decide := func(key string, episode int64) (*oncekeystore.Approval, error) {
		return s.DecideApproval(ctx, &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: key, Episode: episode,
			Status: oncekeystore.ApprovalApproved, DecidedBy: "ada", Retention: time.Hour})
	}
	// Warm the connection's statement cache (pgx prepares a statement on its first use).
	_, err := s.RequestApproval(ctx, approvalParams("ok1_warm"))
	require.NoError(t, err)
	_, err = decide("ok1_warm", 1)
	require.NoError(t, err)
	_, err = decide("ok1_warm", 1)
	require.Error(t, err)
	_, err = s.Forget(ctx, &oncekeystore.ForgetParams{Tenant: "nobody"})
	require.NoError(t, err)

	measure := func(what string, want int64, fn func()) {
		t.Helper()
		w0, s0 := writes.Load(), stmts.n.Load()
		fn()
		require.Equal(t, want, stmts.n.Load()-s0, "%s: statements", what)
		require.Equal(t, want, writes.Load()-w0, "%s: round trips", what)
	}
	measure("request of a new key", 1, func() {
		res, err := s.RequestApproval(ctx, approvalParams("ok1_one"))
		require.NoError(t, err)
		require.True(t, res.Created)
	})
	measure("request of a pending key", 1, func() {
		res, err := s.RequestApproval(ctx, approvalParams("ok1_one"))
		require.NoError(t, err)
		require.False(t, res.Created)
	})
	measure("decide", 1, func() {
		_, err := decide("ok1_one", 1)
		require.NoError(t, err)
	})
	measure("decide again: refused, and read once to say why", 2, func() {
		_, err := decide("ok1_one", 1)
		var ce *oncekeystore.ApprovalConflictError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "ada", ce.Approval.DecidedBy)
	})
	measure("get", 1, func() {
		_, err := s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_one"})
		require.NoError(t, err)
	})
	measure("forget of records and approvals", 1, func() {
		res, err := s.Forget(ctx, &oncekeystore.ForgetParams{Tenant: "acme"})
		require.NoError(t, err)
		require.Equal(t, int64(2), res.ApprovalsDeleted)
	})
}

// Purge deletes decided approvals past retention beside the records, and PurgePreview counts
// them first; the approval rows carry what the store wrote with the database clock.
func TestApprovalPurgePreviewAndClock(t *testing.T) {
	t.Parallel()
	pool, s := setup(t)
	ctx := ctxT(t)
	for i := range 3 {
		key := fmt.Sprintf("ok1_purge_%d", i)
		_, err := s.RequestApproval(ctx, approvalParams(key))
		require.NoError(t, err)
		_, err = s.DecideApproval(ctx, &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: key, Episode: 1,
			Status: oncekeystore.ApprovalDenied, Reason: "no", Retention: time.Hour})
		require.NoError(t, err)
	}
	_, err := s.RequestApproval(ctx, approvalParams("ok1_pending"))
	require.NoError(t, err)
	// Move two decisions back past their retention on the database clock.
	tag, err := pool.Exec(ctx, `UPDATE oncekey_approvals SET expires_at = now() - interval '1 second'
WHERE operation_key IN ('ok1_purge_0', 'ok1_purge_1')`)
	require.NoError(t, err)
	require.Equal(t, int64(2), tag.RowsAffected())
	// A pending approval is never purged, whatever its columns say.
	_, err = pool.Exec(ctx, `UPDATE oncekey_approvals SET expires_at = now() - interval '1 day' WHERE operation_key = 'ok1_pending'`)
	require.NoError(t, err)

	pv, err := s.PurgePreview(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), pv.ApprovalDeletes)
	res, err := s.Purge(ctx, &oncekeystore.PurgeParams{})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.ApprovalsDeleted)
	var left []string
	rows, err := pool.Query(ctx, `SELECT operation_key FROM oncekey_approvals ORDER BY operation_key`)
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"ok1_pending", "ok1_purge_2"}, left)

	// Requested and decided on the database clock: the row's times are now() of their statements.
	var requestedOK, decidedOK bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT requested_at <= now() AND deadline = requested_at + interval '1 hour',
    decided_at <= now() AND expires_at = decided_at + interval '1 hour'
FROM oncekey_approvals WHERE operation_key = 'ok1_purge_2'`).Scan(&requestedOK, &decidedOK))
	require.True(t, requestedOK)
	require.True(t, decidedOK)
}

// TestApprovalsTableSchemaPinned pins the approvals table the migrations build, like
// TestTableSchemaPinned. CHANGING IT IS A BREAKING CHANGE (docs/compatibility.md): a change is a
// new numbered migration, a new pinned value below, and a Changed entry in CHANGELOG.md.
func TestApprovalsTableSchemaPinned(t *testing.T) {
	pool, _ := setup(t)
	ctx := ctxT(t)
	rows, err := pool.Query(ctx, `SELECT column_name || ' ' || data_type ||
    CASE WHEN is_nullable = 'NO' THEN ' NOT NULL' ELSE '' END ||
    coalesce(' COLLATE ' || collation_name, '') || coalesce(' DEFAULT ' || column_default, '')
FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'oncekey_approvals'
ORDER BY ordinal_position`)
	require.NoError(t, err)
	columns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{
		"tenant text NOT NULL COLLATE C",
		"operation_key text NOT NULL COLLATE C",
		"namespace text NOT NULL DEFAULT ''::text",
		"tool text NOT NULL",
		"fingerprint text NOT NULL",
		"workflow_id text NOT NULL DEFAULT ''::text",
		"step_id text NOT NULL DEFAULT ''::text",
		"summary text NOT NULL DEFAULT ''::text",
		"status text NOT NULL",
		"episode bigint NOT NULL",
		"requested_at timestamp with time zone NOT NULL",
		"deadline timestamp with time zone NOT NULL",
		"decided_at timestamp with time zone",
		"decided_by text NOT NULL DEFAULT ''::text",
		"reason text NOT NULL DEFAULT ''::text",
		"expires_at timestamp with time zone",
		"request_token bigint NOT NULL",
		"token text NOT NULL DEFAULT ''::text",
		"model_message text NOT NULL DEFAULT ''::text",
		"changes_requested boolean NOT NULL DEFAULT false",
		"edit_of text NOT NULL DEFAULT ''::text",
		"edited_as text NOT NULL DEFAULT ''::text",
		"grant_id text NOT NULL DEFAULT ''::text",
		"signature bytea",
		"cosigned ARRAY NOT NULL DEFAULT '{}'::bytea[]",
	}, columns, "the columns of oncekey_approvals")

	var schema string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))
	rows, err = pool.Query(ctx, `SELECT replace(indexdef, $1, '') FROM pg_indexes
WHERE schemaname = current_schema() AND tablename = 'oncekey_approvals' ORDER BY indexname`, schema+".")
	require.NoError(t, err)
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{
		"CREATE INDEX oncekey_approvals_expires_idx ON oncekey_approvals USING btree (expires_at) WHERE (expires_at IS NOT NULL)",
		"CREATE INDEX oncekey_approvals_pending_idx ON oncekey_approvals USING btree (requested_at, tenant, operation_key) WHERE (status = 'pending'::text)",
		"CREATE UNIQUE INDEX oncekey_approvals_pkey ON oncekey_approvals USING btree (tenant, operation_key)",
		"CREATE INDEX oncekey_approvals_requested_idx ON oncekey_approvals USING btree (requested_at, tenant, operation_key)",
	}, indexes, "the indexes of oncekey_approvals")

	rows, err = pool.Query(ctx, `SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
WHERE conrelid = 'oncekey_approvals'::regclass ORDER BY conname`)
	require.NoError(t, err)
	constraints, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{
		"oncekey_approvals_episode_check CHECK ((episode >= 1))",
		"oncekey_approvals_pkey PRIMARY KEY (tenant, operation_key)",
		"oncekey_approvals_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'approved'::text, 'denied'::text, 'timed_out'::text, 'replaced'::text])))",
	}, constraints, "the constraints of oncekey_approvals")
}
