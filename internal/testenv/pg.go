package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultDatabaseURL is the database tests use when TEST_DATABASE_URL is not set. Tests create
// and drop their own schemas in it; they never drop the database.
const DefaultDatabaseURL = "postgres://root@127.0.0.1:5432/test?sslmode=disable"

// DatabaseURL returns TEST_DATABASE_URL or DefaultDatabaseURL.
func DatabaseURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultDatabaseURL
}

// Missing skips t, or fails it when CI is set, because a service the test needs is missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("required service missing (CI is set, so this fails instead of skipping): %s", msg)
	}
	t.Skipf("service missing: %s", msg)
}

// PostgresURL creates a fresh schema in the test database, drops it in t.Cleanup, and returns a
// connection URL whose search_path is that schema, and the schema's name.
func PostgresURL(t testing.TB) (url, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	base := DatabaseURL()
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
