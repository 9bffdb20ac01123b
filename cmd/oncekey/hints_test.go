package main

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// suggested returns the `oncekey …` commands a message suggests (between backticks), as
// arguments for cli: the leading "oncekey" dropped, placeholders filled in with fill.
func suggested(t *testing.T, msg string, fill map[string]string) [][]string {
	t.Helper()
	var out [][]string
	for _, m := range regexp.MustCompile("`oncekey ([^`]+)`").FindAllStringSubmatch(msg, -1) {
		line := m[1]
		for k, v := range fill {
			line = strings.ReplaceAll(line, k, v)
		}
		out = append(out, shellSplit(t, line))
	}
	return out
}

// shellSplit splits a command line the way a POSIX shell does for plain words and single quotes.
func shellSplit(t *testing.T, s string) []string {
	t.Helper()
	var (
		args   []string
		cur    strings.Builder
		inWord bool
		quoted bool
	)
	for _, r := range s {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			require.NotContains(t, `"\$`+"`", string(r), "a suggestion needs only plain words and single quotes: %s", s)
			cur.WriteRune(r)
			inWord = true
		}
	}
	require.False(t, quoted, "unbalanced quote in %s", s)
	if inWord {
		args = append(args, cur.String())
	}
	return args
}

// namedSchema migrates a fresh schema through --schema on a URL that does not select it (so a
// command that leaves --schema out looks elsewhere) and returns the URL, the schema and a store
// on it.
func namedSchema(t *testing.T) (string, string, *pgstore.Store) {
	t.Helper()
	needsServices(t)
	_, schema := testenv.PostgresURL(t)
	url := testenv.DatabaseURL()
	r := cli(t, nil, "migrate", "--database-url", url, "--schema", schema)
	require.Equal(t, 0, r.code, r.stderr)
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return url, schema, pgstore.New(pool, &pgstore.Options{Schema: schema})
}

// requireOneLine checks the CLI failed with code and one line on stderr holding every want.
func requireOneLine(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	require.Equal(t, code, r.code, "stdout %q stderr %q", r.stdout, r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "oncekey: "), r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	for _, w := range want {
		require.Contains(t, r.stderr, w)
	}
}

// A key not found says what was searched (tenant and schema) and what to run next; the commands
// it suggests run as printed and show the record's tenant.
func TestShowNotFoundSaysWhatToDo(t *testing.T) {
	url, schema, s := namedSchema(t)
	env := map[string]string{"DATABASE_URL": url}
	key := seed(t, s, "acme", "CreateTicket", "wf-1", "create_ticket", oncekeystore.StatusApplied, nil)

	// A key cut short (the user copied the first few characters).
	short := key[:8]
	r := cli(t, env, "show", short, "--schema", schema)
	requireOneLine(t, r, exitNotFound,
		"no record for "+short+" under tenant default in "+dbAt(t)+", schema "+schema,
		short+" is shorter than an operation key: keys are whole, ok1_ and 64 hex digits, as `oncekey list` prints them",
		"`oncekey list --schema "+schema+"`")
	cmds := suggested(t, r.stderr, nil)
	last := cmds[len(cmds)-1]
	lr := cli(t, env, last...)
	require.Equal(t, 0, lr.code, lr.stderr)
	require.Contains(t, lr.stdout, key, "the suggested list prints the whole key")

	// The whole key under the wrong tenant, given and defaulted.
	r = cli(t, env, "show", key, "--tenant", "globex", "--schema", schema)
	requireOneLine(t, r, exitNotFound,
		"no record for "+key+" under tenant globex in "+dbAt(t)+", schema "+schema+";",
		"`oncekey list --schema "+schema+"` shows each record's tenant",
		"`oncekey list --tenant globex --schema "+schema+"`",
		"run again with --tenant set to the record's tenant")
	require.NotContains(t, r.stderr, "shorter")
	for _, c := range suggested(t, r.stderr, nil) {
		lr := cli(t, env, c...)
		require.Equal(t, 0, lr.code, "%v: %s", c, lr.stderr)
	}
	lr = cli(t, env, suggested(t, r.stderr, nil)[0]...)
	require.Regexp(t, `(?m)^acme\s+`+key, lr.stdout, "the suggested list shows the record under its tenant")
	r = cli(t, env, "show", key, "--schema", schema)
	requireOneLine(t, r, exitNotFound, "under tenant default in "+dbAt(t)+", schema "+schema+" (the tenant defaults to the namespace)")
	r = cli(t, env, "show", key, "--tenant", "acme", "--schema", schema)
	require.Equal(t, 0, r.code, r.stderr)

	// Without --schema the message names the schema the search_path gave.
	url2, _, _ := migrated(t)
	r = cli(t, map[string]string{"DATABASE_URL": url2}, "show", key, "--tenant", "acme")
	schema2 := regexp.MustCompile(`search_path=(\w+)`).FindStringSubmatch(url2)[1]
	requireOneLine(t, r, exitNotFound, ", schema "+schema2+" (the first of the search_path; --schema names another)", "`oncekey list` shows each record's tenant")

	// A key of the right length that is not hex.
	r = cli(t, env, "show", oncekey.KeyPrefix+strings.Repeat("Z", 64), "--schema", schema)
	requireOneLine(t, r, exitNotFound, "is not an operation key: keys are ok1_ and 64 lower-case hex digits")
}

