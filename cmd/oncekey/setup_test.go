package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// setup search-attributes registers oncekey's search attributes on the namespace, is harmless
// the second time, and prints the Temporal UI filter that finds what waits.
func TestSetupSearchAttributes(t *testing.T) {
	needsServices(t)
	c := testenv.Temporal(t)
	env := map[string]string{"TEMPORAL_ADDRESS": testenv.TemporalHostPort(t)}
	r := cli(t, env, "setup", "search-attributes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(registered OncekeyStatus, OncekeyTenant, OncekeyTool, OncekeyWaitingSince in namespace default|has oncekey's search attributes already)`, r.stdout)
	require.Contains(t, r.stdout, reconcile.WaitingQuery)
	require.Contains(t, r.stdout, reconcile.ApprovalWaitingQuery)
	require.Eventually(t, func() bool { return worker.CheckSearchAttributes(t.Context(), c, "default") == nil }, 20*time.Second, 200*time.Millisecond)

	r = cli(t, env, "setup", "search-attributes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "namespace default has oncekey's search attributes already; nothing registered")

	r = cli(t, map[string]string{"TEMPORAL_ADDRESS": "127.0.0.1:1"}, "setup", "search-attributes", "--timeout", "2s")
	requireOneLine(t, r, exitUnreachable, "cannot reach Temporal at 127.0.0.1:1")
}
