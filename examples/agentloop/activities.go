package main

import (
	"context"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// ToolHandler runs one tool with the model's arguments and returns what the model reads.
type ToolHandler func(ctx context.Context, args map[string]interface{}) (string, error)

// Activities are the loop's two activities: the model call and the one tool activity.
type Activities struct {
	// ModelBaseURL is the OpenAI base URL ("http://127.0.0.1:41234/v1"); APIKey its key.
	ModelBaseURL, APIKey string
	// Tools are the handlers ToolExecutor runs, by tool name.
	Tools map[string]ToolHandler
}

// OpenAIResponsesCreate sends req to the Responses API and returns the answer's text and tool
// calls. The client does not retry: Temporal does.
func (a *Activities) OpenAIResponsesCreate(ctx context.Context, req ResponsesRequest) (*ResponsesResult, error) {
	client := openai.NewClient(option.WithBaseURL(a.ModelBaseURL), option.WithAPIKey(a.APIKey), option.WithMaxRetries(0))
	items := make([]responses.ResponseInputItemUnionParam, 0, len(req.Input))
	for _, it := range req.Input {
		switch it.Type {
		case "message":
			items = append(items, responses.ResponseInputItemParamOfMessage(it.Content, responses.EasyInputMessageRole(it.Role)))
		case "function_call":
			items = append(items, responses.ResponseInputItemParamOfFunctionCall(it.Arguments, it.CallID, it.Name))
		case "function_call_output":
			out := responses.ResponseInputItemParamOfFunctionCallOutput(it.Output)
			out.OfFunctionCallOutput.CallID = openai.String(it.CallID)
			items = append(items, out)
		}
	}
	tools := make([]responses.ToolUnionParam, 0, len(req.Tools))
	for _, d := range req.Tools {
		t := responses.ToolParamOfFunction(d.Name, d.Parameters, false)
		t.OfFunction.Description = openai.String(d.Description)
		tools = append(tools, t)
	}
	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:        req.Model,
		Instructions: openai.String(req.Instructions),
		Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: items},
		Tools:        tools,
	})
	if err != nil {
		return nil, err
	}
	out := &ResponsesResult{OutputText: resp.OutputText()}
	for _, item := range resp.Output {
		if item.Type == "function_call" {
			fc := item.AsFunctionCall()
			out.ToolCalls = append(out.ToolCalls, ToolCall{CallID: fc.CallID, Name: fc.Name, Arguments: fc.Arguments})
		}
	}
	return out, nil
}

// ToolExecutor runs the tool in.ToolName with in.Arguments: every tool call of the loop is this
// one activity type.
func (a *Activities) ToolExecutor(ctx context.Context, in ToolExecutorInput) (string, error) {
	handler, ok := a.Tools[in.ToolName]
	if !ok {
		return "", fmt.Errorf("unknown tool %q", in.ToolName)
	}
	out, err := handler(ctx, in.Arguments)
	if err != nil {
		return "", fmt.Errorf("tool %s failed: %w", in.ToolName, err)
	}
	return out, nil
}
