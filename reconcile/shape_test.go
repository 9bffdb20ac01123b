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

// TestPartialApprovalAnswerPinned pins the JSON of the decision update's answer to a partial
// approval (four eyes, oncekey.ApprovalPolicy.Signers): status pending with signers and
// signers_required, which the CLI, the inbox and clients in any language read as "recorded;
// waiting for another signer".
//
// CHANGING IT IS A BREAKING CHANGE (docs/compatibility.md): a client that reads the answer would
// take a partial approval for a decision, or miss that the call still waits.
func TestPartialApprovalAnswerPinned(t *testing.T) {
	out := reconcile.ApprovalOutput{Status: "pending", Episode: 1, Created: true, RequestID: "ada-1", Signers: 1, SignersRequired: 2}
	b, err := json.Marshal(out)
	require.NoError(t, err)
	require.JSONEq(t, `{"status":"pending","episode":1,"created":true,"request_id":"ada-1","signers":1,"signers_required":2}`, string(b))
	require.True(t, out.Waiting())
	require.Equal(t, "recorded; waiting for another signer (1 of 2)", out.SignersText())
	b, err = json.Marshal(reconcile.ApprovalOutput{Status: "approved", Episode: 1})
	require.NoError(t, err)
	require.NotContains(t, string(b), "signers", "a one-signer answer carries no signer counts")
}
