package oncekey_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/oncekeystore"
)

type sendV1 struct {
	To     string `json:"to"`
	Amount int    `json:"amount"`
}

type sendV2 struct {
	Recipient string `json:"recipient"`
	Amount    int    `json:"amount"`
}

func sendV1Tool(context.Context, sendV1) error { return nil }
func sendV2Tool(context.Context, sendV2) error { return nil }

// renameBack maps a v2 arguments document to the one v1 gave: "recipient" was "to".
func renameBack(args json.RawMessage) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil {
		return nil, err
	}
	m["to"] = m["recipient"]
	delete(m, "recipient")
	return json.Marshal(m)
}

func identityOp(args string) oncekey.Operation {
	return oncekey.Operation{Namespace: "ns", Tenant: "ns", WorkflowID: "wf", RunID: "r", ActivityID: "5", Tool: "Send",
		ArgsJSON: json.RawMessage(args)}
}

// Identities gives the call's identity under the policy, then under each older version: with a
// mapping of its arguments, the older version's key and fingerprint are the ones the older code
// derived for the same call.
func TestIdentitiesOfPreviousVersions(t *testing.T) {
	v1 := oncekey.Policy{Effect: oncekey.Effectful, Version: "1"}
	recorded := identityOp(`{"to":"ann@example.com","amount":5}`)
	wantKey, err := oncekey.Key(v1, recorded)
	require.NoError(t, err)
	wantFP, err := oncekey.KeyedFingerprint(v1, recorded, []byte("0123456789abcdef"))
	require.NoError(t, err)

	v2 := oncekey.Policy{Effect: oncekey.Effectful, Version: "2", Previous: []oncekey.PreviousVersion{
		{Version: "1", Args: renameBack},
		{Version: "0", Args: func(json.RawMessage) (json.RawMessage, error) { return nil, errors.New("not mappable") }},
		{Version: "1", Args: renameBack}, // a duplicate is left out
	}}
	now := identityOp(`{"recipient":"ann@example.com","amount":5}`)
	ids, err := oncekey.Identities(v2, now, []byte("0123456789abcdef"))
	require.NoError(t, err)
	require.Len(t, ids, 2, "the failing mapping and the duplicate are left out")
	require.Equal(t, "2", ids[0].Version)
	require.NotEqual(t, wantKey, ids[0].Key, "the renamed field changes the call's key")
	require.Equal(t, oncekey.Identity{Key: wantKey, Fingerprint: wantFP, Version: "1"}, ids[1])

	// Without Previous, only the current identity.
	ids, err = oncekey.Identities(oncekey.Policy{Effect: oncekey.Effectful}, now, nil)
	require.NoError(t, err)
	require.Len(t, ids, 1)
}

func TestPolicyOnHitKeyOnlyPreviousValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     oncekey.Policy
		field string
	}{
		{"fail fast on read-only", oncekey.Policy{Effect: oncekey.ReadOnly, OnHit: oncekey.OnHitFailFast}, "OnHit"},
		{"unknown on-hit", oncekey.Policy{Effect: oncekey.Effectful, OnHit: 7}, "OnHit"},
		{"key-only effectful", oncekey.Policy{Effect: oncekey.Effectful, KeyOnly: true}, "KeyOnly"},
		{"key-only with approval", oncekey.Policy{Effect: oncekey.Idempotent, KeyOnly: true, Approval: &oncekey.ApprovalPolicy{}}, "KeyOnly"},
		{"key-only with fail fast", oncekey.Policy{Effect: oncekey.Idempotent, KeyOnly: true, OnHit: oncekey.OnHitFailFast}, "KeyOnly"},
		{"key-only with previous", oncekey.Policy{Effect: oncekey.Idempotent, KeyOnly: true, Previous: []oncekey.PreviousVersion{{Version: "0"}}}, "KeyOnly"},
		{"previous is the current version", oncekey.Policy{Effect: oncekey.Effectful, Version: "2", Previous: []oncekey.PreviousVersion{{Version: "2"}}}, "Previous[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := oncekey.NewRegistry().Set(sendV1Tool, tc.p)
			var pe *oncekey.PolicyError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.field, pe.Field, err.Error())
		})
	}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(sendV1Tool, oncekey.Policy{Effect: oncekey.Idempotent, KeyOnly: true}))
	require.NoError(t, reg.Set(sendV2Tool, oncekey.Policy{Effect: oncekey.Effectful, OnHit: oncekey.OnHitFailFast, Version: "2",
		Previous: []oncekey.PreviousVersion{{Version: "1"}, {Version: "2", Args: renameBack}}}))
	require.Equal(t, "fail_fast", oncekey.OnHitFailFast.String())
}

func TestRepeatRefusedErrorSaysWhatToDo(t *testing.T) {
	e := &oncekey.RepeatRefusedError{OperationKey: "ok1_abc", Tool: "Send", Status: oncekeystore.StatusApplied}
	require.True(t, strings.Contains(e.Error(), "already applied") && strings.Contains(e.Error(), "oncekey show ok1_abc"), e.Error())
}

// The names oncekey writes into a claimed tool's result metadata. CHANGING ANY OF THEM IS A
// BREAKING CHANGE (docs/compatibility.md): workflows read the outcome and the key with Label, and
// okworker.CheckIdentity reads the key, fingerprint and version from recorded histories.
func TestResultMetadataNamesPinned(t *testing.T) {
	require.Equal(t, []string{"oncekey-outcome", "oncekey-operation-key", "oncekey-effect-reference", "oncekey-reason",
		"oncekey-fingerprint", "oncekey-version"},
		[]string{wire.MetadataOutcome, wire.MetadataOperationKey, wire.MetadataEffectReference, wire.MetadataReason,
			wire.MetadataFingerprint, wire.MetadataVersion})
}
