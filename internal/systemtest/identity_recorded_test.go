package systemtest_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/worker"
)

// The check reads every history of the replay suite (recorded on a dev server over every path:
// replays, re-runs after not applied, unknown outcomes and each resolution, timeouts,
// cancellations, approvals; some from before the workflow side sent the arguments header or the
// result carried its identity): each ticket workflow's calls are found, each reconciliation or
// approval workflow's history is refused as holding no protected call, and with CreateTicket's
// default policy the calls made under it are the same and the others are reported.
func TestCheckIdentityRecordedSuite(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	l := &ledger{}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(l.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	count := map[worker.IdentityStatus]int{}
	const refused = "refused"
	var changed []string
	for _, f := range files {
		h, err := worker.ReadHistoryFile(f)
		require.NoError(t, err, f)
		rep, err := worker.CheckIdentity(context.Background(), reg, worker.IdentityOptions{}, h)
		var he *worker.HistoryError
		if errors.As(err, &he) {
			// oncekey's own workflows call no protected tool, nor does a call denied before it
			// was scheduled.
			require.Contains(t, err.Error(), "holds no call of a protected tool")
			count[refused]++
			continue
		}
		require.False(t, strings.Contains(f, ".reconcile.") || strings.Contains(f, ".approval."), "%s holds no protected call", f)
		require.NoError(t, err, f)
		for _, r := range rep.Results {
			require.Equal(t, "CreateTicket", r.Tool)
			count[r.Status]++
			if r.Status == worker.IdentityChanged {
				changed = append(changed, filepath.Base(f))
			}
		}
	}
	t.Logf("calls: %v", count)
	require.GreaterOrEqual(t, count[worker.IdentitySame], 10)
	// The calls whose recorded key the default policy does not derive: three made under an
	// ExplicitKey policy (their tests' own), and one made without a step ID before such a call was
	// keyed by its arguments (it was keyed by its activity): a repeat of it now would be a new
	// operation, which is what the check is for.
	require.ElementsMatch(t, []string{
		"TestE2EInFlightThenReplay.in-flight-b.effectful.json",
		"TestE2ETwoWorkflowsOneResolution.two-blocked-a.effectful.json",
		"TestE2ETwoWorkflowsOneResolution.two-blocked-b.effectful.json",
		"TestE2ERerunTimesOutDefaultStep.rerun-timeout-default-step.effectful.json",
	}, changed)
}
