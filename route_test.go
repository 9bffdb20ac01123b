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
	require.NoError(t, r.Route("CallMcpTool", oncekey.Route{ToolPaths: []string{"toolset", "tool"}, Args: "args"}))
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

	// Named, without a policy: the fallback, oncekey.Effectful by default.
	unknown := del
	unknown.Tool = "chmod"
	res, ok, err = r.Resolve("CallMcpTool", doc(unknown))
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, res.Fallback)
	require.Equal(t, "files.chmod", res.Tool)
	require.Equal(t, oncekey.Effectful, res.Policy.Effect)
	// Not named: no fallback, no key.
	_, ok, err = r.Resolve("CallMcpTool", json.RawMessage(`{"tool":7}`))
	var re *oncekey.RouteError
	require.ErrorAs(t, err, &re)
	require.False(t, ok)

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

// ToolExecutorInput is the input of the one generic activity through which an agent loop runs
// every tool (the shape of Temporal's Go agent-loop recipe): the tool's name and its arguments
// as the model wrote them.
type ToolExecutorInput struct {
	ToolName  string                 `json:"tool_name"`
	Arguments map[string]interface{} `json:"arguments"`
}

func ToolExecutor(ctx context.Context, in ToolExecutorInput) (string, error) { return "", nil }

func ToolExecutorTwo(ctx context.Context, call string, in ToolExecutorInput) (string, error) {
	return "", nil
}

// A Route given the activity's function checks its paths against the input's JSON members when
// it is registered: a Route whose paths do not resolve is never registered.
func TestRouteChecksPathsAtRegistration(t *testing.T) {
	t.Parallel()
	r := oncekey.NewRegistry()
	refused := func(rt oncekey.Route, field string, says ...string) {
		t.Helper()
		var pe *oncekey.PolicyError
		require.ErrorAs(t, r.Route(ToolExecutor, rt), &pe)
		require.Equal(t, "ToolExecutor", pe.Tool)
		require.Equal(t, field, pe.Field)
		for _, s := range says {
			require.Contains(t, pe.Error(), s)
		}
		require.False(t, r.Routed("ToolExecutor"), "a refused Route is not registered")
	}
	members := `its JSON fields are "tool_name", "arguments"`
	// The docs' MCP line copied onto this input: both paths wrong; the Args path alone; the tool path alone.
	refused(oncekey.Route{ToolPaths: []string{"tool"}, Args: "args"}, "Route.ToolPaths", `path "tool"`, members)
	refused(oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "args"}, "Route.Args", `path "args"`, members)
	refused(oncekey.Route{ToolPaths: []string{"tool"}, Args: "arguments"}, "Route.ToolPaths", `path "tool"`, members)
	refused(oncekey.Route{ToolPaths: []string{"ToolName"}, Args: "arguments"}, "Route.ToolPaths", "JSON names are exact")
	refused(oncekey.Route{ToolPaths: []string{"arguments"}, Args: "arguments"}, "Route.ToolPaths", "not a string")
	refused(oncekey.Route{ToolPaths: []string{"tool_name.x"}, Args: "arguments"}, "Route.ToolPaths", "no fields")
	refused(oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "arguments..x"}, "Route.Args", "empty segment")
	refused(oncekey.Route{ToolPaths: []string{""}}, "Route.ToolPaths", "empty segment")
	refused(oncekey.Route{Args: "arguments"}, "Route.ToolPaths", "required")
	refused(oncekey.Route{ToolPaths: []string{"tool_name"}, Tool: oncekey.ToolAt("tool_name")}, "Route.Tool", "not both")

	var pe *oncekey.PolicyError
	require.ErrorAs(t, r.Route(func(context.Context, ToolExecutorInput) (string, error) { return "", nil },
		oncekey.Route{ToolPaths: []string{"tool_name"}}), &pe, "a function literal has no usable name")
	require.Equal(t, "activity", pe.Field)

	require.NoError(t, r.Route(ToolExecutor, oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "arguments"}))
	require.True(t, r.Routed("ToolExecutor"))
	require.NoError(t, r.Route(ToolExecutor, oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "arguments.inner"}),
		"a path into a map is the map's business")
	require.NoError(t, r.Route(ToolExecutor, oncekey.Route{Tool: oncekey.ToolAt("tool"), Args: "arguments"}),
		"a Tool function cannot be checked before the call")

	// An activity registered under a name of its own: RouteAs checks against the function's type.
	require.ErrorAs(t, r.RouteAs("tools", ToolExecutor, oncekey.Route{ToolPaths: []string{"tool"}, Args: "arguments"}), &pe)
	require.Equal(t, "Route.ToolPaths", pe.Field)
	require.False(t, r.Routed("tools"))
	require.NoError(t, r.RouteAs("tools", func(context.Context, ToolExecutorInput) (string, error) { return "", nil },
		oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "arguments"}))
	require.True(t, r.Routed("tools"))
	require.ErrorAs(t, r.RouteAs("other", "ToolExecutor", oncekey.Route{ToolPaths: []string{"tool_name"}}), &pe, "RouteAs needs a function")

	// Several arguments: a path starts with the argument's index.
	require.NoError(t, r.Route(ToolExecutorTwo, oncekey.Route{ToolPaths: []string{"1.tool_name"}, Args: "1.arguments"}))
	require.ErrorAs(t, r.Route(ToolExecutorTwo, oncekey.Route{ToolPaths: []string{"tool_name"}}), &pe)
	require.ErrorAs(t, r.Route(ToolExecutorTwo, oncekey.Route{ToolPaths: []string{"1.tool"}}), &pe)
	require.NoError(t, r.Route(ToolExecutorTwo, oncekey.Route{ToolPaths: []string{"0"}}), "the first argument is a string")
}

