package oncekey_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/testing/shelltest"
)

// codeSpans returns the `…` spans of msg.
func codeSpans(msg string) []string {
	parts := strings.Split(msg, "`")
	var out []string
	for i := 1; i < len(parts); i += 2 {
		out = append(out, parts[i])
	}
	return out
}

// placeholders fills in the placeholders of a printed resolve command.
var placeholders = strings.NewReplacer("<receipt>", "R-1", "'<result JSON>'", "{}", "<epoch>", "1")

// The resolve command an unknown outcome's error prints carries a hostile namespace, tenant and
// schema as one inert word each: read back by bash, the command has exactly the values given.
func TestResolveCommandQuotesHostileValues(t *testing.T) {
	for _, v := range shell.Hostile {
		if strings.ContainsRune(v, 0) {
			continue // bash cannot hold a NUL in an argument; TestWordPrintsNothingActive covers it
		}
		for _, unowned := range []bool{false, true} {
			e := &oncekey.IndeterminateOutcomeError{Namespace: "ns-" + v, Tenant: "t-" + v, Schema: "s-" + v, OperationKey: "ok1_k",
				Tool: "T", Epoch: 2, Unowned: unowned, Cause: errors.New("boom")}
			spans := codeSpans(e.Error())
			require.Len(t, spans, 3, "%q: %s", v, e.Error())
			args := shelltest.Args(t, placeholders.Replace(spans[0]))
			want := []string{"oncekey", "resolve", "ok1_k"}
			if unowned {
				want = append(want, "--direct")
			}
			want = append(want, "--schema", "s-"+v, "--namespace", "ns-"+v, "--tenant", "t-"+v, "--epoch", "2",
				"--applied", "--ref", "R-1", "--result", "{}")
			require.Equal(t, want, args, "%q: %s", v, spans[0])
		}
	}
}
