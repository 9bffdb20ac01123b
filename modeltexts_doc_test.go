package oncekey

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestModelTextsDocumented: docs/agent-loops.md's table of what the model reads (the rows after
// the "model-texts" marker) has one row per entry of the table of texts, with its status, next
// action, reason and exact text, and no other rows. `make docs` runs it.
func TestModelTextsDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("docs/agent-loops.md")
	require.NoError(t, err)
	doc := string(b)
	i := strings.Index(doc, "<!-- model-texts")
	require.GreaterOrEqual(t, i, 0, "docs/agent-loops.md has no model-texts table")
	var rows []ModelTextEntry
	for n, line := range strings.Split(doc[i:], "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			if n > 0 {
				break
			}
			continue
		}
		if strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| status ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		require.Len(t, cells, 6, "a row of six cells: %s", line)
		unquote := func(s string) string {
			s = strings.Trim(strings.TrimSpace(s), "`")
			if s == "-" {
				return ""
			}
			return s
		}
		rows = append(rows, ModelTextEntry{Status: Outcome(unquote(cells[0])), Next: unquote(cells[1]), Reason: unquote(cells[2]),
			Text: strings.TrimSpace(cells[5])})
	}
	require.Equal(t, modelTexts, rows, "docs/agent-loops.md's table of texts differs from result.go's: copy each text exactly, in the same order")
}
