package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/recordtest"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the CLI in-process with env as its whole environment (libpq variables still come
// from the process, as pgx reads them itself).
func cli(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := execute(ctx, args, strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// showJSON returns the record of key under tenant as `oncekey show --json` prints it.
func showJSON(t *testing.T, env map[string]string, key, tenant string) recordView {
	t.Helper()
	r := cli(t, env, "show", key, "--tenant", tenant, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var v recordView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	return v
}

// needsServices skips t under -short, which runs only tests that need no Postgres or Temporal.
func needsServices(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs Postgres")
	}
}

// migrated returns a URL on a fresh, migrated schema, and a store on it.
func migrated(t *testing.T) (string, *pgstore.Store, *pgxpool.Pool) {
	t.Helper()
	needsServices(t)
	url, _ := testenv.PostgresURL(t)
	s, pool := migratedAt(t, url)
	return url, s, pool
}

// migratedAt migrates the schema behind url with the CLI and returns a store on it.
func migratedAt(t *testing.T, url string) (*pgstore.Store, *pgxpool.Pool) {
	t.Helper()
	r := cli(t, nil, "migrate", "--database-url", url)
	require.Equal(t, 0, r.code, r.stderr)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pgstore.New(pool, nil), pool
}

// seed writes a record for the operation (tenant, wf, step) of tool through the store's own
// protocol and leaves it in status st ("applied" with result, "unknown", "pending"); it returns
// the key.
func seed(t *testing.T, s oncekeystore.Store, tenant, tool, wf, step string, st oncekeystore.Status, result []byte) string {
	t.Helper()
	key, _ := recordtest.Seed(t, s, recordtest.Record{Tenant: tenant, WorkflowID: wf, StepID: step, Tool: tool, Status: st, Result: result})
	return key
}

// embeddedMigrations is how many migrations pgstore embeds (its up files).
func embeddedMigrations(t *testing.T) int {
	t.Helper()
	ups, err := filepath.Glob("../../pgstore/migrations/*.up.sql")
	require.NoError(t, err)
	require.NotEmpty(t, ups)
	return len(ups)
}

func TestMigrate(t *testing.T) {
	needsServices(t)
	url, schema := testenv.PostgresURL(t)
	r := cli(t, nil, "migrate", "--dry-run", "--database-url", url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("would apply %d migration(s)", embeddedMigrations(t)))
	require.Contains(t, r.stdout, "001_operations")

	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	defer pool.Close()
	tableExists := func() bool {
		var ok bool
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'oncekey_operations')`, schema).Scan(&ok))
		return ok
	}
	require.False(t, tableExists(), "a dry run applies nothing")

	r = cli(t, map[string]string{"DATABASE_URL": url}, "migrate")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, tableExists())

	r = cli(t, nil, "migrate", "--dry-run", "--database-url", url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "up to date")
	r = cli(t, nil, "migrate", "--database-url", url)
	require.Equal(t, 0, r.code, "migrate twice is harmless: %s", r.stderr)

	// --schema migrates a named schema, creating it.
	named := schema + "_named"
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+named+" CASCADE") })
	r = cli(t, nil, "migrate", "--database-url", url, "--schema", named)
	require.Equal(t, 0, r.code, r.stderr)
	r = cli(t, nil, "list", "--database-url", url, "--schema", named)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "no records match")
}

func TestListShowStats(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url}
	// The stored form of a result: Temporal payloads, as the interceptor writes them.
	result, err := reconcile.EncodeResult(nil, []byte(`{"id":"TCK-0042"}`))
	require.NoError(t, err)
	applied := seed(t, s, "acme", "CreateTicket", "wf-1", "create_ticket", oncekeystore.StatusApplied, result)
	unknown := seed(t, s, "acme", "IssueRefund", "wf-1", "issue_refund", oncekeystore.StatusUnknown, nil)
	other := seed(t, s, "globex", "CreateTicket", "wf-2", "create_ticket", oncekeystore.StatusUnknown, nil)

	r := cli(t, env, "list")
	require.Equal(t, 0, r.code, r.stderr)
	for _, k := range []string{applied, unknown, other} {
		require.Contains(t, r.stdout, k)
	}
	require.NotContains(t, r.stdout, "TCK-0042", "results are never listed")

	r = cli(t, env, "list", "--status", "unknown", "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, unknown)
	require.NotContains(t, r.stdout, applied)
	require.NotContains(t, r.stdout, other)

	r = cli(t, env, "list", "--tool", "CreateTicket", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var views []recordView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 2)
	for _, v := range views {
		require.Equal(t, "CreateTicket", v.Tool)
		require.Nil(t, v.Result)
	}

	r = cli(t, env, "list", "--limit", "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "first 1 shown")
	r = cli(t, env, "list", "--since", "1h", "--workflow", "wf-2", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 1)
	require.Equal(t, other, views[0].OperationKey)
	r = cli(t, env, "list", "--since", "2099-01-01T00:00:00Z")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "no records match")

	r = cli(t, env, "show", applied, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "applied")
	require.Contains(t, r.stdout, "REF-create_ticket")
	require.Contains(t, r.stdout, "--show-result")
	require.NotContains(t, r.stdout, "TCK-0042")

	r = cli(t, env, "show", applied, "--tenant", "acme", "--show-result", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var v recordView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	require.Equal(t, oncekeystore.StatusApplied, v.Status)
	got, err := json.Marshal(v.Result)
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"TCK-0042"}`, string(got))

	r = cli(t, env, "show", unknown, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "connection reset")

	r = cli(t, env, "show", applied, "--tenant", "globex")
	require.Equal(t, exitNotFound, r.code)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)

	r = cli(t, env, "stats", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var sv statsView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sv))
	require.Equal(t, 3, sv.Total)
	require.Equal(t, 2, sv.ByStatus[oncekeystore.StatusUnknown])
	require.Equal(t, 1, sv.ByTool["CreateTicket"][oncekeystore.StatusApplied])
	require.Equal(t, map[string]int{"acme": 2, "globex": 1}, sv.ByTenant)
	require.NotNil(t, sv.OldestUnknown)

	r = cli(t, env, "stats", "--tenant", "globex")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "CreateTicket")
	require.NotContains(t, r.stdout, "IssueRefund")
	require.Contains(t, r.stdout, "oldest unknown")
}

