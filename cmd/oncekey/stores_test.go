package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/redisstore"
)

// testStore is a store the CLI is pointed at in a test: the environment that names it, a store
// on the same data for seeding, and where the CLI says it connected.
type testStore struct {
	name  string
	env   map[string]string
	store recordStore
	where string
}

// postgresStore is a fresh, migrated schema, named to the CLI by ONCEKEY_STORE.
func postgresStore(t *testing.T) testStore {
	url, s, _ := migrated(t)
	r := cli(t, map[string]string{storeEnv: url}, "migrate", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	where := strings.TrimSuffix(strings.TrimPrefix(r.stdout, "dry run: "), " is up to date; nothing to apply\n")
	return testStore{name: "postgres", env: map[string]string{storeEnv: url}, store: s, where: where}
}

// redisAddr is the Redis the tests use: TEST_REDIS_ADDR, or the local one.
func redisAddr() string {
	if a := os.Getenv("TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// redisTestStore is the test Redis under a key prefix of its own (its keys deleted in
// t.Cleanup), named to the CLI by ONCEKEY_STORE. A missing Redis skips the test, or fails it
// when CI is set.
func redisTestStore(t *testing.T) testStore {
	t.Helper()
	needsServices(t)
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		testenv.Missing(t, "Redis at %s: %v", redisAddr(), err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "oncekey-cli-test-" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator() // the test's own keys
		for iter.Next(ctx) {
			_ = rdb.Del(ctx, iter.Val()).Err()
		}
	})
	s, err := redisstore.New(rdb, &redisstore.Options{Prefix: prefix, Buckets: 4})
	require.NoError(t, err)
	url := "redis://" + redisAddr() + "/0?buckets=4&prefix=" + prefix
	where := (&redisTarget{addr: redisAddr(), prefix: prefix, buckets: 4}).String()
	return testStore{name: "redis", env: map[string]string{storeEnv: url}, store: s, where: where}
}

// eachStore runs fn as a subtest on each store the CLI opens.
func eachStore(t *testing.T, fn func(t *testing.T, st testStore)) {
	for _, mk := range []func(*testing.T) testStore{postgresStore, redisTestStore} {
		st := mk(t)
		t.Run(st.name, func(t *testing.T) { fn(t, st) })
	}
}

// The store commands behave the same on every store: one table of commands, their exit codes
// and what they print, run against Postgres and Redis holding the same records and approvals.
func TestStoreCommandsOnEveryStore(t *testing.T) {
	eachStore(t, func(t *testing.T, st testStore) {
		s := st.store
		applied := seed(t, s, "acme", "Book", "wf-1", "book", oncekeystore.StatusApplied, nil)
		unknown := seed(t, s, "acme", "Book", "wf-2", "book", oncekeystore.StatusUnknown, nil)
		seed(t, s, "globex", "Charge", "wf-3", "charge", oncekeystore.StatusApplied, nil)
		waiting := seedApproval(t, s, "acme", "Refund", "wf-4", "refund", "refund 12.00 EUR")
		missing := "ok1_" + strings.Repeat("0", 64)
		grant, err := s.CreateGrant(context.Background(), &oncekeystore.CreateGrantParams{Namespace: "default", Tenant: "acme", Tool: "Refund",
			CreatedBy: "ada", Reason: "refunds for Jane Doe", Duration: time.Hour})
		require.NoError(t, err)

		for _, tc := range []struct {
			args   []string
			code   int
			stdout []string
			stderr []string
		}{
			{args: []string{"list", "--tenant", "acme"}, stdout: []string{applied, unknown, "Book"}},
			{args: []string{"list", "--tool", "book"}, stdout: []string{"no records match; tool names match exactly, in case too: did you mean --tool Book?"}},
			{args: []string{"list", "--status", "unknown"}, stdout: []string{unknown}},
			{args: []string{"show", applied, "--tenant", "acme"}, stdout: []string{"status applied", "workflow wf-1"}},
			{args: []string{"show", waiting, "--tenant", "acme"}, stdout: []string{"approval pending, episode 1", "refund 12.00 EUR"}},
			{args: []string{"show", missing, "--tenant", "acme"}, code: exitNotFound,
				stderr: []string{"no record for " + missing + " under tenant acme in " + st.where}},
			{args: []string{"stats"}, stdout: []string{"all tools 0 2 0 1 0 0 3 1", "tenants: 2; oldest unknown updated", "1 call(s) wait for approval"}},
			{args: []string{"approvals"}, stdout: []string{waiting, "refund 12.00 EUR", "decide the oldest with `oncekey approve " + waiting}},
			{args: []string{"approve", waiting, "--tenant", "globex"}, code: exitFailed,
				stderr: []string{"the approval of " + waiting + " belongs to tenant acme, not globex: a decision names the operation's tenant, so nothing was recorded; `oncekey approve " + waiting + " --tenant acme --episode 1"}},
			{args: []string{"deny", missing, "--tenant", "acme", "--reason", "no"}, code: exitNotFound,
				stderr: []string{"no approval for " + missing + " under tenant acme in " + st.where}},
			{args: []string{"purge", "--dry-run"}, stdout: []string{"would tombstone 0 record(s) and delete 0 tombstone(s)\n"}},
			{args: []string{"purge"}, stdout: []string{"purged in 0 batch(es): 0 record(s) tombstoned, 0 tombstone(s) deleted\n"}},
			{args: []string{"resolve", applied, "--tenant", "acme", "--epoch", "1", "--direct", "--not-applied", "--no-temporal-check"}, code: exitFailed,
				stderr: []string{applied + " is already applied: there is nothing to resolve; nothing was written"}},
			{args: []string{"resolve", unknown, "--tenant", "acme", "--epoch", "1", "--direct", "--applied", "--ref", "B-1", "--no-temporal-check", "--by", "ines"},
				stdout: []string{"resolved " + unknown + " directly in the store as applied (tenant acme, " + st.where + "): by ines (oncekey-cli --direct), ref B-1"}},
			{args: []string{"forget", "--tenant", "acme"}, code: exitUsage,
				stderr: []string{"refusing without --yes: this deletes all 2 record(s) and 1 approval(s) and 1 standing grant(s) of tenant \"acme\""}},
			{args: []string{"forget", "--tenant", "acme", "--yes"}, stdout: []string{"deleted 2 record(s) and 1 approval(s) and 1 standing grant(s) of tenant \"acme\" in " + st.where,
				"the tenant's standing grants are ended and gone: its calls that need approval wait for a person"}},
			{args: []string{"forget", "--tenant", "acme", "--yes"}, code: exitNotFound, stderr: []string{"tenant \"acme\" has no records in " + st.where}},
		} {
			r := cli(t, st.env, tc.args...)
			require.Equal(t, tc.code, r.code, "oncekey %s: %s%s", strings.Join(tc.args, " "), r.stdout, r.stderr)
			// Columns are padded to the widest value: compare with runs of spaces as one.
			words := func(s string) string { return strings.Join(strings.Fields(s), " ") }
			for _, want := range tc.stdout {
				require.Contains(t, words(r.stdout), words(want), "oncekey %s", strings.Join(tc.args, " "))
			}
			for _, want := range tc.stderr {
				require.Contains(t, words(r.stderr), words(want), "oncekey %s", strings.Join(tc.args, " "))
			}
		}
		// The effect of resolve --direct and forget, read from the store itself.
		rec, err := s.Get(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: unknown})
		require.ErrorIs(t, err, oncekeystore.ErrNotFound, "forget deleted the resolved record too: %+v", rec)
		r := cli(t, st.env, "list", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var views []recordView
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
		require.Len(t, views, 1)
		require.Equal(t, "globex", views[0].Tenant, "forget touches one tenant only")

		// The grant is gone, its reason with it, and a call of the tenant after the forget
		// waits for a person: the worker's lookup finds no grant, and none approves it.
		_, err = s.GetGrant(context.Background(), grant.ID)
		require.ErrorIs(t, err, oncekeystore.ErrNotFound)
		found, err := s.ListGrants(context.Background(), &oncekeystore.ListGrantsParams{Namespace: "default", Tenant: "acme", Tool: "Refund", Status: oncekeystore.GrantActive})
		require.NoError(t, err)
		require.Empty(t, found.Grants)
		later := seedApproval(t, s, "acme", "Refund", "wf-5", "refund", "refund 13.00 EUR")
		ap, err := s.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: later})
		require.NoError(t, err)
		_, err = s.ApproveByGrant(context.Background(), &oncekeystore.ApproveByGrantParams{Tenant: "acme", OperationKey: later, Episode: ap.Episode,
			Token: ap.Token, GrantID: grant.ID, WorkflowID: "wf-5", Retention: time.Hour})
		var na *oncekeystore.GrantNotActiveError
		require.ErrorAs(t, err, &na)
		ap, err = s.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: later})
		require.NoError(t, err)
		require.Equal(t, oncekeystore.ApprovalPending, ap.Status, "the call waits for a person")
		r = cli(t, st.env, "grants", "--status", "all", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		require.NotContains(t, r.stdout, "Jane Doe")
	})
}

