package docscheck

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestRepositoryDocs is the docs check of `make test`: every Markdown file of the repository has
// working links and anchors, names only make targets the Makefile has, and shows Go code only as
// excerpts of compiled files. cmd/oncekey's TestDocsNameRealCommands checks the CLI's commands and
// flags.
func TestRepositoryDocs(t *testing.T) {
	r, err := Load("../../..")
	require.NoError(t, err)
	require.NotEmpty(t, r.Docs)
	for _, p := range r.Check() {
		t.Error(p)
	}
	if t.Failed() {
		t.Log("fix the docs above; docs/testing.md#the-docs-check says what each check wants")
	}
}

func load(t *testing.T, fixture string) *Repo {
	t.Helper()
	r, err := Load("testdata/" + fixture)
	require.NoError(t, err)
	return r
}

func messages(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String() + "\n")
	}
	return b.String()
}

// The good fixture uses every form the checks accept: it must pass, or the checks below could
// fail for the wrong reason.
func TestGoodFixturePasses(t *testing.T) {
	r := load(t, "good")
	require.Len(t, r.Docs, 4)
	require.Empty(t, messages(r.Check()))
	require.Empty(t, messages(CheckCLI(fixtureCLI(), r.CLIUses("tool", "docs/cli.md"))))
}

func TestBrokenLinksFail(t *testing.T) {
	ps := load(t, "bad").CheckLinks()
	got := messages(ps)
	require.Contains(t, got, `README.md:5: link "docs/missing.md": docs/missing.md does not exist`)
	require.Contains(t, got, `README.md:6: link "docs/guide.md#no-such-heading": docs/guide.md has no heading for #no-such-heading`)
	require.Contains(t, got, `README.md:7: link "#nowhere": README.md has no heading for #nowhere`)
	require.Contains(t, got, `README.md:8: link "../outside.md" leaves the repository`)
	require.Len(t, ps, 4, got)
}

func TestUnknownMakeTargetFails(t *testing.T) {
	ps := load(t, "bad").CheckMakeTargets()
	got := messages(ps)
	require.Contains(t, got, "README.md:12: `make deploy`: the Makefile has no target \"deploy\"")
	require.Contains(t, got, "README.md:16: `make lint`: the Makefile has no target \"lint\"")
	require.Len(t, ps, 2, got)
}

func TestUncompiledSnippetFails(t *testing.T) {
	ps := load(t, "bad").CheckGoBlocks()
	got := messages(ps)
	require.Contains(t, got, "README.md:21: Go code block without a `<!-- code: path/to/file.go -->` line before it")
	require.Contains(t, got, `README.md:28: line 30 of the block ("return a - b") is not in example/example.go after the lines before it`)
	require.Contains(t, got, `README.md:35: line 37 of the block ("return a + b") is not in example/example.go after the lines before it`, "lines out of order")
	require.Contains(t, got, `README.md:41: code marker "testdata/x.go": testdata/x.go is not compiled by go vet ./... (under testdata)`)
	require.Contains(t, got, `README.md:46: code marker "example/missing.go": open`)
	require.Len(t, ps, 5, got)
}

func TestUnknownCLICommandOrFlagFails(t *testing.T) {
	r := load(t, "bad")
	ps := CheckCLI(fixtureCLI(), r.CLIUses("tool", "docs/cli.md"))
	got := messages(ps)
	require.Contains(t, got, "README.md:52: `tool run --fast`: \"tool run\" has no flag --fast")
	require.Contains(t, got, "README.md:53: `tool fly`: no such command (commands: run, status)")
	require.Contains(t, got, "docs/cli.md:5: `tool status --all`: \"tool status\" has no flag --all")
	require.Len(t, ps, 3, got)
}

// fixtureCLI is the command tree the fixtures' `tool` invocations are checked against.
func fixtureCLI() *cobra.Command {
	root := &cobra.Command{Use: "tool"}
	root.PersistentFlags().String("config", "", "")
	run := &cobra.Command{Use: "run NAME"}
	run.Flags().Bool("dry-run", false, "")
	status := &cobra.Command{Use: "status"}
	status.Flags().Bool("json", false, "")
	root.AddCommand(run, status)
	return root
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"The guarantee":                     "the-guarantee",
		"When nothing waits: `--direct`":    "when-nothing-waits---direct",
		"`pgstore.Options`":                 "pgstoreoptions",
		"1. The `oncekey` CLI":              "1-the-oncekey-cli",
		"Policies, effect classes and keys": "policies-effect-classes-and-keys",
		"A [linked](x.md) heading":          "a-linked-heading",
	} {
		require.Equal(t, want, Slug(in), in)
	}
}

func TestBrokenGoDocLinksFail(t *testing.T) {
	ps := load(t, "bad").CheckGoDocLinks()
	got := messages(ps)
	require.Contains(t, got, `example/example.go:1: link "docs/guide.md#nope": docs/guide.md has no heading for #nope`)
	require.Contains(t, got, `example/example.go:2: link "docs/gone.md": docs/gone.md does not exist`)
	require.Len(t, ps, 2, got)
}

func TestDocsPageWithoutPurposeOrIndexFails(t *testing.T) {
	ps := load(t, "bad").CheckDocsPages()
	got := messages(ps)
	require.Contains(t, got, `docs/orphan.md:1: the first line must say what the page helps you do`)
	require.Contains(t, got, `docs/orphan.md:1: docs/README.md, the index, does not link to this page`)
	require.Contains(t, got, `docs/guide.md:1: docs/README.md, the index, does not link to this page`)
	require.Contains(t, got, `docs/cli.md:1: the first line must say what the page helps you do`)
	require.Len(t, ps, 4, got)
}

func TestGoRunOfNoRootPackageFails(t *testing.T) {
	ps := load(t, "bad").CheckGoRun()
	got := messages(ps)
	require.Contains(t, got, "README.md:57: `go run ./nested`: nested is in the nested module nested")
	require.Contains(t, got, "README.md:57: `go run ./missing/...`: missing is not a directory of the repository")
	require.Len(t, ps, 2, got)
}
