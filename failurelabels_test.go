package oncekey

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/failure"
)

// TestFailureLabelsHaveTexts: every label of the failure table (internal/failure, which cannot
// import this package and so spells the values out) is a status, next action and reason of the
// table of texts for a model.
func TestFailureLabelsHaveTexts(t *testing.T) {
	t.Parallel()
	for _, r := range failure.Rows() {
		if r.Label == (failure.Label{}) {
			continue
		}
		found := false
		for _, e := range modelTexts {
			found = found || (e.Status == Outcome(r.Label.Status) && e.Next == r.Label.Next && e.Reason == r.Label.Reason)
		}
		require.True(t, found, "%s: label %+v has no text for a model", r.Type, r.Label)
	}
}
