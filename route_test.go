package oncekey_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

type mcpCall struct {
	Toolset string          `json:"toolset"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	CallID  string          `json:"call_id"`
}

type fileArgs struct {
	Path    string `json:"path"`
	TraceID string `json:"trace_id"`
}

func TestRouteNamesTheToolAndItsArguments(t *testing.T) {
	t.Parallel()
	r := oncekey.NewRegistry()
	require.NoError(t, r.Route("CallMcpTool", oncekey.Route{Tool: oncekey.ToolAt("toolset", "tool"), Args: "args"}))
	require.NoError(t, oncekey.SetTool[fileArgs](r, "files.delete", oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"trace_id"}}))
	require.NoError(t, oncekey.SetTool[fileArgs](r, "files.read", oncekey.Policy{Effect: oncekey.ReadOnly}))
	require.True(t, r.Routed("CallMcpTool"))
	require.False(t, r.Routed("files.delete"))

	doc := func(v mcpCall) json.RawMessage {
		b, err := oncekey.CanonicalArgs([]any{v})
		require.NoError(t, err)
		return b
	}
	del := mcpCall{Toolset: "files", Tool: "delete", Args: json.RawMessage(`{"path":"/a","trace_id":"x"}`), CallID: "c1"}
	res, ok, err := r.Resolve("CallMcpTool", doc(del))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "files.delete", res.Tool)
	require.Equal(t, oncekey.Effectful, res.Policy.Effect)
	require.False(t, res.Fallback)
	require.JSONEq(t, `{"path":"/a","trace_id":"x"}`, string(res.Args))

	// The call ID of the envelope and the excluded trace ID are not part of the call's identity.
	again := del
	again.CallID, again.Args = "c2", json.RawMessage(`{"trace_id":"y","path":"/a"}`)
	res2, _, err := r.Resolve("CallMcpTool", doc(again))
	require.NoError(t, err)
	op := func(res oncekey.Resolved) oncekey.Operation {
		return oncekey.Operation{Namespace: "default", Tenant: "t", WorkflowID: "w", RunID: "r", ActivityID: "1",
			Tool: res.Tool, ActivityType: "CallMcpTool", ArgsJSON: res.Args}
	}
	require.Equal(t, mustKey(t, res.Policy, op(res)), mustKey(t, res2.Policy, op(res2)))
	require.Equal(t, mustFingerprint(t, res.Policy, op(res)), mustFingerprint(t, res2.Policy, op(res2)))

	read := del
	read.Tool = "read"
	res, _, err = r.Resolve("CallMcpTool", doc(read))
	require.NoError(t, err)
	require.Equal(t, oncekey.ReadOnly, res.Policy.Effect)

	// Not recognised, or recognised without a policy: the fallback, Effectful by default.
	unknown := del
	unknown.Tool = "chmod"
	res, ok, err = r.Resolve("CallMcpTool", doc(unknown))
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, res.Fallback)
	require.Equal(t, "files.chmod", res.Tool)
	require.Equal(t, oncekey.Effectful, res.Policy.Effect)
	res, _, err = r.Resolve("CallMcpTool", json.RawMessage(`{"tool":7}`))
	require.NoError(t, err)
	require.Equal(t, "CallMcpTool", res.Tool, "an unrecognised call is named by its activity type")
	require.Equal(t, oncekey.Effectful, res.Policy.Effect)
	require.Equal(t, "null", string(res.Args))

	require.NoError(t, r.Route("Dynamic", oncekey.Route{Tool: oncekey.ToolAt("name"), Fallback: oncekey.Policy{Effect: oncekey.ReadOnly}}))
	res, _, err = r.Resolve("Dynamic", json.RawMessage(`{"name":"whatever"}`))
	require.NoError(t, err)
	require.Equal(t, oncekey.ReadOnly, res.Policy.Effect, "the user sets the fallback")
	require.JSONEq(t, `{"name":"whatever"}`, string(res.Args), "no Args path: the whole document")

	// Without a Route, the activity type is the tool.
	res, ok, err = r.Resolve("files.delete", json.RawMessage(`{"path":"/a"}`))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "files.delete", res.Tool)
	_, ok, err = r.Resolve("Nothing", json.RawMessage(`{}`))
	require.NoError(t, err)
	require.False(t, ok)
	_, _, err = r.Resolve("CallMcpTool", json.RawMessage(`{"a":1,"a":2}`))
	require.Error(t, err, "a member twice has no canonical form")

	var pe *oncekey.PolicyError
	require.ErrorAs(t, r.Route("X", oncekey.Route{}), &pe)
	require.ErrorAs(t, r.Route(" ", oncekey.Route{Tool: oncekey.ToolAt("t")}), &pe)
	require.ErrorAs(t, oncekey.SetTool[fileArgs](r, "files.write", oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"nope"}}), &pe,
		"SetTool checks fields against the input type")
}

func TestDefinitions(t *testing.T) {
	t.Parallel()
	r := oncekey.NewRegistry()
	send := func(ctx context.Context, in fileArgs) (string, error) { return "", nil }
	require.NoError(t, r.SetAs("SendFile", send, oncekey.Policy{Effect: oncekey.Effectful, Description: "Sends a file."}))
	require.NoError(t, r.Set("Ping", oncekey.Policy{Effect: oncekey.ReadOnly}))
	require.NoError(t, oncekey.SetTool[fileArgs](r, "files.touch", oncekey.Policy{Effect: oncekey.Idempotent}))

	defs, err := r.Definitions()
	require.NoError(t, err)
	require.Len(t, defs, 3)
	require.Equal(t, []string{"Ping", "SendFile", "files.touch"}, []string{defs[0].Name, defs[1].Name, defs[2].Name})
	require.Nil(t, defs[0].Input, "registered by name: input unknown")
	require.Equal(t, reflect.TypeFor[fileArgs](), defs[1].Input)
	require.Equal(t, "Sends a file. "+oncekey.EffectSentence(oncekey.Effectful), defs[1].Description)
	require.Equal(t, oncekey.EffectSentence(oncekey.ReadOnly), defs[0].Description)
	for _, e := range []oncekey.Effect{oncekey.ReadOnly, oncekey.Idempotent, oncekey.Effectful} {
		require.LessOrEqual(t, len(oncekey.EffectSentence(e)), 300)
	}
	require.Contains(t, oncekey.EffectSentence(oncekey.Effectful), "unknown")

	// A key-only tool stores nothing: its description does not promise a stored result.
	require.NoError(t, oncekey.SetTool[fileArgs](r, "files.upload", oncekey.Policy{Effect: oncekey.Idempotent, KeyOnly: true,
		Description: "Uploads a file."}))
	defs, err = r.Definitions("files.upload")
	require.NoError(t, err)
	require.Equal(t, "Uploads a file. "+oncekey.KeyOnlySentence, defs[0].Description)
	require.NotContains(t, defs[0].Description, "stored result")
	require.Contains(t, oncekey.EffectSentence(oncekey.Effectful), "in_flight")

	defs, err = r.Definitions("files.touch")
	require.NoError(t, err)
	require.Len(t, defs, 1)
	_, err = r.Definitions("nope")
	var pe *oncekey.PolicyError
	require.ErrorAs(t, err, &pe)
}