func TestPurgeAndForget(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url}
	ctx := context.Background()
	// A record with a tiny retention and a short tombstone window, and two kept for an hour.
	op := oncekey.Operation{Namespace: "default", Tenant: "acme", WorkflowID: "wf", StepID: "short", Tool: "T"}
	short, err := oncekey.Key(oncekey.Policy{Effect: oncekey.Effectful}, op)
	require.NoError(t, err)
	cr, err := s.Claim(ctx, &oncekeystore.ClaimParams{Tenant: "acme", OperationKey: short, Tool: "T", Fingerprint: strings.Repeat("cd", 32),
		WorkflowID: "wf", StepID: "short", Effect: oncekey.Effectful, Lease: time.Minute, Retention: 50 * time.Millisecond, Tombstone: 5 * time.Second})
	require.NoError(t, err)
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: short, Epoch: cr.Record.Epoch, Status: oncekeystore.StatusApplied})
	require.NoError(t, err)
	seed(t, s, "acme", "T", "wf", "long", oncekeystore.StatusApplied, nil)
	seed(t, s, "globex", "T", "wf", "long", oncekeystore.StatusApplied, nil)
	// An unknown outcome with the same tiny retention: never purged, and reported.
	opU := op
	opU.StepID = "unknown"
	unk, err := oncekey.Key(oncekey.Policy{Effect: oncekey.Effectful}, opU)
	require.NoError(t, err)
	cu, err := s.Claim(ctx, &oncekeystore.ClaimParams{Tenant: "acme", OperationKey: unk, Tool: "T", Fingerprint: strings.Repeat("cd", 32),
		WorkflowID: "wf", StepID: "unknown", Effect: oncekey.Effectful, Lease: time.Minute, Retention: 50 * time.Millisecond, Tombstone: 100 * time.Millisecond})
	require.NoError(t, err)
	_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: "acme", OperationKey: unk, Epoch: cu.Record.Epoch})
	require.NoError(t, err)

	r := cli(t, env, "purge", "--batch-size", "0")
	require.Equal(t, exitUsage, r.code)

	// Once retention has passed on the database clock, purge turns the record into a tombstone.
	require.Eventually(t, func() bool {
		r := cli(t, env, "purge", "--dry-run")
		return r.code == 0 && strings.Contains(r.stdout, "would tombstone 1 record(s)")
	}, 10*time.Second, 50*time.Millisecond)
	r = cli(t, env, "purge", "--dry-run")
	require.Contains(t, r.stdout, "would leave 1 unknown or pending record(s) past their retention, the oldest created ")
	r = cli(t, env, "purge", "--batch-size", "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "1 record(s) tombstoned")
	require.Contains(t, r.stdout, "left 1 unknown or pending record(s) past their retention, the oldest created ")
	require.Contains(t, r.stdout, "oncekey list --status unknown")
	rec, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: short})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusExpired, rec.Status)

	// Then, once the tombstone window has passed, purge deletes the tombstone.
	require.Eventually(t, func() bool {
		r := cli(t, env, "purge")
		return r.code == 0 && strings.Contains(r.stdout, "1 tombstone(s) deleted")
	}, 30*time.Second, 100*time.Millisecond)
	_, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: short})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
	rec, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: unk})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status, "past its tombstone window too, the unknown record is kept")
	// show says since when it waits and that it is kept until settled, not a retention date
	// already past.
	r = cli(t, env, "show", unk, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^unknown since\s+\S+ \(\d+s ago\)$`, r.stdout)
	require.Regexp(t, `(?m)^retained\s+until it settles, however old \(pending and unknown records never expire\); then 0s, and a tombstone for 0s more$`, r.stdout)
	require.NotContains(t, r.stdout, "retained until 2")
	r = cli(t, env, "show", unk, "--tenant", "acme", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var sv struct {
		KeptUntilSettled bool  `json:"kept_until_settled"`
		AgeSeconds       int64 `json:"age_seconds"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sv))
	require.True(t, sv.KeptUntilSettled)

	r = cli(t, env, "forget", "--tenant", "acme")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "refusing without --yes")
	require.Contains(t, r.stderr, "2 record(s)", "the applied one and the unknown one")
	r = cli(t, env, "forget", "--yes")
	require.Equal(t, exitUsage, r.code)
	r = cli(t, env, "forget", "--tenant", "acme", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "deleted 2 record(s)")
	r = cli(t, env, "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var views []recordView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
	require.Len(t, views, 1)
	require.Equal(t, "globex", views[0].Tenant, "forget touches one tenant only")
}

