package activities_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/activities"
)

// TestSignatureRefusedTypeShapePinned pins the member by which the approval and reconciliation
// workflows ask the decision activities for oncekey.SignatureRefused refusals. CHANGING IT IS A
// BREAKING CHANGE (docs/compatibility.md): the workflows of one worker version schedule the
// activities that another version runs, and a workflow that does not send it is refused as before
// (oncekey.InvalidResolution).
func TestSignatureRefusedTypeShapePinned(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(activities.DecideApprovalInput{SignatureRefusedType: true})
	require.NoError(t, err)
	require.Contains(t, string(b), `"signature_refused_type":true`)
	b, err = json.Marshal(activities.RecordInput{SignatureRefusedType: true})
	require.NoError(t, err)
	require.Contains(t, string(b), `"signature_refused_type":true`)
	b, err = json.Marshal(activities.DecideApprovalInput{})
	require.NoError(t, err)
	require.NotContains(t, string(b), "signature_refused_type", "absent unless asked for")
}