// forget on a tenant without records says so, naming the database and schema it looked in, and
// fails, --yes or not, so a mistyped tenant does not pass for an erasure; --allow-missing makes
// it succeed for scripts.
func TestForgetNamesTheSchemaItSearched(t *testing.T) {
	url, schema, s := namedSchema(t)
	env := map[string]string{"DATABASE_URL": url}
	seed(t, s, "acme", "T", "wf", "one", oncekeystore.StatusApplied, nil)
	where := "in " + dbAt(t) + `, schema ` + schema

	r := cli(t, env, "forget", "--tenant", "acmee", "--schema", schema)
	requireOneLine(t, r, exitNotFound, `tenant "acmee" has no records `+where, "`oncekey stats --schema "+schema+" --json`", "--allow-missing")
	sr := cli(t, env, suggested(t, r.stderr, nil)[0]...)
	require.Equal(t, 0, sr.code, sr.stderr)
	require.Contains(t, sr.stdout, `"acme": 1`)

	r = cli(t, env, "forget", "--tenant", "acmee", "--schema", schema, "--yes")
	requireOneLine(t, r, exitNotFound, `tenant "acmee" has no records `+where+": nothing to delete")
	require.Empty(t, r.stdout)
	for _, args := range [][]string{{"--yes"}, {}} {
		r = cli(t, env, append([]string{"forget", "--tenant", "acmee", "--schema", schema, "--allow-missing"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, `tenant "acmee" has no records `+where+": nothing to delete (--allow-missing)")
	}
	stats := cli(t, env, "stats", "--schema", schema, "--json")
	require.Contains(t, stats.stdout, `"acme": 1`, "the other tenant's record is untouched")

	r = cli(t, env, "forget", "--tenant", "acme", "--schema", schema, "--yes", "--allow-missing")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `deleted 1 record(s) of tenant "acme" `+where)
	seed(t, s, "acme", "T", "wf", "one", oncekeystore.StatusApplied, nil)

	r = cli(t, env, "forget", "--tenant", "acme", "--schema", schema)
	requireOneLine(t, r, exitUsage, "refusing without --yes", "1 record(s)")
}

// The resolve command an unknown outcome's error suggests is accepted by the CLI as printed (with
// its placeholders filled in): each outcome flag, with and without --namespace and --tenant.
func TestSuggestedResolveCommandsParse(t *testing.T) {
	key := oncekey.KeyPrefix + strings.Repeat("ab", 32)
	env := map[string]string{"TEMPORAL_ADDRESS": "127.0.0.1:1"}
	for _, c := range []struct{ namespace, tenant string }{{"default", "default"}, {"default", "acme"}, {"prod", "acme corp"}} {
		msg := (&oncekey.IndeterminateOutcomeError{Namespace: c.namespace, Tenant: c.tenant, OperationKey: key, Tool: "T", Cause: errors.New("boom")}).Error()
		cmds := suggested(t, msg, map[string]string{"<receipt>": "R-1", "<result JSON>": `{"id":"R-1"}`, "<epoch>": "1"})
		require.NotEmpty(t, cmds, msg)
		applied := cmds[0]
		require.Equal(t, []string{"resolve", key}, applied[:2])
		variants := [][]string{applied}
		base := applied[:len(applied)-5] // without --applied --ref R-1 --result JSON
		require.Equal(t, []string{"--applied", "--ref", "R-1", "--result", `{"id":"R-1"}`}, applied[len(base):])
		for _, alt := range regexp.MustCompile("`(--[a-z-]+)`").FindAllStringSubmatch(msg, -1) {
			variants = append(variants, append(append([]string(nil), base...), alt[1]))
		}
		require.Len(t, variants, 3)
		for _, v := range variants {
			r := cli(t, env, append(v, "--timeout", "2s")...)
			// Past flag checking the CLI dials Temporal, which is not there.
			requireOneLine(t, r, exitUnreachable, "cannot reach Temporal at 127.0.0.1:1 (namespace "+c.namespace+")")
		}
	}
}

// resolve for a key nothing waits on points to `oncekey show` with the --schema it was given, so
// the suggestion finds the record; a key cut short is named as such. An applied record is named
// as applied, by whom and when.
func TestResolveNothingWaitingSuggestsARunnableShow(t *testing.T) {
	url, schema, s := namedSchema(t)
	testenv.Temporal(t)
	env := map[string]string{"DATABASE_URL": url, "TEMPORAL_ADDRESS": testenv.TemporalHostPort(t)}
	key := seed(t, s, "acme", "Book", "wf-1", "book", oncekeystore.StatusUnknown, nil)

	r := cli(t, env, "resolve", key, "--epoch", "1", "--schema", schema, "--tenant", "acme", "--not-applied")
	requireOneLine(t, r, exitNotFound, "no reconciliation workflow is waiting for "+key+" in namespace default",
		"`oncekey show "+key+" --tenant acme --schema "+schema+"`")
	cmds := suggested(t, r.stderr, nil)
	require.Len(t, cmds, 2)
	sr := cli(t, env, cmds[0]...)
	require.Equal(t, 0, sr.code, sr.stderr)
	require.Regexp(t, `status\s+unknown`, sr.stdout)
	require.Equal(t, []string{"resolve", key, "--tenant", "acme", "--epoch", "1", "--address", env["TEMPORAL_ADDRESS"], "--schema", schema, "--direct", "--not-applied"}, cmds[1],
		"the --address this command was given (here TEMPORAL_ADDRESS) is carried")

	// An applied record: resolve says so, and who applied it when, instead of pointing at --direct.
	applied := seed(t, s, "acme", "Book", "wf-1", "book-2", oncekeystore.StatusApplied, nil)
	rec, err := s.Get(t.Context(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: applied})
	require.NoError(t, err)
	r = cli(t, env, "resolve", applied, "--epoch", "1", "--schema", schema, "--tenant", "acme", "--not-applied")
	requireOneLine(t, r, exitFailed,
		applied+" is already applied, by the tool's own run (workflow wf-1, step book-2) at "+rec.UpdatedAt.UTC().Format(time.RFC3339)+": no reconciliation waits for it and there is nothing to resolve",
		"`oncekey show "+applied+" --tenant acme --schema "+schema+"`", dbAt(t))
	require.NotContains(t, r.stderr, "--direct")
	// The --direct form finds the record too (and refuses it: it is not unknown).
	sr = cli(t, env, "resolve", applied, "--epoch", "1", "--tenant", "acme", "--schema", schema, "--direct", "--not-applied")
	requireOneLine(t, sr, exitFailed, applied+" is already applied: there is nothing to resolve", dbAt(t)+", schema "+schema)

	r = cli(t, env, "resolve", key[:10], "--epoch", "1", "--schema", schema, "--not-applied")
	requireOneLine(t, r, exitNotFound, key[:10]+" is shorter than an operation key", "`oncekey list --status unknown --schema "+schema+"`")
}

// A --schema without the tables is told to migrate that schema.
func TestMissingTablesInNamedSchemaSaysMigrateIt(t *testing.T) {
	needsServices(t)
	_, schema := testenv.PostgresURL(t)
	r := cli(t, map[string]string{"DATABASE_URL": testenv.DatabaseURL()}, "list", "--schema", schema)
	requireOneLine(t, r, exitFailed, "`oncekey migrate --schema "+schema+"`")
}