func TestUsageErrors(t *testing.T) {
	key := oncekey.KeyPrefix + strings.Repeat("0", 64)
	for name, args := range map[string][]string{
		"unknown command":       {"frobnicate"},
		"unknown flag":          {"list", "--colour"},
		"bad status":            {"list", "--status", "done", "--database-url", "postgres://x@127.0.0.1:1/x"},
		"bad since":             {"list", "--since", "yesterday", "--database-url", "postgres://x@127.0.0.1:1/x"},
		"show without key":      {"show"},
		"show not a key":        {"show", "TCK-1"},
		"resolve no outcome":    {"resolve", key, "--epoch", "1"},
		"resolve no epoch":      {"resolve", key, "--not-applied"},
		"resolve two outcomes":  {"resolve", key, "--epoch", "1", "--applied", "--failed"},
		"resolve bad JSON":      {"resolve", key, "--epoch", "1", "--applied", "--result", "{oops"},
		"resolve ref w/o apply": {"resolve", key, "--epoch", "1", "--not-applied", "--ref", "R"},
		"resolve missing file":  {"resolve", key, "--epoch", "1", "--applied", "--result", "@/nonexistent/result.json"},
		"no check w/o direct":   {"resolve", key, "--epoch", "1", "--not-applied", "--no-temporal-check"},
		"deny without reason":   {"deny", key, "--tenant", "acme"},
		"deny blank reason":     {"deny", key, "--reason", "  "},
		"approve not a key":     {"approve", "TCK-1"},
		"approve no key":        {"approve"},
		"approve bad episode":   {"approve", key, "--episode", "-1"},
		"approve NUL reason":    {"approve", key, "--episode", "1", "--reason", "a\x00b"},
		"approvals bad status":  {"approvals", "--status", "done"},
		"approvals bad limit":   {"approvals", "--limit", "0"},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, nil, args...)
			require.Equal(t, exitUsage, r.code, "stdout %q stderr %q", r.stdout, r.stderr)
			require.True(t, strings.HasPrefix(r.stderr, "oncekey: "), r.stderr)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
		})
	}
}

