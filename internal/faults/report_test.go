package faults

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A row outside the promise shows "measured" and its counts, on its row and on a line of their
// own, and stays out of the summary's counts; a promised row's counts are summed.
func TestWriteReportKeepsUnpromisedOutOfTheSummary(t *testing.T) {
	var b strings.Builder
	s := WriteReport(&b, map[string]Result{
		"soak":              {Scenario: "soak", Passed: true, Operations: 20000, Effects: 20000},
		"pg_failover_async": {Scenario: "pg_failover_async", Passed: true, Unpromised: true, DoubleEffects: 2, Lost: 3},
		"pg_failover_sync":  {Scenario: "pg_failover_sync", Passed: true, Lost: 1},
	})
	out := b.String()
	require.Regexp(t, `(?m)^pg_failover_async +measured +0 +0 +2 +3 +0 `, out)
	require.Contains(t, out, "faults: outside the promise (docs/stores.md#failover), measured, not in the summary: pg_failover_async double_effects=2 lost=3 stuck=0\n")
	require.True(t, strings.HasSuffix(out, "faults: passed=3 total="+strconv.Itoa(len(Scenarios))+" double_effects=0 lost=1 stuck=0\n"), out)
	require.Equal(t, Summary{Passed: 3, Total: len(Scenarios), Lost: 1}, s)
	require.False(t, s.OK())
}
