package oncekey

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/stretchr/testify/require"
)

// The key of an edit is persisted in every record of an edited call. CHANGING IT IS A BREAKING
// CHANGE (docs/compatibility.md): it orphans those records.
func TestEditKeyPinned(t *testing.T) {
	k, err := EditKey("default", "acme", "ok1_0000000000000000000000000000000000000000000000000000000000000000", 1)
	require.NoError(t, err)
	require.Equal(t, "ok1_6e8fa8e7d675b807f3dc4c44cfa2bc1d670dfb1d3508ced85850640ea2f928b7", k)
	k2, err := EditKey("default", "acme", "ok1_0000000000000000000000000000000000000000000000000000000000000000", 2)
	require.NoError(t, err)
	require.NotEqual(t, k, k2, "each episode's edit has a key of its own")
	_, err = EditKey("default", "acme", "ok1_0", 0)
	require.ErrorIs(t, err, ErrNoKey)
}

// EditArguments takes the tool's whole input as one object of its type, and nothing else.
func TestEditArguments(t *testing.T) {
	type in struct {
		OrderID string `json:"order_id"`
		Amount  int64  `json:"amount_cents"`
	}
	reg := NewRegistry()
	require.NoError(t, SetTool[in](reg, "Refund", Policy{Effect: Effectful, Approval: &ApprovalPolicy{}}))
	require.NoError(t, SetTool[in](reg, "Plain", Policy{Effect: Effectful}))
	doc, v, err := EditArguments(reg, "Refund", json.RawMessage(`{"amount_cents":50}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"amount_cents":50,"order_id":""}`, string(doc), "a member left out holds its zero value")
	require.Equal(t, in{Amount: 50}, v)
	for args, want := range map[string]string{
		`{"amount_cents":50,"tool":"X"}`:      `unknown field "tool"`,
		`{"amount_cents":"50"}`:               "do not decode into",
		`[1]`:                                 "not a JSON object",
		`{"amount_cents":1} {"x":2}`:          "not valid JSON",
		`{"amount_cents":1,"amount_cents":2}`: "not valid JSON",
	} {
		_, _, err := EditArguments(reg, "Refund", json.RawMessage(args))
		require.ErrorContains(t, err, want, args)
	}
	_, _, err = EditArguments(reg, "Plain", json.RawMessage(`{}`))
	require.ErrorContains(t, err, "no approval policy")
	_, _, err = EditArguments(reg, "Nope", json.RawMessage(`{}`))
	require.ErrorContains(t, err, "no approval policy")

	require.Equal(t, []string{"amount_cents", "note"}, ChangedMembers(json.RawMessage(`{"a":1,"amount_cents":2,"note":"x"}`), json.RawMessage(`{"a":1,"amount_cents":3}`)))
	require.Empty(t, oncekeystore.ModelMessageProblem("Ask billing.\nThey will call."))
	require.NotEmpty(t, oncekeystore.ModelMessageProblem("red\x1b[31m"))
	require.NotEmpty(t, oncekeystore.ModelMessageProblem(strings.Repeat("x", oncekeystore.MaxModelMessageBytes+1)))
}
