package desk

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
)

// Outcome is what one tool call gave the agent: the label, the result and the text the model
// reads.
type Outcome struct {
	Status          oncekey.Outcome `json:"status"`
	Replayed        bool            `json:"replayed,omitempty"`
	OperationKey    string          `json:"operation_key,omitempty"`
	EffectReference string          `json:"effect_reference,omitempty"`
	NextAction      string          `json:"next_action,omitempty"`
	SafeToRepeat    bool            `json:"safe_to_repeat"`
	RetryAfter      time.Duration   `json:"retry_after,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	// Text is the short text for the model: what happened and what to do next.
	Text string `json:"text"`
	// Error is the operator's detail (the Go error); it is never shown to the model. ErrorType
	// is its application error type, if it has one.
	Error     string `json:"error,omitempty"`
	ErrorType string `json:"error_type,omitempty"`
}

// forModel is the tool message content: the label, the result and the text, no operator detail.
func (o Outcome) forModel() string {
	m := struct {
		Status          oncekey.Outcome `json:"status"`
		Replayed        bool            `json:"replayed,omitempty"`
		EffectReference string          `json:"effect_reference,omitempty"`
		NextAction      string          `json:"next_action,omitempty"`
		SafeToRepeat    bool            `json:"safe_to_repeat"`
		RetryAfter      float64         `json:"retry_after_seconds,omitempty"`
		Text            string          `json:"text"`
		Result          json.RawMessage `json:"result,omitempty"`
	}{o.Status, o.Replayed, o.EffectReference, o.NextAction, o.SafeToRepeat, o.RetryAfter.Seconds(), o.Text, o.Result}
	b, _ := json.Marshal(m)
	return string(b)
}

// route is how the workflow runs a tool the model names: the activity type and its argument.
type route struct {
	activity string
	arg      func(args json.RawMessage) any
}

// routes maps the model's tool names to activities. Tools behind the MCP proxy activity are
// wrapped in an McpCall.
var routes = map[string]route{
	ToolLookupCustomer: {activity: ActivityCallMcpTool, arg: func(a json.RawMessage) any {
		return McpCall{Toolset: ToolsetDirectory, Tool: ToolLookupCustomer, Args: a}
	}},
	ToolCreateTicket:     {activity: ToolCreateTicket, arg: raw},
	ToolSendConfirmation: {activity: ToolSendConfirmation, arg: raw},
	ToolIssueRefund:      {activity: ToolIssueRefund, arg: raw},
}

func raw(a json.RawMessage) any { return a }

// excluded are the argument fields that are free text, not part of what a call does.
var excluded = []string{"trace_id"}

// callTool runs the tool call the model proposed and labels the outcome. It is the demo's one
// seam with the workflow-side tool call.
func callTool(ctx workflow.Context, name string, args json.RawMessage) Outcome {
	r, ok := routes[name]
	if !ok {
		return Outcome{Status: oncekey.OutcomeRejected, NextAction: oncekey.NextStop,
			Text: "There is no tool named " + name + ". Use one of the tools you were given."}
	}
	if !json.Valid(args) {
		return Outcome{Status: oncekey.OutcomeRejected, NextAction: oncekey.NextStop,
			Text: "The arguments are not valid JSON. Call the tool again with a JSON object."}
	}
	// One operation per intended call: the tool and its material arguments name the step.
	ctx = oncekey.WithStepID(ctx, name+":"+material(args))
	var result json.RawMessage
	err := workflow.ExecuteActivity(ctx, r.activity, r.arg(args)).Get(ctx, &result)
	tr := oncekey.Label(result, err)
	out := Outcome{
		Status: tr.Status, Replayed: tr.Replayed, OperationKey: tr.OperationKey, EffectReference: tr.EffectReference,
		NextAction: tr.NextAction, SafeToRepeat: tr.SafeToRepeat, RetryAfter: tr.RetryAfter, Text: modelText(tr),
	}
	if err == nil {
		out.Result = result
	} else {
		out.Error = err.Error()
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		out.ErrorType = appErr.Type()
	}
	return out
}

// material returns a digest of args without the excluded fields.
func material(args json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return "raw:" + string(args)
	}
	for _, f := range excluded {
		delete(m, f)
	}
	b, _ := json.Marshal(m) // map keys are sorted
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// modelText is the short text for the model per status.
func modelText(tr oncekey.ToolResult) string {
	switch tr.Status {
	case oncekey.OutcomeApplied:
		return "Done. The result is below."
	case oncekey.OutcomeReplayed:
		return "This call was already made; this is its result. Do not call it again."
	case oncekey.OutcomeInFlight:
		return "This call is still running. Wait, then ask again with the same arguments."
	case oncekey.OutcomeUnknown:
		return "The outcome is unknown; a person is checking. Do not repeat this call."
	case oncekey.OutcomeRejected:
		return "This call was refused. Do not repeat it; tell the customer a person will follow up."
	case oncekey.OutcomeExpired:
		return "This call expired before it was decided. Do not repeat it."
	}
	if tr.SafeToRepeat && tr.NextAction == oncekey.NextPoll {
		return "The call failed and did not take effect. You may try it again."
	}
	return "The call failed. Do not repeat it."
}
