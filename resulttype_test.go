package oncekey_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

type toolExecutorInput struct {
	ToolName  string                 `json:"tool_name"`
	Arguments map[string]interface{} `json:"arguments"`
}

// toolExecutor is the one activity of an agent loop that carries every tool and returns the
// tool's answer as a string.
func toolExecutor(ctx context.Context, in toolExecutorInput) (string, error) { return "", nil }

type receipt struct {
	ID    string    `json:"id"`
	Cents int64     `json:"cents"`
	Lines []string  `json:"lines"`
	At    time.Time `json:"at"`
	Next  *receipt  `json:"next,omitempty"`
	Tags  map[string]bool
}

// The example a refusal shows decodes into the type, whatever its shape.
func TestExampleResultDecodesIntoItsType(t *testing.T) {
	for _, tc := range []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[string](), `"text"`},
		{reflect.TypeFor[int](), `0`},
		{reflect.TypeFor[[]byte](), `null`},
		{reflect.TypeFor[map[string]any](), `{"key":null}`},
		{reflect.TypeFor[*string](), `"text"`},
		{reflect.TypeFor[receipt](), ""},
		{reflect.TypeFor[[]receipt](), ""},
		{reflect.TypeFor[time.Time](), `"0001-01-01T00:00:00Z"`},
		{reflect.TypeFor[chan int](), `null`},
	} {
		got := oncekey.ExampleResult(tc.typ)
		if tc.want != "" {
			require.JSONEq(t, tc.want, string(got), "%s", tc.typ)
		}
		require.NoError(t, json.Unmarshal(got, reflect.New(tc.typ).Interface()), "%s: %s", tc.typ, got)
	}
	require.Contains(t, string(oncekey.ExampleResult(reflect.TypeFor[receipt]())), `"id":"text","cents":0,"lines":["text"]`)
}

// A routed tool's result type is the routed activity's when the Route is given its function value,
// whatever the tool's own registration says; given by name it is the tool's own, and unknown for
// SetTool.
func TestRoutedToolHasTheActivitysResultType(t *testing.T) {
	reg := oncekey.NewRegistry()
	require.NoError(t, oncekey.SetTool[map[string]interface{}](reg, "open_ticket", oncekey.Policy{Effect: oncekey.Effectful}))
	_, ok := reg.ResultTypeOf("toolExecutor", "open_ticket")
	require.False(t, ok, "no Route yet: SetTool says nothing of the result")
	require.NoError(t, reg.Route("toolExecutor", oncekey.Route{Tool: oncekey.ToolAt("tool_name"), Args: "arguments"}))
	_, ok = reg.ResultTypeOf("toolExecutor", "open_ticket")
	require.False(t, ok, "a Route given by name does not know the activity's signature")
	require.NoError(t, reg.CheckResult("toolExecutor", "open_ticket", json.RawMessage(`{"id":"T-1"}`)), "an unknown type is not checked")

	require.NoError(t, reg.Route(toolExecutor, oncekey.Route{Tool: oncekey.ToolAt("tool_name"), Args: "arguments"}))
	typ, ok := reg.ResultTypeOf("toolExecutor", "open_ticket")
	require.True(t, ok)
	require.Equal(t, reflect.TypeFor[string](), typ)
	_, ok = reg.ResultTypeOf("", "open_ticket")
	require.False(t, ok, "without the activity type only the tool's own registration counts")

	err := reg.CheckResult("toolExecutor", "open_ticket", json.RawMessage(`{"id":"T-1"}`))
	var rte *oncekey.ResultTypeError
	require.ErrorAs(t, err, &rte)
	require.Equal(t, "open_ticket", rte.Tool)
	require.Equal(t, reflect.TypeFor[string](), rte.Type)
	require.Equal(t, `"text"`, string(rte.Example))
	var jerr *json.UnmarshalTypeError
	require.True(t, errors.As(err, &jerr), "it wraps encoding/json's error")
	require.Equal(t, `the result does not decode into open_ticket's result type string (json: cannot unmarshal object into Go value of type string); give JSON of that type, e.g. "text"`, err.Error())

	require.NoError(t, reg.CheckResult("toolExecutor", "open_ticket", json.RawMessage(`"T-1"`)))
	require.NoError(t, reg.CheckResult("toolExecutor", "open_ticket", json.RawMessage(" ")), "no result: the zero value")
	require.NoError(t, reg.CheckResult("toolExecutor", "toolExecutor", json.RawMessage(`"T-1"`)), "a call the Route did not recognise")
	require.Error(t, reg.CheckResult("toolExecutor", "toolExecutor", json.RawMessage(`1`)))

	// A tool of its own keeps its own result type.
	require.NoError(t, reg.Set(createTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	require.Error(t, reg.CheckResult("", "createTicket", json.RawMessage(`"T-1"`)))
	var nilReg *oncekey.Registry
	require.NoError(t, nilReg.CheckResult("toolExecutor", "open_ticket", json.RawMessage(`{}`)))
}

func createTicket(ctx context.Context, title string) (receipt, error) { return receipt{}, nil }

func toolRunner(ctx context.Context, in toolExecutorInput) error { return nil }

// Route takes the activity as Set does: a function value whose name cannot be the activity's is
// refused; an activity returning only an error gives its tools no result type.
func TestRouteTakesTheActivitysFunction(t *testing.T) {
	reg := oncekey.NewRegistry()
	err := reg.Route(func(ctx context.Context, in toolExecutorInput) (string, error) { return "", nil }, oncekey.Route{Tool: oncekey.ToolAt("tool_name")})
	var pe *oncekey.PolicyError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "activity", pe.Field)
	require.NoError(t, reg.Route(toolRunner, oncekey.Route{Tool: oncekey.ToolAt("tool_name")}))
	require.True(t, reg.Routed("toolRunner"))
	_, ok := reg.ResultTypeOf("toolRunner", "open_ticket")
	require.False(t, ok, "an activity returning only an error has no result type")
	require.NoError(t, reg.Route(toolExecutor, oncekey.Route{Tool: oncekey.ToolAt("tool_name")}))
	require.NoError(t, reg.Route("toolExecutor", oncekey.Route{Tool: oncekey.ToolAt("tool_name")}))
	_, ok = reg.ResultTypeOf("toolExecutor", "open_ticket")
	require.False(t, ok, "a Route registered again by name forgets the signature")
}
