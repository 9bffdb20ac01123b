package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/pgstore"
)

// defaultAddress is the Temporal frontend used when neither --address nor TEMPORAL_ADDRESS is set.
const defaultAddress = "127.0.0.1:7233"

// app is the CLI's state: streams, environment and the global flags.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	databaseURL string
	address     string
	namespace   string
	schema      string
	timeout     time.Duration
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "oncekey",
		Short: "Inspect and operate oncekey's operation records",
		Long: "oncekey is the operator CLI for oncekey, which makes side-effecting Temporal activities safe to repeat.\n\n" +
			"Postgres: --database-url, else DATABASE_URL, else the libpq variables (PGHOST, PGUSER, PGDATABASE, ...).\n" +
			"Temporal (resolve only): --address, else TEMPORAL_ADDRESS, else " + defaultAddress + ".\n\n" +
			"Exit codes: 0 success, 1 operation failed, 2 usage error, 3 not found, 4 Postgres or Temporal unreachable.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&a.databaseURL, "database-url", "", "Postgres URL (default: DATABASE_URL, else the libpq variables)")
	pf.StringVar(&a.address, "address", "", "Temporal frontend host:port (default: TEMPORAL_ADDRESS, else "+defaultAddress+")")
	pf.StringVar(&a.schema, "schema", "", "Postgres schema of oncekey's tables (default: the first schema of the search_path, normally public)")
	pf.StringVar(&a.namespace, "namespace", "", "Temporal namespace (default: TEMPORAL_NAMESPACE, else \"default\")")
	pf.DurationVar(&a.timeout, "timeout", 30*time.Second, "how long to wait for Postgres or Temporal to answer")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fail(exitUsage, "%v (see `%s --help`)", err, c.CommandPath())
	})
	root.AddCommand(
		newMigrateCmd(a),
		newListCmd(a),
		newShowCmd(a),
		newStatsCmd(a),
		newResolveCmd(a),
		newPurgeCmd(a),
		newForgetCmd(a),
	)
	return root
}

// ns returns the Temporal namespace (the default tenant too: the interceptor's default tenant is
// the namespace).
func (a *app) ns() string {
	if a.namespace != "" {
		return a.namespace
	}
	if v := a.getenv("TEMPORAL_NAMESPACE"); v != "" {
		return v
	}
	return "default"
}

// pool connects to Postgres and pings it. Errors are exit code 4 and say what to set.
func (a *app) pool(ctx context.Context) (*pgxpool.Pool, error) {
	url := a.databaseURL
	if url == "" {
		url = a.getenv("DATABASE_URL")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fail(exitUsage, "bad database URL: %v", err)
	}
	// libpq variables are read by ParseConfig from the process environment.
	pgstore.ConfigurePool(cfg, &pgstore.Options{Schema: a.schema})
	where := fmt.Sprintf("%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fail(exitUnreachable, "cannot reach Postgres at %s: %v; set --database-url or DATABASE_URL=postgres://user@host:5432/db, or PGHOST/PGUSER/PGDATABASE", where, err)
	}
	pctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fail(exitUnreachable, "cannot reach Postgres at %s: %v; set --database-url or DATABASE_URL=postgres://user@host:5432/db, or PGHOST/PGUSER/PGDATABASE", where, oneLine(err))
	}
	return pool, nil
}

// store connects and returns the pgstore over the pool; close the pool when done.
func (a *app) store(ctx context.Context) (*pgstore.Store, *pgxpool.Pool, error) {
	pool, err := a.pool(ctx)
	if err != nil {
		return nil, nil, err
	}
	return pgstore.New(pool, &pgstore.Options{Schema: a.schema}), pool, nil
}

// temporal dials the Temporal frontend. Errors are exit code 4.
func (a *app) temporal(ctx context.Context) (client.Client, error) {
	addr := a.address
	if addr == "" {
		addr = a.getenv("TEMPORAL_ADDRESS")
	}
	if addr == "" {
		addr = defaultAddress
	}
	dctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	c, err := client.DialContext(dctx, client.Options{HostPort: addr, Namespace: a.ns(), Logger: quietLogger{}})
	if err != nil {
		return nil, fail(exitUnreachable, "cannot reach Temporal at %s (namespace %s): %v; set --address or TEMPORAL_ADDRESS", addr, a.ns(), oneLine(err))
	}
	return c, nil
}

// storeError maps a store error to an exit error.
func (a *app) storeError(op string, err error) error {
	var su *oncekey.StoreUnavailableError
	var schemaErr *oncekey.StoreSchemaError
	var pgErr *pgconn.PgError
	errors.As(err, &pgErr)
	switch {
	case errors.Is(err, oncekey.ErrNotFound):
		return fail(exitNotFound, "%s: %v", op, err)
	case errors.As(err, &schemaErr) && len(schemaErr.Elsewhere) > 0 && pgErr != nil && pgErr.Code == "42P01":
		where := "the search_path"
		if a.schema != "" {
			where = "schema " + a.schema
		}
		pass := "--schema " + shell.Word(schemaErr.Elsewhere[0])
		if len(schemaErr.Elsewhere) > 1 {
			pass = "--schema with the one you meant"
		}
		return fail(exitFailed, "%s: the oncekey tables are not in %s; this database has them in schema %s: pass %s (or run `oncekey migrate%s` to create them in %s)",
			op, where, strings.Join(schemaErr.Elsewhere, ", "), pass, a.dbFlags(), where)
	case errors.As(err, &pgErr) && pgErr.Code == "42P01" && a.schema != "":
		return fail(exitFailed, "%s: the oncekey tables do not exist in schema %s; run `oncekey migrate%s` first, or pass the --schema that holds them (%s)", op, a.schema, a.dbFlags(), pgErr.Message)
	case errors.As(err, &pgErr) && pgErr.Code == "42P01":
		return fail(exitFailed, "%s: the oncekey tables do not exist in this database/schema; run `oncekey migrate` first, or pass --schema if the tables live in another schema (%s)", op, pgErr.Message)
	case errors.As(err, &su), errors.Is(err, context.DeadlineExceeded):
		return fail(exitUnreachable, "%s: %v", op, oneLine(err))
	}
	return fail(exitFailed, "%s: %v", op, oneLine(err))
}

// oneLine flattens an error message onto one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// quietLogger drops the Temporal client's logs; errors reach the user as the command's error.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
