package main

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The workflow and its types are the agent shape of Temporal's AI cookbook for Go (recipe
// agentic_loop_tool_call_openai_golang), written for this example: a loop over a model activity
// and one generic tool activity, with no oncekey in it. oncekey comes in through the worker's
// registration alone (registration.go).

// ModelName is the model the loop asks; the scripted model answers to any name.
const ModelName = "gpt-4o-mini"

// Instructions is the system prompt of every model request.
const Instructions = "You are a support agent. Use the tools to look up the weather, open tickets and refund orders; " +
	"answer the customer from the tool results."

// ResponsesRequest is the model activity's input: one Responses API request.
type ResponsesRequest struct {
	Model        string           `json:"model"`
	Instructions string           `json:"instructions"`
	Input        []InputItem      `json:"input"`
	Tools        []ToolDefinition `json:"tools"`
}

// InputItem is one item of the conversation: a message ("message", with Role and Content), a
// tool call the model made ("function_call", with CallID, Name and Arguments) or its result
// ("function_call_output", with CallID and Output).
type InputItem struct {
	Type      string `json:"type"`
	Role      string `json:"role,omitempty"`
	Content   string `json:"content,omitempty"`
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"` // JSON text, as the model wrote it
	Output    string `json:"output,omitempty"`
}

// ResponsesResult is the model activity's result: the text of the answer, or the tool calls.
type ResponsesResult struct {
	OutputText string     `json:"output_text"`
	ToolCalls  []ToolCall `json:"tool_calls"`
}

// ToolCall is one function call of the model's answer.
type ToolCall struct {
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON text
}

// ToolDefinition is a function tool offered to the model; Parameters is its JSON Schema.
type ToolDefinition struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// ToolExecutorInput is the input of the one tool activity: the tool's name and the arguments
// the model gave it, decoded into a map.
type ToolExecutorInput struct {
	ToolName  string                 `json:"tool_name"`
	Arguments map[string]interface{} `json:"arguments"`
}

// acts names the activities for ExecuteActivity; the worker registers an *Activities.
var acts *Activities

// AgentWorkflow asks the model, runs the tool calls it answers with through ToolExecutor, hands
// the results back and asks again, until the model answers with text, which it returns. A tool
// call that fails is handed to the model as "Error executing tool: " and the error's text.
func AgentWorkflow(ctx workflow.Context, userInput string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    3,
		},
	})
	input := []InputItem{{Type: "message", Role: "user", Content: userInput}}
	for {
		req := ResponsesRequest{Model: ModelName, Instructions: Instructions, Input: input, Tools: ToolDefinitions()}
		var res ResponsesResult
		if err := workflow.ExecuteActivity(ctx, acts.OpenAIResponsesCreate, req).Get(ctx, &res); err != nil {
			return "", fmt.Errorf("model call failed: %w", err)
		}
		if len(res.ToolCalls) == 0 {
			return res.OutputText, nil
		}
		for _, call := range res.ToolCalls {
			input = append(input, InputItem{Type: "function_call", CallID: call.CallID, Name: call.Name, Arguments: call.Arguments})
			var args map[string]interface{}
			if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
				args = map[string]interface{}{}
			}
			var output string
			err := workflow.ExecuteActivity(ctx, acts.ToolExecutor, ToolExecutorInput{ToolName: call.Name, Arguments: args}).Get(ctx, &output)
			if err != nil {
				output = fmt.Sprintf("Error executing tool: %v", err)
			}
			input = append(input, InputItem{Type: "function_call_output", CallID: call.CallID, Output: output})
		}
	}
}
