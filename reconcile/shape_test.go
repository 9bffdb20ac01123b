package reconcile_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/reconcile"
)

// TestResolutionShapePinned pins the JSON of reconcile.Resolution: the input of the
// oncekey.resolve signal and update, which scripts and clients in any language send
// (docs/settling-unknowns.md) and running reconciliation workflows decode.
//
// CHANGING IT IS A BREAKING CHANGE (docs/compatibility.md): a renamed or removed field, or a new
// outcome value, strands every sender. A new optional field is added to the pinned JSON below and
// to CHANGELOG.md in the same commit.
func TestResolutionShapePinned(t *testing.T) {
	full := reconcile.Resolution{
		Outcome:         reconcile.Applied,
		Epoch:           3,
		EffectReference: "TCK-0042",
		Result:          json.RawMessage(`{"id":"TCK-0042"}`),
		Note:            "found in the ticket system",
		ResolvedBy:      "ada",
		Tenant:          "acme",
		RequestID:       "ada-1",
		Signature:       json.RawMessage(`{"key_id":"ed25519:00","signature":"AA==","statement":{}}`),
	}
	const pinned = `{"outcome":"applied","epoch":3,"effect_reference":"TCK-0042","result":{"id":"TCK-0042"},` +
		`"note":"found in the ticket system","resolved_by":"ada","tenant":"acme","request_id":"ada-1",` +
		`"signature":{"key_id":"ed25519:00","signature":"AA==","statement":{}}}`
	b, err := json.Marshal(full)
	require.NoError(t, err)
	require.JSONEq(t, pinned, string(b))
	require.Equal(t, 9, reflect.TypeOf(full).NumField(), "Resolution has a new field: add it to the pinned JSON and to CHANGELOG.md")

	var back reconcile.Resolution
	require.NoError(t, json.Unmarshal([]byte(pinned), &back))
	require.Equal(t, full, back)

	b, err = json.Marshal(reconcile.Resolution{Outcome: reconcile.NotApplied, Epoch: 1})
	require.NoError(t, err)
	require.JSONEq(t, `{"outcome":"not_applied","epoch":1}`, string(b), "only outcome and epoch are required")

	require.Equal(t, reconcile.ResolutionOutcome("applied"), reconcile.Applied)
	require.Equal(t, reconcile.ResolutionOutcome("not_applied"), reconcile.NotApplied)
	require.Equal(t, reconcile.ResolutionOutcome("failed"), reconcile.Failed)
	require.Equal(t, reconcile.SignalName, reconcile.UpdateName, "one name for the signal and the update")
}
