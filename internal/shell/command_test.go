package shell_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/testing/shelltest"
)

// Every value given to a Command comes back from bash as exactly one word holding it, however
// hostile; placeholders stay as written.
func TestCommandQuotesEveryValue(t *testing.T) {
	for _, v := range shell.Hostile {
		if strings.ContainsRune(v, 0) {
			continue // no shell argument can hold a NUL; TestWordPrintsNothingActive covers it
		}
		c := shell.Cmd("oncekey", "resolve").Arg("k-"+v).Flag("--tenant", v).Int("--epoch", 3).FlagIf("--schema", "s-"+v).
			FlagIf("--note", "").Switch("--direct").Flag("--reason", "r "+v)
		require.Equal(t, []string{"oncekey", "resolve", "k-" + v, "--tenant", v, "--epoch", "3", "--schema", "s-" + v, "--direct", "--reason", "r " + v},
			shelltest.Args(t, c.String()), "%q: %s", v, c)
		require.NotContains(t, c.String(), "`", "%q", v)
	}
	c := shell.Cmd("oncekey", "deny").Arg("ok1_ab").Placeholder("--reason", "<why>").Placeholder("", "…")
	require.Equal(t, "oncekey deny ok1_ab --reason <why> …", c.String())
	require.Equal(t, "oncekey list --tenant ''", shell.Cmd("oncekey", "list").Flag("--tenant", "").String())
}

// printed matches the start of a command oncekey prints in a string literal: at the literal's
// start or after a backtick (a Markdown code span), `oncekey` with a subcommand (or a trailing
// space, for one concatenated after), `temporal` with one, or `chmod`.
var printed = regexp.MustCompile("(?:^|`)(?:oncekey (?:resolve|approve|deny|show|list|approvals|migrate|setup|stats|purge|forget|serve)(?: |`|$)|oncekey $|temporal (?:workflow|activity|operator|server|batch)(?: |`|$)|chmod )")

// No code of the repository builds a printed command with a value in it other than through
// Command: no string literal holds a command (see printed) whose text, up to its closing
// backtick, holds a format verb, or reaches the literal's end where the literal is concatenated
// with something else. Commands without values (`oncekey approvals`, `oncekey migrate`) may be
// written out.
func TestNoCommandBuiltOutsideCommand(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "the repository root")
	var bad []string
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if filepath.Dir(rel) == filepath.Join("internal", "shell") {
			return nil // the builder itself
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		concatenated := map[*ast.BasicLit]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && b.Op == token.ADD {
				for _, e := range []ast.Expr{b.X, b.Y} {
					if l, ok := e.(*ast.BasicLit); ok {
						concatenated[l] = true
					}
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			l, ok := n.(*ast.BasicLit)
			if !ok || l.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(l.Value)
			if err != nil {
				return true
			}
			for _, loc := range printed.FindAllStringIndex(v, -1) {
				start := loc[0]
				if v[start] == '`' {
					start++
				}
				span, closed := v[start:], false
				if end := strings.IndexByte(span, '`'); end >= 0 {
					span, closed = span[:end], true
				}
				if strings.Contains(span, "%") || (!closed && concatenated[l]) {
					bad = append(bad, fset.Position(l.Pos()).String()+": "+span)
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 100, "the walk read the repository's code")
	require.Empty(t, bad, "build these commands with shell.Cmd:\n%s", strings.Join(bad, "\n"))
}