// A store the CLI cannot open says what to do: an unknown scheme and a malformed Redis URL are
// usage errors, an unreachable Redis exit 4, Postgres flags beside a Redis store usage errors.
func TestStoreURLErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		code int
		want string
	}{
		{args: []string{"list", "--store", "mysql://app:secret@db/app"}, code: exitUsage,
			want: "--store mysql://xxxxx@db/app is not a store URL the CLI opens (scheme \"mysql\"): give --store (or ONCEKEY_STORE) one of postgres://, postgresql://, redis://, rediss://, unix://"},
		{args: []string{"list"}, env: map[string]string{storeEnv: "127.0.0.1:6379"}, code: exitUsage, want: "ONCEKEY_STORE 127.0.0.1:6379 is not a store URL the CLI opens"},
		{args: []string{"list", "--store", "redis://127.0.0.1:6379/0?prefx=a"}, code: exitUsage, want: "unexpected option: prefx; want redis://"},
		{args: []string{"list", "--store", "redis://127.0.0.1:6379/0?buckets=none"}, code: exitUsage, want: "buckets=none is not a positive number"},
		{args: []string{"list", "--store", "redis://127.0.0.1:6379", "--schema", "app"}, code: exitUsage, want: "--schema names a Postgres schema"},
		{args: []string{"list", "--store", "redis://127.0.0.1:6379", "--database-url", "postgres://db/app"}, code: exitUsage, want: "give the store once"},
		{args: []string{"migrate", "--database-url", "postgres://db/app"}, env: map[string]string{storeEnv: "postgres://db/other"}, code: exitUsage,
			want: "give the store once: ONCEKEY_STORE names it, so drop --database-url"},
		{args: []string{"stats", "--store", "redis://127.0.0.1:1", "--timeout", "5s"}, code: exitUnreachable,
			want: "cannot reach Redis at 127.0.0.1:1 db 0, prefix \"oncekey:\": dial tcp 127.0.0.1:1: connect: connection refused; try again when the server accepts connections, or set --store"},
	} {
		r := cli(t, tc.env, tc.args...)
		require.Equal(t, tc.code, r.code, "oncekey %s: %s", strings.Join(tc.args, " "), r.stderr)
		require.Contains(t, r.stderr, tc.want)
		require.NotContains(t, r.stderr, "secret", "a password is never printed")
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	}
}

