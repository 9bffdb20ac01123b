package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncekey/oncekey/internal/dev/privatepg"
)

// DefaultDatabaseURL is the database tests use when TEST_DATABASE_URL is not set. Tests create
// and drop their own schemas in it; they never drop the database.
const DefaultDatabaseURL = "postgres://root@127.0.0.1:5432/test?sslmode=disable"

var ensureOnce sync.Once

// DatabaseURL returns TEST_DATABASE_URL or DefaultDatabaseURL. The first call creates that
// database when the server answers and has none of its name (see EnsureDatabase); a server
// that does not answer is left for the test to report (Missing).
func DatabaseURL() string {
	u := DefaultDatabaseURL
	if v := os.Getenv("TEST_DATABASE_URL"); v != "" {
		u = v
	}
	ensureOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = EnsureDatabase(ctx, u)
	})
	return u
}

// EnsureDatabase creates the database that url names when the server says it does not exist
// (SQLSTATE 3D000), connecting to the server's postgres database with the same user to do it.
// A database that exists, or that a concurrent test binary creates first, is left as it is.
func EnsureDatabase(ctx context.Context, url string) error {
	c, err := pgx.Connect(ctx, url)
	if err == nil {
		return c.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" {
		return err
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	name := cfg.Database
	cfg.Database = "postgres"
	admin, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("testenv: create database %s: %w", name, err)
	}
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	// 42P04 duplicate_database; 23505 when another binary's CREATE DATABASE commits first.
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("testenv: create database %s: %w", name, err)
	}
	return nil
}

// NotesEnv names a file (ONCEKEY_TEST_NOTES) to which Missing appends one line per skip, the
// message alone, so `make test`, whose plain go test output shows no skips, can print them.
const NotesEnv = "ONCEKEY_TEST_NOTES"

// Missing skips t, or fails it when CI is set, because a service the test needs is missing.
// A skip is also noted in the NotesEnv file when that is set.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("required service missing (CI is set, so this fails instead of skipping): %s", msg)
	}
	if path := os.Getenv(NotesEnv); path != "" {
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			_, _ = f.WriteString(strings.ReplaceAll(msg, "\n", " ") + "\n")
			_ = f.Close()
		}
	}
	t.Skipf("service missing: %s", msg)
}

// PostgresURL creates a fresh schema in the test database, drops it in t.Cleanup, and returns a
// connection URL whose search_path is that schema, and the schema's name.
func PostgresURL(t testing.TB) (url, schema string) {
	t.Helper()
	return SchemaIn(t, DatabaseURL())
}

// SchemaIn is PostgresURL in the database base names (a PrivatePostgres's URL, say).
func SchemaIn(t testing.TB, base string) (url, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		Missing(t, "postgres at %s: %v", base, err)
	}
	defer conn.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = "t_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("testenv: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("testenv: drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Logf("testenv: drop schema %s: %v", schema, err)
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	// pgx passes unknown URL parameters to the server as run-time parameters.
	return base + sep + "search_path=" + schema, schema
}

// Postgres returns a pool on a fresh schema (search_path set to it), closed and dropped in
// t.Cleanup.
func Postgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url, _ := PostgresURL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("testenv: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		Missing(t, "postgres ping: %v", err)
	}
	return pool
}

// PrivatePostgres starts a Postgres instance of the test's own (privatepg.Start: initdb into a
// temporary directory, a free port of 127.0.0.1, fsync off) for a test that stops or restarts
// the server, so no shared server is ever touched; t.Cleanup stops it and removes its data, and
// prints its log when the test failed. Without the server's binaries (initdb) it skips t, or
// fails it when CI is set (Missing; .ci/run installs them). Its URL connects to the database
// postgres as a superuser.
func PrivatePostgres(t testing.TB) *privatepg.Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := privatepg.Start(ctx, privatepg.Options{Settings: map[string]string{"fsync": "off"}})
	if errors.Is(err, privatepg.ErrNoPostgres) {
		Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatalf("testenv: private postgres: %v", err)
	}
	t.Cleanup(func() { closeLogged(t, "postgres", pg) })
	return pg
}

// PrivateFailoverPair starts a private primary (PrivatePostgres's settings) and a hot standby
// streaming from it (privatepg.StartStandby), for a test that kills the primary and promotes
// the standby. With sync, the primary runs synchronous_commit=on and
// synchronous_standby_names='*', so a commit returns only once the standby has flushed it;
// without, the standby is asynchronous (synchronous_standby_names empty). It returns once the
// standby streams (and, with sync, is the synchronous one). Both are stopped and removed in
// t.Cleanup, their logs printed when the test failed. Missing binaries skip t, or fail it under
// CI (Missing).
func PrivateFailoverPair(t testing.TB, sync bool) (primary, standby *privatepg.Instance) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	settings := map[string]string{"fsync": "off", "synchronous_commit": "on"}
	if sync {
		settings["synchronous_standby_names"] = "*"
	}
	primary, err := privatepg.Start(ctx, privatepg.Options{Settings: settings})
	if errors.Is(err, privatepg.ErrNoPostgres) {
		Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatalf("testenv: private primary: %v", err)
	}
	t.Cleanup(func() { closeLogged(t, "primary", primary) })
	standby, err = privatepg.StartStandby(ctx, primary, privatepg.Options{Settings: map[string]string{"fsync": "off"}})
	if err != nil {
		t.Fatalf("testenv: private standby: %v", err)
	}
	t.Cleanup(func() { closeLogged(t, "standby", standby) })
	want := "async"
	if sync {
		want = "sync"
	}
	c, err := pgx.Connect(ctx, primary.URL)
	if err != nil {
		t.Fatalf("testenv: private primary: %v", err)
	}
	defer c.Close(context.Background())
	for {
		var state string
		err := c.QueryRow(ctx, `SELECT coalesce(max(sync_state), '') FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&state)
		if err != nil {
			t.Fatalf("testenv: private primary: pg_stat_replication: %v", err)
		}
		if state == want {
			return primary, standby
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: the standby on port %d does not stream as %s (sync_state %q)", standby.Port, want, state)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func closeLogged(t testing.TB, what string, pg *privatepg.Instance) {
	if t.Failed() {
		t.Logf("testenv: log of the private %s on port %d:\n%s", what, pg.Port, pg.Log())
	}
	pg.Close()
}

// PgBouncer starts a private PgBouncer in transaction mode (privatepg.StartPgBouncer, four
// server connections per database and role) in front of the server base names, and returns
// base with its host and port replaced by PgBouncer's: the same database and role, every
// transaction (and every statement outside one) on whichever server connection is free.
// PgBouncer passes on no search_path, so a test names its schema itself (SchemaIn's schema in
// pgstore.Options.Schema). t.Cleanup stops it, printing its log when the test failed. Without
// the pgbouncer binary it skips t, or fails it when CI is set (Missing; .ci/run installs it).
func PgBouncer(t testing.TB, base string) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(base)
	if err != nil {
		t.Fatalf("testenv: pgbouncer: parse %s: %v", base, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := privatepg.StartPgBouncer(ctx, privatepg.PgBouncerOptions{Host: cfg.Host, Port: int(cfg.Port), Users: []string{cfg.User}})
	if errors.Is(err, privatepg.ErrNoPgBouncer) {
		Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatalf("testenv: pgbouncer: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testenv: log of the private pgbouncer on port %d (%s):\n%s", b.Port, b.Version, b.Log())
		}
		b.Close()
	})
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		t.Fatalf("testenv: pgbouncer: %s is not a postgres:// URL", base)
	}
	u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))
	return u.String()
}
