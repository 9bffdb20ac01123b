package shell_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/shell"
)

// The oncekey builders start each command with its words and quote the values like Arg.
func TestOncekeyCommands(t *testing.T) {
	t.Parallel()
	for got, want := range map[*shell.Command]string{
		shell.Resolve("ok1_ab"):                  "oncekey resolve ok1_ab",
		shell.Show("ok1_ab"):                     "oncekey show ok1_ab",
		shell.Decide("approve", "ok1_ab", "a b"): "oncekey approve ok1_ab --tenant 'a b'",
		shell.Decide("deny", "ok1_ab", "t"):      "oncekey deny ok1_ab --tenant t",
		shell.List():                             "oncekey list",
		shell.ListUnknown():                      "oncekey list --status unknown",
		shell.Approvals():                        "oncekey approvals",
		shell.Migrate():                          "oncekey migrate",
		shell.Show("k;rm -rf /"):                 "oncekey show 'k;rm -rf /'",
	} {
		require.Equal(t, want, got.String())
	}
}