// serve reads the inbox's queues, records and approvals from either store.
func TestServeOnEveryStore(t *testing.T) {
	eachStore(t, func(t *testing.T, st testStore) {
		unknown := seed(t, st.store, "acme", "Book", "wf-2", "book", oncekeystore.StatusUnknown, nil)
		waiting := seedApproval(t, st.store, "acme", "Refund", "wf-4", "refund", "refund 12.00 EUR")
		env := map[string]string{"TEMPORAL_ADDRESS": testenv.TemporalHostPort(t), "USER": "ines"}
		maps.Copy(env, st.env)
		base := startServe(t, env, "--listen", "127.0.0.1:0")
		get := func(path string) string {
			res, err := http.Get(base + path)
			require.NoError(t, err)
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", path, b)
			return string(b)
		}
		page := get("/")
		require.Contains(t, page, "Unknown outcomes")
		require.Contains(t, page, "refund 12.00 EUR", "the approval queue")
		require.Contains(t, get("/record?tenant=acme&key="+unknown), unknown)
		require.Contains(t, get("/approval?tenant=acme&key="+waiting), "refund 12.00 EUR")
	})
}

// A Redis that refuses the user or password is a configuration error (exit 5), which says where
// to fix it and never prints the password.
func TestRedisRefusedPassword(t *testing.T) {
	redisTestStore(t) // skips, or fails under CI, without Redis
	r := cli(t, nil, "list", "--store", "redis://nosuch-oncekey-user:secretpw@"+redisAddr()+"/0")
	require.Equal(t, exitConfig, r.code, r.stderr)
	require.Contains(t, r.stderr, "refused the user or password: WRONGPASS")
	require.Contains(t, r.stderr, "; fix them in --store (redis://user:password@host:6379/0)")
	require.NotContains(t, r.stderr, "secretpw")
}