// A Route registered by name meets its paths at the first call: a call it cannot name, or whose
// arguments are not there, is a *RouteError and is never keyed; a tool it names without a policy
// takes the Fallback.
func TestRouteRefusesCallsItCannotName(t *testing.T) {
	t.Parallel()
	doc := func(v any) json.RawMessage {
		b, err := oncekey.CanonicalArgs([]any{v})
		require.NoError(t, err)
		return b
	}
	weather := doc(ToolExecutorInput{ToolName: "get_weather", Arguments: map[string]interface{}{"city": "Lyon"}})
	ticket := doc(ToolExecutorInput{ToolName: "create_ticket", Arguments: map[string]interface{}{"subject": "refund"}})
	for _, tc := range []struct {
		name        string
		route       oncekey.Route
		field, path string
	}{
		{"both paths wrong", oncekey.Route{ToolPaths: []string{"tool"}, Args: "args"}, "Route.ToolPaths", "tool"},
		{"args path wrong", oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "args"}, "Route.Args", "args"},
		{"tool path wrong", oncekey.Route{ToolPaths: []string{"tool"}, Args: "arguments"}, "Route.ToolPaths", "tool"},
		{"ToolAt path wrong", oncekey.Route{Tool: oncekey.ToolAt("tool"), Args: "arguments"}, "Route.Tool", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := oncekey.NewRegistry()
			require.NoError(t, r.Route("ToolExecutor", tc.route), "by name: the input type is unknown")
			require.NoError(t, oncekey.SetTool[map[string]interface{}](r, "create_ticket", oncekey.Policy{Effect: oncekey.Effectful}))
			require.NoError(t, oncekey.SetTool[map[string]interface{}](r, "get_weather", oncekey.Policy{Effect: oncekey.ReadOnly}))
			for _, args := range []json.RawMessage{weather, ticket} {
				res, ok, err := r.Resolve("ToolExecutor", args)
				var re *oncekey.RouteError
				require.ErrorAs(t, err, &re)
				require.False(t, ok)
				require.Equal(t, oncekey.Resolved{}, res, "nothing to key the call by")
				require.Equal(t, "ToolExecutor", re.ActivityType)
				require.Equal(t, tc.field, re.Field)
				require.Equal(t, tc.path, re.Path)
				require.Equal(t, []string{"arguments", "tool_name"}, re.Members)
				require.Contains(t, re.Error(), `the members there are "arguments", "tool_name"`)
				require.Contains(t, re.Error(), "nothing was claimed")
			}
		})
	}

	r := oncekey.NewRegistry()
	require.NoError(t, r.Route("ToolExecutor", oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "arguments"}))
	require.NoError(t, oncekey.SetTool[map[string]interface{}](r, "get_weather", oncekey.Policy{Effect: oncekey.ReadOnly}))
	res, ok, err := r.Resolve("ToolExecutor", weather)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "get_weather", res.Tool)
	require.Equal(t, oncekey.ReadOnly, res.Policy.Effect)
	require.JSONEq(t, `{"city":"Lyon"}`, string(res.Args))
	res, ok, err = r.Resolve("ToolExecutor", ticket)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, res.Fallback, "a tool named without a policy takes the Fallback")
	require.Equal(t, "create_ticket", res.Tool)
	require.Equal(t, oncekey.Effectful, res.Policy.Effect)

	res, _, err = r.Resolve("ToolExecutor", doc(ToolExecutorInput{ToolName: "get_weather"}))
	require.NoError(t, err)
	require.Equal(t, "null", string(res.Args), "arguments that are there and null are the tool's arguments")

	for in, says := range map[string]string{
		`{"tool_name":"","arguments":{}}`:            `"tool_name" is blank`,
		`{"tool_name":"  ","arguments":{}}`:          `"tool_name" is blank`,
		`{"tool_name":null,"arguments":{}}`:          `"tool_name" is null, not a string`,
		`{"tool_name":7,"arguments":{}}`:             `"tool_name" is a number, not a string`,
		`{"arguments":{}}`:                           `no member "tool_name"`,
		`{"tool_name":"get_weather"}`:                `no member "arguments"`,
		`["get_weather",{}]`:                         `no element "tool_name"`,
		`{"tool_name":"get_weather","arguments":[]}`: "",
	} {
		_, _, err := r.Resolve("ToolExecutor", json.RawMessage(in))
		if says == "" {
			require.NoError(t, err, in)
			continue
		}
		var re *oncekey.RouteError
		require.ErrorAs(t, err, &re, in)
		require.Contains(t, re.Error(), says, in)
	}

	_, _, err = r.Resolve("ToolExecutor", json.RawMessage(`{"tool":"get_weather","args":{}}`))
	require.EqualError(t, err, `oncekey: ToolExecutor did not run: its Route.ToolPaths path "tool_name" does not resolve in the call's arguments `+
		`(no member "tool_name"; the members there are "args", "tool"); nothing was claimed. `+
		`A Route's paths are the JSON member names of the activity's input, as its json tags spell them: fix the Route`)

	require.NoError(t, r.Route("Nested", oncekey.Route{ToolPaths: []string{"call.tool"}, Args: "call.args"}))
	_, _, err = r.Resolve("Nested", json.RawMessage(`{"call":{"name":"x","args":{}}}`))
	var re *oncekey.RouteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, []string{"args", "name"}, re.Members, "the members of the object where the path stopped")
	require.Contains(t, re.Reason, `no member "tool" in "call"`)
}

