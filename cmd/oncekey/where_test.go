package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
)

// withURL returns the tests' database URL with the role or database replaced.
func withURL(t *testing.T, user, database string) (url string, host string, port uint16) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testenv.DatabaseURL())
	require.NoError(t, err)
	c := cfg.ConnConfig
	if user == "" {
		user = c.User
	}
	if database == "" {
		database = c.Database
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?connect_timeout=5", user, c.Host, c.Port, database), c.Host, c.Port
}

// A role or a database the server does not have is a configuration error (exit 5), named as
// such, with the driver's text once; a server that does not answer is an outage (exit 4).
func TestConnectErrorsSayWhatIsWrong(t *testing.T) {
	needsServices(t)
	testenv.PostgresURL(t) // skips (or fails under CI) without Postgres

	url, host, port := withURL(t, "oncekey_no_such_role", "")
	r := cli(t, nil, "list", "--database-url", url)
	requireOneLine(t, r, exitConfig, fmt.Sprintf("Postgres at %s:%d refused role oncekey_no_such_role", host, port),
		"fix the role or password in --database-url, DATABASE_URL or PGUSER/PGPASSWORD")
	require.NotContains(t, r.stderr, "cannot reach")
	require.Equal(t, 1, strings.Count(r.stderr, `role "oncekey_no_such_role" does not exist`), "the driver's text once: %s", r.stderr)

	url, host, port = withURL(t, "", "oncekey_no_such_db")
	r = cli(t, nil, "migrate", "--dry-run", "--database-url", url)
	requireOneLine(t, r, exitConfig, fmt.Sprintf("Postgres at %s:%d (role ", host, port), `has no database "oncekey_no_such_db"`,
		"name an existing database in --database-url, DATABASE_URL or PGDATABASE")
	require.NotContains(t, r.stderr, "cannot reach")
	require.Equal(t, 1, strings.Count(r.stderr, `database "oncekey_no_such_db" does not exist`), "the driver's text once: %s", r.stderr)

	r = cli(t, nil, "list", "--database-url", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2")
	requireOneLine(t, r, exitUnreachable, "cannot reach Postgres at 127.0.0.1:1 as nobody (database \"x\")")
	require.Equal(t, 1, strings.Count(r.stderr, "connection refused"), "the driver's text once: %s", r.stderr)
}

// migrate and migrate --dry-run name the database and schema they work in, so a migration does
// not land unnoticed in another database than the one the workers use.
func TestMigrateNamesTheDatabase(t *testing.T) {
	needsServices(t)
	url, schema := testenv.PostgresURL(t)
	where := dbAt(t) + ", schema " + schema + " (the first of the search_path; --schema names another)"
	r := cli(t, nil, "migrate", "--dry-run", "--database-url", url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("dry run: would apply %d migration(s) in %s:", embeddedMigrations(t), where))
	r = cli(t, nil, "migrate", "--database-url", url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "migrations applied in "+where)
	r = cli(t, nil, "migrate", "--dry-run", "--database-url", url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "dry run: "+where+" is up to date")

	named := schema + "_m"
	t.Cleanup(func() {
		pool, err := pgxpool.New(t.Context(), url)
		if err == nil {
			_, _ = pool.Exec(t.Context(), "DROP SCHEMA IF EXISTS "+named+" CASCADE")
			pool.Close()
		}
	})
	r = cli(t, nil, "migrate", "--dry-run", "--database-url", url, "--schema", named)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "in "+dbAt(t)+", schema "+named+":")
}

// The missing-table error names the database and schema it looked in, and the migrate command it
// suggests, run with the same settings, creates the tables where the failing command looks.
func TestMissingTableErrorNamesTheDatabase(t *testing.T) {
	needsServices(t)
	url, schema := testenv.PostgresURL(t)
	env := map[string]string{"DATABASE_URL": url}
	r := cli(t, env, "stats")
	requireOneLine(t, r, exitFailed, "stats: the oncekey tables ", "in "+dbAt(t)+", schema "+schema, "`oncekey migrate`")
	require.Equal(t, 1, strings.Count(r.stderr, dbAt(t)), "named once: %s", r.stderr)
	cmds := suggested(t, r.stderr, nil)
	require.Len(t, cmds, 1)
	mr := cli(t, env, cmds[0]...)
	require.Equal(t, 0, mr.code, mr.stderr)
	r = cli(t, env, "stats")
	require.Equal(t, 0, r.code, "the suggested migrate fixed the failing command: %s", r.stderr)
}

// An error of a command that connected names the database even when the message itself is about
// something else (here: a record in the wrong state).
func TestErrorsNameTheDatabase(t *testing.T) {
	url, schema, s := namedSchema(t)
	env := map[string]string{"DATABASE_URL": url}
	key := seed(t, s, "acme", "Book", "wf-1", "book", oncekeystore.StatusApplied, nil)
	r := cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--schema", schema, "--direct", "--no-temporal-check", "--failed")
	requireOneLine(t, r, exitFailed, "is already applied", "("+dbAt(t)+", schema "+schema+")")
}

// list --tool matches the tool name exactly; when that finds nothing and a stored tool differs
// only in case, it says which.
func TestListToolHintsAtTheCase(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url}
	seed(t, s, "acme", "CreateTicket", "wf-1", "one", oncekeystore.StatusApplied, nil)

	r := cli(t, env, "list", "--tool", "createticket")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "no records match; tool names match exactly, in case too: did you mean --tool CreateTicket?")

	r = cli(t, env, "list", "--tool", "createticket", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, "[]", r.stdout, "JSON output stays JSON")
	require.Contains(t, r.stderr, "did you mean --tool CreateTicket?")

	r = cli(t, env, "list", "--tool", "NoSuchTool")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no records match\n", r.stdout)

	r = cli(t, env, "list", "--tool", "CreateTicket")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "CreateTicket")
}
