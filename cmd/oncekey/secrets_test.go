package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// The credentials of the hostile store URLs below: no output of the CLI may hold any of them,
// whole or in part (each is a part of a password the URLs split somewhere).
var secretParts = []string{"Hunt3r", "K1tten", "97531"}

// hostileStoreURLs are store URLs and connection strings whose password a URL parser misreads
// or refuses: a "%" that is not an escape, a "/", "?", "#", "@" or ":" in the password, an
// unclosed "[", no scheme, an unknown scheme, a Postgres key=value string, a password in the
// query. Every server in them is 127.0.0.1 port 1, where nothing listens.
func hostileStoreURLs() []string {
	var us []string
	for _, base := range []string{"redis://user:%s@127.0.0.1:1/0", "postgres://root:%s@127.0.0.1:1/test"} {
		for _, pw := range []string{
			"Hunt3r%zzK1tten", "Hunt3r%K1tten", "Hunt3r/K1tten", "97531/K1tten", "Hunt3r#K1tten", "97531#K1tten",
			"Hunt3r?K1tten", "97531?K1tten", "Hunt3r@K1tten", "Hunt3r@97531@K1tten", "Hunt3r:K1tten", "Hunt3r K1tten",
		} {
			us = append(us, strings.Replace(base, "%s", pw, 1))
		}
	}
	return append(us,
		"redis://user:Hunt3r@[::1:1/0",
		"postgres://root:Hunt3r@[::1:1/test",
		"rediss://:Hunt3r%zz@127.0.0.1:1/0",
		"unix://:Hunt3r/K1tten@/tmp/oncekey-none.sock",
		"redis://127.0.0.1:1/0?password=Hunt3r",
		"postgres://root@127.0.0.1:1/test?password=Hunt3r&sslpassword=K1tten",
		"postgres://root@127.0.0.1:1/test?pass%77ord=Hunt3r",
		"postgres://root@127.0.0.1:1/test?password=Hunt3r@K1tten",
		"user:Hunt3r@127.0.0.1:1/0",
		"user:Hunt3r/K1tten@127.0.0.1:1",
		"u:Hunt3r://K1tten@127.0.0.1:1",
		"mysql://user:Hunt3r%zz@127.0.0.1:1/db",
		"mysql://user:97531/K1tten@127.0.0.1:1/db",
		"host=127.0.0.1 port=1 user=root password=Hunt3r dbname=test",
		"host=127.0.0.1 port=1 user=root password='Hunt3r K1tten' dbname=test",
		"host=127.0.0.1 port=1 user=root password = 'Hunt3r\\' K1tten' dbname=test",
		"host=127.0.0.1 port=1 user=root password=Hunt3r@K1tten dbname=test",
		"host=127.0.0.1 port=1 user=root PASSWORD=Hunt3r sslpassword=K1tten dbname=test",
	)
}

// requireNoSecret fails t when s holds a part of a hostile URL's password.
func requireNoSecret(t *testing.T, s, what string) {
	t.Helper()
	for _, p := range secretParts {
		require.NotContains(t, s, p, "%s holds a part of the password", what)
	}
}

func TestRedactURLHidesEveryPassword(t *testing.T) {
	for _, u := range hostileStoreURLs() {
		requireNoSecret(t, redactURL(u), u)
	}
	for u, want := range map[string]string{
		"redis://127.0.0.1:6379/0?prefix=oncekey:":       "redis://127.0.0.1:6379/0?prefix=oncekey:",
		"redis://:pw@127.0.0.1:6379/0?prefix=a":          "redis://xxxxx@127.0.0.1:6379/0?prefix=a",
		"postgres://root:pw@db:5432/app?sslmode=disable": "postgres://xxxxx@db:5432/app?sslmode=disable",
		"host=db user=root password='a b' dbname=app":    "host=db user=root password=xxxxx dbname=app",
		"postgres://db/app?user=root&password=pw&x=1":    "postgres://db/app?user=root&password=xxxxx",
		"u:p@host:6379": "xxxxx@host:6379",
		"":              "",
	} {
		require.Equal(t, want, redactURL(u), u)
	}
}