// OmitEmptyInput is ToolExecutorInput with its arguments tagged omitempty: a call with no
// arguments ({} or nil) has no "arguments" member in its encoding.
type OmitEmptyInput struct {
	ToolName  string         `json:"tool_name"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

func OmitEmptyExecutor(ctx context.Context, in OmitEmptyInput) (string, error) { return "", nil }

func OmitEmptyExecutorTwo(ctx context.Context, call string, in OmitEmptyInput) (string, error) {
	return "", nil
}

// A Route given the function of an input whose Args field is tagged omitempty keys a call with no
// arguments, {} or nil alike, with the arguments null; given only the activity's name, or for a
// field without omitempty, an absent member is still refused.
func TestRouteArgsOmitEmpty(t *testing.T) {
	t.Parallel()
	doc := func(args ...any) json.RawMessage {
		b, err := oncekey.CanonicalArgs(args)
		require.NoError(t, err)
		return b
	}
	empty := doc(OmitEmptyInput{ToolName: "list_tickets", Arguments: map[string]any{}})
	none := doc(OmitEmptyInput{ToolName: "list_tickets"})
	require.JSONEq(t, `{"tool_name":"list_tickets"}`, string(empty), "omitempty leaves the member out")
	require.JSONEq(t, `{"tool_name":"list_tickets"}`, string(none))

	op := func(res oncekey.Resolved) oncekey.Operation {
		return oncekey.Operation{Namespace: "default", Tenant: "t", WorkflowID: "w", RunID: "r", ActivityID: "1",
			Tool: res.Tool, ActivityType: "OmitEmptyExecutor", ArgsJSON: res.Args}
	}
	for _, reg := range []struct {
		name string
		fn   func(r *oncekey.Registry) error
		args func(OmitEmptyInput) json.RawMessage
	}{
		{"Route", func(r *oncekey.Registry) error {
			return r.Route(OmitEmptyExecutor, oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "arguments"})
		}, func(in OmitEmptyInput) json.RawMessage { return doc(in) }},
		{"RouteAs", func(r *oncekey.Registry) error {
			return r.RouteAs("OmitEmptyExecutor", OmitEmptyExecutor, oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "arguments"})
		}, func(in OmitEmptyInput) json.RawMessage { return doc(in) }},
		{"second argument", func(r *oncekey.Registry) error {
			return r.RouteAs("OmitEmptyExecutor", OmitEmptyExecutorTwo, oncekey.Route{ToolPaths: []string{"1.tool_name"}, Args: "1.arguments"})
		}, func(in OmitEmptyInput) json.RawMessage { return doc("call-1", in) }},
	} {
		t.Run(reg.name, func(t *testing.T) {
			r := oncekey.NewRegistry()
			require.NoError(t, reg.fn(r))
			require.NoError(t, oncekey.SetTool[map[string]any](r, "list_tickets", oncekey.Policy{Effect: oncekey.ReadOnly}))
			var keys []string
			for _, args := range []map[string]any{{}, nil} {
				res, ok, err := r.Resolve("OmitEmptyExecutor", reg.args(OmitEmptyInput{ToolName: "list_tickets", Arguments: args}))
				require.NoError(t, err, "a zero-argument call is a call")
				require.True(t, ok)
				require.Equal(t, "list_tickets", res.Tool)
				require.False(t, res.Fallback)
				require.Equal(t, "null", string(res.Args), "an absent omitempty member is null")
				keys = append(keys, mustKey(t, res.Policy, op(res)))
			}
			require.Equal(t, keys[0], keys[1], "{} and nil are one call")
			res, _, err := r.Resolve("OmitEmptyExecutor", reg.args(OmitEmptyInput{ToolName: "list_tickets", Arguments: map[string]any{"status": "open"}}))
			require.NoError(t, err)
			require.JSONEq(t, `{"status":"open"}`, string(res.Args))
			require.NotEqual(t, keys[0], mustKey(t, res.Policy, op(res)), "arguments that are there are the call's")
		})
	}

	// Without omitempty the encoding always has the member: absent, it is still refused.
	r := oncekey.NewRegistry()
	require.NoError(t, r.Route(ToolExecutor, oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "arguments"}))
	_, ok, err := r.Resolve("ToolExecutor", json.RawMessage(`{"tool_name":"list_tickets"}`))
	var re *oncekey.RouteError
	require.ErrorAs(t, err, &re)
	require.False(t, ok)
	require.Equal(t, "Route.Args", re.Field)
	require.Equal(t, `no member "arguments"`, re.Reason, "the Route knows the input: omitempty is not the cause")

	// By name the input type is unknown: refused, and the reason names omitempty as a cause.
	r = oncekey.NewRegistry()
	require.NoError(t, r.Route("OmitEmptyExecutor", oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "arguments"}))
	_, ok, err = r.Resolve("OmitEmptyExecutor", none)
	require.ErrorAs(t, err, &re)
	require.False(t, ok)
	require.Equal(t, "Route.Args", re.Field)
	require.Contains(t, re.Reason, `no member "arguments"`)
	require.Contains(t, re.Error(), "omitempty")
	require.Contains(t, re.Error(), "function value")

	// Only the member itself may be absent: a missing parent object is still refused.
	type outer struct {
		Tool string          `json:"tool"`
		Call *OmitEmptyInput `json:"call,omitempty"`
	}
	r = oncekey.NewRegistry()
	require.NoError(t, r.RouteAs("Nested", func(context.Context, outer) (string, error) { return "", nil },
		oncekey.Route{ToolPaths: []string{"tool"}, Args: "call.arguments"}))
	res, _, err := r.Resolve("Nested", doc(outer{Tool: "list_tickets", Call: &OmitEmptyInput{}}))
	require.NoError(t, err)
	require.Equal(t, "null", string(res.Args))
	_, _, err = r.Resolve("Nested", doc(outer{Tool: "list_tickets"}))
	require.ErrorAs(t, err, &re)
	require.Equal(t, `no member "call"`, re.Reason)
}
