package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/testing/shelltest"
)

// Every command the CLI suggests carries hostile values (tenant, namespace, schema, note,
// reference, resolver) as one inert word each.
func TestSuggestedCommandsQuoteHostileValues(t *testing.T) {
	key := oncekey.KeyPrefix + strings.Repeat("ab", 32)
	for _, v := range shell.Hostile {
		if strings.ContainsRune(v, 0) {
			continue
		}
		a := &app{schema: "s-" + v, namespace: "ns-" + v, getenv: func(string) string { return "" }}
		require.Equal(t, []string{"oncekey", "show", key, "--tenant", "t-" + v, "--schema", "s-" + v},
			shelltest.Args(t, a.showCommand(key, "t-"+v)))
		f := &resolveFlags{deciderFlags: deciderFlags{tenant: "t-" + v, by: "b-" + v}, epoch: 3, applied: true, ref: "r-" + v, note: "n-" + v}
		require.Equal(t, []string{"oncekey", "resolve", key, "--tenant", "t-" + v, "--epoch", "3", "--namespace", "ns-" + v,
			"--schema", "s-" + v, "--direct", "--applied", "--ref", "r-" + v, "--note", "n-" + v, "--by", "b-" + v},
			shelltest.Args(t, a.directCommand(key, f)))
		require.Equal(t, []string{"oncekey", "resolve", key, "--tenant", "t-" + v, "--epoch", "3", "--namespace", "ns-" + v,
			"--applied", "--ref", "r-" + v, "--note", "n-" + v, "--by", "b-" + v},
			shelltest.Args(t, a.normalCommand(key, f)))
		for _, cmd := range []string{a.showCommand(key, "t-"+v), a.directCommand(key, f)} {
			require.NotContains(t, cmd, "`")
		}
	}
}
