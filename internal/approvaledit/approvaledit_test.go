package approvaledit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
)

// EditArguments takes the tool's whole input as one object of its type, and nothing else.
func TestEditArguments(t *testing.T) {
	type in struct {
		OrderID string `json:"order_id"`
		Amount  int64  `json:"amount_cents"`
	}
	reg := oncekey.NewRegistry()
	require.NoError(t, oncekey.SetTool[in](reg, "Refund", oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{}}))
	require.NoError(t, oncekey.SetTool[in](reg, "Plain", oncekey.Policy{Effect: oncekey.Effectful}))
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
