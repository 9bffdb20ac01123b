package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/canonical"
)

// UnknownToolError: the model named a tool the Registry does not know (no policy under that
// name, and no Route). Nothing was scheduled.
type UnknownToolError struct {
	Tool string
}

func (e *UnknownToolError) Error() string {
	return fmt.Sprintf("agent: no tool %q in the registry: register its policy (Registry.Set, SetAs or oncekey.SetTool), "+
		"ReadOnly tools included, so that a model can call it", e.Tool)
}

// InvalidArgumentsError: the model's arguments for Tool are not one JSON value with a canonical
// form (not JSON, a member name twice, invalid UTF-8…). Nothing was scheduled. Err is the
// *canonical.Error.
type InvalidArgumentsError struct {
	Tool string
	Err  error
}

func (e *InvalidArgumentsError) Error() string {
	return fmt.Sprintf("agent: the arguments the model gave for %s are not valid JSON: %v", e.Tool, e.Err)
}

func (e *InvalidArgumentsError) Unwrap() error { return e.Err }

// Call runs the tool named tool (its activity type) with args, the arguments exactly as the
// model gave them (a JSON object; empty means {}), and waits for it. The activity takes them as
// its one input, decoded by the data converter into the input type (a struct, a map, a
// json.RawMessage); schedule it with the activity options on ctx (workflow.WithActivityOptions:
// a StartToCloseTimeout is required by Temporal). The interceptor keys the call from args as
// given, so a call without a step ID is the same operation whenever the model proposes it again
// with the same material arguments (see oncekey.StepKey), and its result is replayed.
//
// The ToolResult says what happened: status applied, replayed, in_flight, conflict, rejected,
// unknown, expired or failed, the result as JSON (a json.RawMessage), the operation key, the
// effect reference, whether repeating is safe, the next action, the reason where a status covers
// several cases, how long to wait, and Text, a fixed text for the model (oncekey.ModelText). Replayed and applied, the key and the effect reference
// come with the result itself (wire.MetadataOutcome…): no store round trip. The error is the
// Go error behind a result that is not applied or replayed, for logs and operators; it is never
// meant for the model. A tool reg does not know gives rejected (next action fix_arguments) with
// an *UnknownToolError, arguments that are not JSON the same with an *InvalidArgumentsError,
// and nothing is scheduled. reg must be the Registry the workers' interceptor has.
//
// For an activity that carries many tools (a Route), or one that takes its input in another
// shape, schedule it yourself and hand the future to Await.
func Call(ctx workflow.Context, reg *oncekey.Registry, tool string, args json.RawMessage) (oncekey.ToolResult, error) {
	if strings.TrimSpace(string(args)) == "" {
		args = json.RawMessage("{}")
	}
	if _, ok := reg.Policy(tool); !ok && !reg.Routed(tool) {
		return refused(), &UnknownToolError{Tool: tool}
	}
	if _, err := canonical.Transform(args); err != nil {
		return refused(), &InvalidArgumentsError{Tool: tool, Err: err}
	}
	return Await(ctx, workflow.ExecuteActivity(ctx, tool, args))
}

// Await waits for fut, the future of a tool's activity (workflow.ExecuteActivity), and returns
// the ToolResult and the Go error as Call does. The result is read as a converter.RawValue, so
// its JSON is the activity's result as encoded ("json/plain" and "json/protobuf" payloads); a
// result in another encoding is left out of the ToolResult (read it with fut.Get).
func Await(ctx workflow.Context, fut workflow.Future) (oncekey.ToolResult, error) {
	var raw converter.RawValue
	if err := fut.Get(ctx, &raw); err != nil {
		return oncekey.Label(nil, err), err
	}
	tr := oncekey.Label(raw, nil)
	if _, ok := tr.Result.(json.RawMessage); !ok {
		tr.Result = nil
	}
	return tr, nil
}

// refused is the answer to a call that was not scheduled: the tool name or its arguments are not
// valid.
func refused() oncekey.ToolResult {
	return oncekey.ToolResult{Status: oncekey.OutcomeRejected, NextAction: oncekey.NextFix,
		Text: oncekey.ModelText(oncekey.OutcomeRejected, oncekey.NextFix, "")}
}