// storeSources are the ways a store URL reaches the CLI: a flag or a variable.
var storeSources = []struct {
	name string
	with func(args []string, env map[string]string, u string) []string
}{
	{"--store", func(args []string, _ map[string]string, u string) []string { return append(args, "--store", u) }},
	{storeEnv, func(args []string, env map[string]string, u string) []string { env[storeEnv] = u; return args }},
	{"--database-url", func(args []string, _ map[string]string, u string) []string { return append(args, "--database-url", u) }},
	{"DATABASE_URL", func(args []string, env map[string]string, u string) []string { env["DATABASE_URL"] = u; return args }},
}

// commandArgs are the arguments each command needs to get as far as opening the store; a
// command not here needs none.
func commandArgs(t *testing.T) map[string][]string {
	key := "ok1_" + strings.Repeat("0", 64)
	return map[string][]string{
		"oncekey show":           {key, "--tenant", "acme"},
		"oncekey approve":        {key, "--tenant", "acme"},
		"oncekey deny":           {key, "--tenant", "acme", "--reason", "no"},
		"oncekey resolve":        {key, "--tenant", "acme", "--epoch", "1", "--applied", "--direct", "--no-temporal-check"},
		"oncekey forget":         {"--tenant", "acme", "--yes"},
		"oncekey grants add":     {"Book", "--for", "1h"},
		"oncekey grants revoke":  {"g1_0"},
		"oncekey identity fetch": {"--workflow-id", "wf-1", "--out", t.TempDir()},
		"oncekey identity list":  {"history.json"},
		"oncekey audit":          {key, "--tenant", "acme", "--trust", emptyTrustList(t)},
	}
}

// emptyTrustList writes a trust list file with no keys and returns its path.
func emptyTrustList(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trust.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"keys":[]}`), 0o600))
	return path
}

// opensNoStore are the commands that talk to Temporal or read files only.
var opensNoStore = map[string]bool{
	"oncekey setup search-attributes": true,
	"oncekey identity fetch":          true,
	"oncekey identity list":           true,
	"oncekey keys gen":                true,
	"oncekey keys header-gen":         true,
}

// runnableCommands are the paths and arguments of every command of the CLI that runs (its cobra
// tree, so a command added later is covered without a change here).
func runnableCommands(t *testing.T) map[string][]string {
	extra := commandArgs(t)
	cmds := map[string][]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.HasParent() {
			words := strings.Fields(c.CommandPath())[1:]
			cmds[c.CommandPath()] = append(words, extra[c.CommandPath()]...)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(&app{}))
	return cmds
}

// Every command that opens a store gets that far with the arguments above: pointed at a Redis
// where nothing listens, it says it cannot reach it (exit 4), so the test below covers it.
func TestEveryStoreCommandOpensTheStore(t *testing.T) {
	cmds := runnableCommands(t)
	require.Contains(t, cmds, "oncekey serve")
	require.Contains(t, cmds, "oncekey grants add")
	for path, args := range cmds {
		if opensNoStore[path] {
			continue
		}
		env := map[string]string{storeEnv: "redis://127.0.0.1:1/0", "TEMPORAL_ADDRESS": "127.0.0.1:1"}
		r := cli(t, env, append(args, "--timeout", "5s")...)
		require.Equal(t, exitUnreachable, r.code, "%s: %s", path, r.stderr)
		require.Contains(t, r.stderr, "cannot reach Redis at 127.0.0.1:1", path)
	}
}

// No output of any command holds a part of the store's password, whatever the shape of its URL
// and whether --store, ONCEKEY_STORE, --database-url or DATABASE_URL gave it.
func TestNoCommandPrintsTheStorePassword(t *testing.T) {
	cmds := runnableCommands(t)
	for _, u := range hostileStoreURLs() {
		for _, src := range storeSources {
			for path, args := range cmds {
				env := map[string]string{"TEMPORAL_ADDRESS": "127.0.0.1:1"}
				argv := src.with(append(append([]string(nil), args...), "--timeout", "5s"), env, u)
				r := cli(t, env, argv...)
				what := path + " with " + src.name + "=" + u
				require.NotEqual(t, exitOK, r.code, "%s: %s", what, r.stdout)
				requireNoSecret(t, r.stdout, what+": stdout")
				requireNoSecret(t, r.stderr, what+": stderr")
			}
		}
	}
}
