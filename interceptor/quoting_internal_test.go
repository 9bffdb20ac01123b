package interceptor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/shell/shelltest"
)

// The cancellation path's log names an `oncekey list` command; a hostile tenant or schema is one
// inert word in it.
func TestListUnknownCommandQuotesHostileValues(t *testing.T) {
	for _, v := range shell.Hostile {
		if strings.ContainsRune(v, 0) {
			continue
		}
		cmd := listUnknownCommand(v, "s-"+v)
		require.NotContains(t, cmd, "`")
		require.Equal(t, []string{"oncekey", "list", "--status", "unknown", "--tenant", v, "--schema", "s-" + v}, shelltest.Args(t, cmd), cmd)
	}
	require.Equal(t, "oncekey list --status unknown --tenant acme", listUnknownCommand("acme", ""))
}
