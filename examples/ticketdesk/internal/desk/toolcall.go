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
	"github.com/oncekey/oncekey/agent"
)

// Outcome is what one tool call gave the agent: the label, the result and the text the model
// reads.
type Outcome struct {
	Status          oncekey.Outcome `json:"status"`
	Replayed        bool            `json:"replayed,omitempty"`
	OperationKey    string          `json:"operation_key,omitempty"`
	EffectReference string          `json:"effect_reference,omitempty"`
	NextAction      string          `json:"next_action,omitempty"`
	Reason          string          `json:"reason,omitempty"`
	SafeToRepeat    bool            `json:"safe_to_repeat"`
	RetryAfter      time.Duration   `json:"retry_after,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	// Text is the short text for the model: what happened and what to do next.
	Text string `json:"text"`
	// Message is what the person who decided the call's approval said to the model; Arguments
	// and Changed are the arguments a person approved the call with instead, and which of them
	// they changed.
	Message   string          `json:"message,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Changed   []string        `json:"changed,omitempty"`
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
		Reason          string          `json:"reason,omitempty"`
		SafeToRepeat    bool            `json:"safe_to_repeat"`
		RetryAfter      float64         `json:"retry_after_seconds,omitempty"`
		Text            string          `json:"text"`
		Message         string          `json:"message,omitempty"`
		Arguments       json.RawMessage `json:"arguments,omitempty"`
		Changed         []string        `json:"changed,omitempty"`
		Result          json.RawMessage `json:"result,omitempty"`
	}{o.Status, o.Replayed, o.EffectReference, o.NextAction, o.Reason, o.SafeToRepeat, o.RetryAfter.Seconds(), o.Text,
		o.Message, o.Arguments, o.Changed, o.Result}
	b, _ := json.Marshal(m)
	return string(b)
}

// plainTemporal keeps of o what a worker without oncekey gives the workflow: the result or the
// error. There is no label: no status, key, effect reference or text.
func (o Outcome) plainTemporal() Outcome {
	return Outcome{Result: o.Result, Error: o.Error, ErrorType: o.ErrorType}
}

// forModelPlain is the tool message content on a worker without oncekey: what Temporal gives
// the workflow, the tool's result, or the error it ended with (after Temporal's retries).
func (o Outcome) forModelPlain() string {
	m := struct {
		Result json.RawMessage `json:"result,omitempty"`
		Error  string          `json:"error,omitempty"`
	}{o.Result, o.Error}
	if o.Error != "" {
		m.Result = nil
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// excluded are the argument fields that are free text, not part of what a call does.
var excluded = []string{"trace_id"}

// callTool runs the tool call the model proposed with oncekey's workflow-side tool call and
// labels the outcome: agent.Call for a tool that is an activity of its own, agent.Await on the
// MCP proxy activity for a tool behind it.
func callTool(ctx workflow.Context, reg *oncekey.Registry, name string, args json.RawMessage) Outcome {
	var (
		tr  oncekey.ToolResult
		err error
	)
	if name == ToolLookupCustomer {
		if !json.Valid(args) {
			tr, err = agent.Call(ctx, reg, name, args) // refused as invalid arguments, nothing scheduled
		} else {
			tr, err = agent.Await(ctx, workflow.ExecuteActivity(ctx, ActivityCallMcpTool, McpCall{Toolset: ToolsetDirectory, Tool: name, Args: args}))
		}
	} else {
		tr, err = agent.Call(ctx, reg, name, args)
	}
	out := Outcome{
		Status: tr.Status, Replayed: tr.Replayed, OperationKey: tr.OperationKey, EffectReference: tr.EffectReference,
		NextAction: tr.NextAction, Reason: tr.Reason, SafeToRepeat: tr.SafeToRepeat, RetryAfter: tr.RetryAfter, Text: tr.Text,
		Message: tr.Message, Arguments: tr.Arguments, Changed: tr.Changed,
	}
	if raw, ok := tr.Result.(json.RawMessage); ok {
		out.Result = raw
	}
	if err != nil {
		out.Error = err.Error()
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			out.ErrorType = appErr.Type()
		}
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
