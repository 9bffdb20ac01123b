package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
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
	storeFlag   string
	address     string
	namespace   string
	schema      string
	timeout     time.Duration

	// pg is where the command connected to Postgres; nil before it connected.
	pg *pgTarget
	// where is the store the command connected to (a.pg for Postgres), named in its messages;
	// nil before it connected.
	where fmt.Stringer
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "oncekey",
		Short: "Inspect and operate oncekey's operation records",
		Long: "oncekey is the operator CLI for oncekey, which makes side-effecting Temporal activities safe to repeat.\n\n" +
			"Store: --store URL (postgres://… or redis://…), else ONCEKEY_STORE, else Postgres from --database-url, else\n" +
			"DATABASE_URL, else the libpq variables (PGHOST, PGUSER, PGDATABASE, ...).\n" +
			"Temporal (resolve, approve, deny and serve): --address, else TEMPORAL_ADDRESS, else " + defaultAddress + ".\n\n" +
			"Exit codes: 0 success, 1 operation failed, 2 usage error, 3 not found, 4 the store or Temporal unreachable,\n" +
			"5 the store refused the role, password or database name, 6 resolve, approve or deny delivered the decision but its\n" +
			"workflow did not confirm it in time (it lands once a worker runs the workflow).",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&a.storeFlag, "store", "", "the store's URL: postgres://user@host:5432/db or redis://host:6379/0?prefix=oncekey: (default: ONCEKEY_STORE, else Postgres from --database-url)")
	pf.StringVar(&a.databaseURL, "database-url", "", "Postgres URL (default: DATABASE_URL, else the libpq variables)")
	pf.StringVar(&a.address, "address", "", "Temporal frontend host:port (default: TEMPORAL_ADDRESS, else "+defaultAddress+")")
	pf.StringVar(&a.schema, "schema", "", "Postgres schema of oncekey's tables (default: the first schema of the search_path, normally public)")
	pf.StringVar(&a.namespace, "namespace", "", "Temporal namespace (default: TEMPORAL_NAMESPACE, else \"default\")")
	pf.DurationVar(&a.timeout, "timeout", 30*time.Second, "how long to wait for the store or Temporal to answer")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fail(exitUsage, "%v (see `%s --help`)", err, c.CommandPath())
	})
	root.AddCommand(
		newMigrateCmd(a),
		newListCmd(a),
		newShowCmd(a),
		newStatsCmd(a),
		newResolveCmd(a),
		newApprovalsCmd(a),
		newGrantsCmd(a),
		newApproveCmd(a),
		newDenyCmd(a),
		newPurgeCmd(a),
		newForgetCmd(a),
		newSetupCmd(a),
		newServeCmd(a),
		newIdentityCmd(a),
		newKeysCmd(a),
		newAuditCmd(a),
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

// pool connects to the Postgres the flags and environment name (see poolAt).
func (a *app) pool(ctx context.Context) (*pgxpool.Pool, error) {
	if !a.isPostgres() {
		return nil, fail(exitUsage, "this command needs Postgres, and %s names another store; point it at the Postgres database with --store postgres://…", a.storeSource())
	}
	return a.poolAt(ctx, a.storeURL())
}

// poolAt connects to Postgres at url ("" for --database-url, else DATABASE_URL, else the libpq
// variables), pings it and records where it connected (a.pg, a.where), so every later message
// can name the database. A role, password or database name the server refuses is a
// configuration error (exit 5), anything else that stops the connection an outage (exit 4); both
// give the driver's text once.
func (a *app) poolAt(ctx context.Context, url string) (*pgxpool.Pool, error) {
	if url == "" {
		url = a.databaseURL
	}
	if url == "" {
		url = a.getenv("DATABASE_URL")
	}
	if strayAt(url) {
		return nil, fail(exitUsage, "bad database URL %s: it holds an @ where a host or database belongs; %s", printable(redactURL(url)), encodeHint)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fail(exitUsage, "bad database URL %s: %s; %s", printable(redactURL(url)), parseConfigText(err), encodeHint)
	}
	// libpq variables are read by ParseConfig from the process environment.
	pgstore.ConfigurePool(cfg, &pgstore.Options{Schema: a.schema})
	cc := cfg.ConnConfig
	t := &pgTarget{host: cc.Host, port: cc.Port, user: cc.User, database: cc.Database}
	pctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	// Behind PgBouncer: no statement_timeout at startup, no prepared statements.
	if _, err := pgstore.DetectPooler(pctx, cfg); err != nil {
		return nil, a.connectError(t, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, a.connectError(t, err)
	}
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, a.connectError(t, err)
	}
	var db string
	var schema *string
	if err := pool.QueryRow(pctx, "SELECT current_database(), current_schema()").Scan(&db, &schema); err != nil {
		pool.Close()
		return nil, a.connectError(t, err)
	}
	t.database = db
	switch {
	case a.schema != "":
		t.schema = a.schema
	case schema != nil:
		t.schema, t.searchPath = *schema, true
	default:
		t.searchPath = true // no schema of the search_path exists
	}
	a.pg, a.where = t, t
	return pool, nil
}

// parseConfigText says why pgx could not parse a connection string: pgx's own phrase ("failed to
// parse as URL", "invalid port"), without the string and without the error under it, which can
// repeat part of a password (pgx masks it on a best-effort basis only).
func parseConfigText(err error) string {
	const unknown = "pgx cannot parse it"
	var pce *pgconn.ParseConfigError
	if !errors.As(err, &pce) {
		return unknown
	}
	c := *pce
	c.ConnString = ""
	text, ok := strings.CutPrefix(c.Error(), "cannot parse ``: ")
	if inner := errors.Unwrap(pce); inner != nil && ok {
		text, ok = strings.CutSuffix(text, " ("+inner.Error()+")")
	}
	if !ok || text == "" {
		return unknown
	}
	return oneLine(errors.New(text))
}

// pgTarget is where the CLI connected: the server, the role, the database and the schema
// oncekey's tables are looked for in.
type pgTarget struct {
	host     string
	port     uint16
	user     string
	database string
	// schema is --schema, else the first schema of the search_path ("" when none of it exists).
	schema string
	// searchPath is true when schema came from the search_path rather than --schema.
	searchPath bool
}

// server names the server and role: "127.0.0.1:5432 as root".
func (t *pgTarget) server() string {
	return fmt.Sprintf("%s:%d as %s", printable(t.host), t.port, printable(t.user))
}

// String names the database and the schema, for messages: `Postgres database "app" at
// 127.0.0.1:5432 as root, schema public (the first of the search_path)`.
func (t *pgTarget) String() string {
	return fmt.Sprintf("Postgres database %s at %s, schema %s", strconv.Quote(t.database), t.server(), t.schemaText())
}

// schemaText names the schema and where it came from.
func (t *pgTarget) schemaText() string {
	switch {
	case !t.searchPath:
		return t.schema
	case t.schema == "":
		return "(none: no schema of the search_path exists; --schema names one)"
	}
	return t.schema + " (the first of the search_path; --schema names another)"
}

// connectError reports a failed connection to t: exit 5 when the server refused the role, the
// password or the database name (retrying cannot help), else exit 4.
func (a *app) connectError(t *pgTarget, err error) error {
	const set = "set --database-url or DATABASE_URL=postgres://user@host:5432/db, or PGHOST/PGUSER/PGDATABASE"
	var pooler *pgstore.PoolerError
	if errors.As(err, &pooler) {
		return fail(exitConfig, "Postgres at %s: %s", t.server(), pooler.Error())
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		text := fmt.Sprintf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
		switch {
		case pgErr.Code == "3D000": // invalid_catalog_name
			return fail(exitConfig, "Postgres at %s:%d (role %s) has no database %s: %s; name an existing database in --database-url, DATABASE_URL or PGDATABASE (`oncekey migrate` creates oncekey's tables, not the database)",
				printable(t.host), t.port, printable(t.user), strconv.Quote(t.database), text)
		case strings.HasPrefix(pgErr.Code, "28"): // invalid_authorization_specification, invalid_password
			return fail(exitConfig, "Postgres at %s:%d refused role %s (database %s): %s; fix the role or password in --database-url, DATABASE_URL or PGUSER/PGPASSWORD",
				printable(t.host), t.port, printable(t.user), strconv.Quote(t.database), text)
		}
		return fail(exitUnreachable, "cannot use Postgres at %s (database %s): %s; try again when the server accepts connections, or %s",
			t.server(), strconv.Quote(t.database), text, set)
	}
	return fail(exitUnreachable, "cannot reach Postgres at %s (database %s): %s; %s", t.server(), strconv.Quote(t.database), driverText(err), set)
}

// driverText is the driver's text for a connection error, each distinct attempt's once: pgx tries
// again without TLS (sslmode=prefer) and on each address of a host, and its message repeats the
// same failure for each try.
func driverText(err error) string {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		if inner := errors.Unwrap(ce); inner != nil {
			err = inner
		}
	}
	var parts []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			parts = append(parts, oneLine(e))
		}
	} else {
		parts = strings.Split(err.Error(), "\n")
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range parts {
		p = strings.Join(strings.Fields(p), " ")
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}

// store opens the store the flags and environment name (openStore); call the func to close it.
func (a *app) store(ctx context.Context) (recordStore, func(), error) {
	return a.openStore(ctx)
}

// withPool connects to Postgres, runs fn with ctx and the pool and closes it. A connection error is
// returned as a.pool returns it.
func (a *app) withPool(ctx context.Context, fn func(ctx context.Context, pool *pgxpool.Pool) error) error {
	pool, err := a.pool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	return fn(ctx, pool)
}

// withStore opens the store, runs fn with ctx and the store and closes it. An error opening it
// is returned as the store's opener returns it.
func (a *app) withStore(ctx context.Context, fn func(ctx context.Context, s recordStore) error) error {
	s, closeStore, err := a.store(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	return fn(ctx, s)
}

// withTemporal dials the Temporal frontend, runs fn with ctx and the client and closes it. A dial error
// is returned as a.temporal returns it (exit code 4).
func (a *app) withTemporal(ctx context.Context, fn func(ctx context.Context, c client.Client) error) error {
	c, err := a.temporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

// temporalAddress is the Temporal frontend the CLI talks to: --address, else TEMPORAL_ADDRESS,
// else defaultAddress.
func (a *app) temporalAddress() string {
	if a.address != "" {
		return a.address
	}
	if addr := a.getenv("TEMPORAL_ADDRESS"); addr != "" {
		return addr
	}
	return defaultAddress
}

// temporal dials the Temporal frontend. Errors are exit code 4.
func (a *app) temporal(ctx context.Context) (client.Client, error) {
	addr := a.temporalAddress()
	dctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	c, err := client.DialContext(dctx, client.Options{HostPort: addr, Namespace: a.ns(), Logger: quietLogger{}})
	if err != nil {
		return nil, fail(exitUnreachable, "cannot reach Temporal at %s (namespace %s): %v; set --address or TEMPORAL_ADDRESS", addr, a.ns(), oneLine(err))
	}
	return c, nil
}

// noNamespace is the error of a command whose namespace Temporal does not have (exit 2: the
// flag or the variable is wrong).
func (a *app) noNamespace(err error) error {
	return fail(exitUsage, "Temporal has no namespace %s (%v); give --namespace, or TEMPORAL_NAMESPACE, the namespace your workers run in",
		shell.Word(a.ns()), oneLine(err))
}

// storeError maps a store error to an exit error.
func (a *app) storeError(op string, err error) error {
	var su *oncekeystore.StoreUnavailableError
	var schemaErr *oncekeystore.StoreSchemaError
	var pgErr *pgconn.PgError
	errors.As(err, &pgErr)
	errors.As(err, &schemaErr)
	switch {
	case errors.Is(err, oncekeystore.ErrNotFound):
		return fail(exitNotFound, "%s: %v", op, err)
	case noApprovalsTable(err):
		where := "this database"
		if a.pg != nil {
			where = a.pg.String()
		}
		return fail(exitFailed, "%s: %s has oncekey's records but no approvals table yet (pgstore migration 003_approvals); run `%s` with the same database settings to add it",
			op, where, a.db(shell.Migrate()))
	case pgErr != nil && pgErr.Code == "42P01":
		return a.missingTables(op, schemaErr)
	case errors.As(err, &su), errors.Is(err, context.DeadlineExceeded):
		return fail(exitUnreachable, "%s: %v", op, oneLine(err))
	}
	return fail(exitFailed, "%s: %v", op, oneLine(err))
}

// missingTables is the error of a command that found no oncekey tables where it looked: it names
// the database and schema it looked in (following a suggestion to migrate must create the tables
// where the command looks), the schemas of that database that hold them, and what to run.
func (a *app) missingTables(op string, schemaErr *oncekeystore.StoreSchemaError) error {
	where, in := "this database", "this schema"
	if a.pg != nil {
		where = a.pg.String()
		in = "schema " + a.pg.schema
		if a.pg.schema == "" {
			in = "a schema you name with --schema"
		}
	}
	if schemaErr != nil && len(schemaErr.Elsewhere) > 0 {
		pass := "--schema " + shell.Word(schemaErr.Elsewhere[0])
		if len(schemaErr.Elsewhere) > 1 {
			pass = "--schema with the one you meant"
		}
		return fail(exitFailed, "%s: the oncekey tables are not in %s; that database has them in schema %s: pass %s (or run `%s` to create them in %s)",
			op, where, strings.Join(schemaErr.Elsewhere, ", "), pass, a.db(shell.Migrate()), in)
	}
	return fail(exitFailed, "%s: the oncekey tables do not exist in %s; run `%s` with the same database settings to create them in %s, or point --database-url and --schema at the database that holds them",
		op, where, a.db(shell.Migrate()), in)
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
