package main

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/docscheck"
)

// TestDocsNameRealCommands is the CLI half of the docs check in `make test`: every `oncekey <cmd>
// --flag` the repository's Markdown shows in code (and every command row of docs/cli.md) names a
// command and flags this CLI has. internal/testing/docscheck checks links, make targets and Go code.
func TestDocsNameRealCommands(t *testing.T) {
	r, err := docscheck.Load("../..")
	require.NoError(t, err)
	root := newRootCmd(&app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }})
	uses := r.CLIUses("oncekey", "docs/cli.md")
	require.NotEmpty(t, uses, "the docs show no oncekey command: is the parser broken?")
	for _, p := range docscheck.CheckCLI(root, uses) {
		t.Error(p)
	}
	if t.Failed() {
		t.Log("fix the docs above, or the CLI; `go run -C cmd/oncekey . <cmd> --help` lists a command's flags")
	}
}
