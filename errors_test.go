package oncekey_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

// The fingerprint mismatch message names all three fixes, on one line.
func TestFingerprintMismatchMessage(t *testing.T) {
	msg := (&oncekey.FingerprintMismatchError{OperationKey: "ok1_k", Tool: "CreateTicket", Stored: "aaaa", Got: "bbbb"}).Error()
	require.NotContains(t, msg, "\n")
	for _, want := range []string{"different arguments", "new step ID", "Policy.Exclude", "Policy.Version"} {
		require.Contains(t, msg, want)
	}
}

// The unknown-outcome message ends with a resolve command that says which outcome flag to give,
// with --namespace, --tenant and --schema exactly when the CLI's defaults would miss them, and
// --direct when no reconciliation workflow waits for the key.
func TestIndeterminateOutcomeMessageNamesARunnableResolve(t *testing.T) {
	const key = "ok1_k"
	for _, c := range []struct {
		namespace, tenant, schema string
		unowned                   bool
		want                      string
	}{
		{"", "", "", false, "resolve it with `oncekey resolve ok1_k --epoch <epoch> --applied"},
		{"default", "default", "", false, "`oncekey resolve ok1_k --epoch <epoch> --applied"},
		{"default", "acme", "", false, "`oncekey resolve ok1_k --tenant acme --epoch <epoch> --applied"},
		{"prod", "prod", "", false, "`oncekey resolve ok1_k --namespace prod --epoch <epoch> --applied"},
		{"prod", "acme corp", "", false, "`oncekey resolve ok1_k --namespace prod --tenant 'acme corp' --epoch <epoch> --applied"},
		{"default", "default", "support", false, "`oncekey resolve ok1_k --schema support --epoch <epoch> --applied"},
		{"prod", "acme", "support", true, "write the decision to the store with `oncekey resolve ok1_k --direct --schema support --namespace prod --tenant acme --epoch <epoch> --applied"},
	} {
		e := &oncekey.IndeterminateOutcomeError{Namespace: c.namespace, Tenant: c.tenant, Schema: c.schema, Unowned: c.unowned,
			OperationKey: key, Tool: "T", Cause: errors.New("boom")}
		msg := e.Error()
		require.Contains(t, msg, c.want, "namespace %q tenant %q", c.namespace, c.tenant)
		require.True(t, strings.HasSuffix(msg, " --applied --ref <receipt> --result '<result JSON>'` (it landed), or the same with `--not-applied` (it did not) or `--failed`"), msg)
	}
	// With the epoch known, the command names it.
	e := &oncekey.IndeterminateOutcomeError{Namespace: "default", Tenant: "default", OperationKey: key, Tool: "T", Epoch: 3, Cause: errors.New("boom")}
	require.Contains(t, e.Error(), "`oncekey resolve ok1_k --epoch 3 --applied")
}
