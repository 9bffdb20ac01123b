package desk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.temporal.io/sdk/temporal"
)

// ActivityCallModel is the activity type of the model call.
const ActivityCallModel = "CallModel"

// ChatMessage is one chat message of the agent's conversation, in the Chat Completions wire shape
// (role "system", "user", "assistant" or "tool"). The workflow keeps the conversation as these
// values; the model activity turns them into openai-go parameters.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are an assistant message's tool calls.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// ToolCall is one tool call a model proposed: its ID, the tool's name and its arguments as the
// model wrote them (a JSON text).
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ModelInput is the model activity's argument: the conversation so far.
type ModelInput struct {
	Messages []ChatMessage `json:"messages"`
}

// ModelOutput is the model's answer: an assistant message with tool calls, or without (the final
// answer). FinishReason is the API's ("tool_calls", "stop", "length", …).
type ModelOutput struct {
	Message      ChatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
	Model        string      `json:"model"`
}

// Model calls a chat completions model with the agent's tools through the official OpenAI client.
// Register it with the worker (its method CallModel is the activity).
type Model struct {
	// Client is the OpenAI client: against the scripted model on loopback, or a real endpoint.
	Client openai.Client
	// Name is the model to ask for ("gpt-4o-mini"; the scripted server accepts any).
	Name string
	// Tools are the tool definitions sent with every request.
	Tools []openai.ChatCompletionToolUnionParam
}

// NewModel returns a Model on baseURL (with apiKey, which the scripted server ignores). The
// client's own retries are off: the activity is retried by Temporal, where the history shows it.
func NewModel(baseURL, apiKey, name string, tools []openai.ChatCompletionToolUnionParam, httpClient *http.Client) *Model {
	opts := []option.RequestOption{option.WithMaxRetries(0)}
	if baseURL != "" {
		opts = append(opts, option.WithBaseURL(baseURL))
	}
	if apiKey != "" {
		opts = append(opts, option.WithAPIKey(apiKey))
	}
	if httpClient != nil {
		opts = append(opts, option.WithHTTPClient(httpClient))
	}
	return &Model{Client: openai.NewClient(opts...), Name: name, Tools: tools}
}

// CallModel sends the conversation and the tools to the model and returns its answer. A 4xx
// answer other than 408 and 429 is a non-retryable error (the same request would be refused
// again); anything else is retried by Temporal.
func (m *Model) CallModel(ctx context.Context, in ModelInput) (ModelOutput, error) {
	msgs, err := toParams(in.Messages)
	if err != nil {
		return ModelOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "ticketdesk.BadConversation", err)
	}
	resp, err := m.Client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    m.Name,
		Messages: msgs,
		Tools:    m.Tools,
	})
	if err != nil {
		var apiErr *openai.Error
		if errors.As(err, &apiErr) && apiErr.StatusCode/100 == 4 && apiErr.StatusCode != 408 && apiErr.StatusCode != 429 {
			return ModelOutput{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("model refused the request: %v", err), "ticketdesk.ModelRefused", nil)
		}
		return ModelOutput{}, fmt.Errorf("call model: %w", err)
	}
	if len(resp.Choices) == 0 {
		return ModelOutput{}, errors.New("call model: the answer has no choices")
	}
	c := resp.Choices[0]
	out := ModelOutput{FinishReason: c.FinishReason, Model: resp.Model, Message: ChatMessage{Role: "assistant", Content: c.Message.Content}}
	for _, tc := range c.Message.ToolCalls {
		if tc.Type != "function" {
			continue // custom tools are never offered
		}
		out.Message.ToolCalls = append(out.Message.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return out, nil
}

// toParams turns the conversation into openai-go message parameters.
func toParams(msgs []ChatMessage) ([]openai.ChatCompletionMessageParamUnion, error) {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case "system":
			out = append(out, openai.SystemMessage(m.Content))
		case "user":
			out = append(out, openai.UserMessage(m.Content))
		case "tool":
			out = append(out, openai.ToolMessage(m.Content, m.ToolCallID))
		case "assistant":
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: tc.Arguments},
					},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

// systemPrompt tells a model (a real one too) what the agent does.
const systemPrompt = `You are the support agent of an online shop. For the support request in the user message:
1. Look up the customer (lookup_customer) and open a ticket (CreateTicket) with the request's id, customer, subject, body and priority.
2. E-mail the customer that the ticket is open (SendConfirmation, template "ticket_opened", to the customer's e-mail, with the ticket's id).
3. If the request asks for a refund, issue it (IssueRefund) with the order, amount, currency and reason it gives.
Give every call a fresh trace_id. Each tool result is JSON with a "status" and a "text": do what the text says (do not repeat a call whose outcome is unknown; wait and ask again when it is in flight).
When done, answer in one or two sentences what you did, without calling a tool.`

// userPrompt carries the support request as JSON.
func userPrompt(r Request) string {
	b, _ := json.Marshal(r)
	return "Support request:\n" + string(b)
}