func TestUnreachable(t *testing.T) {
	r := cli(t, nil, "list", "--database-url", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2")
	require.Equal(t, exitUnreachable, r.code)
	require.Contains(t, r.stderr, "cannot reach Postgres")
	require.Contains(t, r.stderr, "DATABASE_URL")
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)

	key := oncekey.KeyPrefix + strings.Repeat("0", 64)
	r = cli(t, map[string]string{"TEMPORAL_ADDRESS": "127.0.0.1:1"}, "resolve", key, "--epoch", "1", "--not-applied", "--timeout", "3s")
	require.Equal(t, exitUnreachable, r.code, r.stderr)
	require.Contains(t, r.stderr, "cannot reach Temporal at 127.0.0.1:1")
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
}

func TestResultFromFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"id":"X"}`), 0o600))
	f := resolveFlags{applied: true, result: "@" + p, deciderFlags: deciderFlags{tenant: "t"}, epoch: 1}
	r, key, err := f.resolution(&app{getenv: func(string) string { return "" }}, oncekey.KeyPrefix+strings.Repeat("1", 64))
	require.NoError(t, err)
	require.Equal(t, oncekey.KeyPrefix+strings.Repeat("1", 64), key)
	require.JSONEq(t, `{"id":"X"}`, string(r.Result))
	require.Equal(t, "oncekey-cli", r.ResolvedBy)
}

// Commands on a schema without oncekey's tables say how to fix it: migrate, or name the schema
// that holds them.
func TestMissingTablesHintNamesSchema(t *testing.T) {
	needsServices(t)
	url, schema := testenv.PostgresURL(t)
	// The tables are migrated into another schema of the same database: the hint says where.
	other, _ := testenv.PostgresURL(t)
	r := cli(t, map[string]string{"DATABASE_URL": other}, "migrate")
	require.Equal(t, 0, r.code, r.stderr)

	r = cli(t, map[string]string{"DATABASE_URL": url}, "list")
	require.Equal(t, exitFailed, r.code, r.stdout)
	require.Contains(t, r.stderr, `the oncekey tables are not in `+dbAt(t)+`, schema `+schema+` (the first of the search_path; --schema names another); that database has them in schema `)
	require.Contains(t, r.stderr, ": pass --schema ")
	require.Contains(t, r.stderr, "(or run `oncekey migrate` to create them in schema "+schema+")")
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line")
}

// dbAt names the tests' Postgres database as the CLI's messages do: `Postgres database "test" at
// 127.0.0.1:5432 as root`, read from TEST_DATABASE_URL (every test schema lives in it).
func dbAt(t *testing.T) string {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testenv.DatabaseURL())
	require.NoError(t, err)
	c := cfg.ConnConfig
	return fmt.Sprintf("Postgres database %q at %s:%d as %s", c.Database, c.Host, c.Port, c.User)
}
