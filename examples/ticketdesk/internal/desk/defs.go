package desk

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/oncekey/oncekey"
)

// toolDescriptions are the tools' descriptions for the model, before the sentence about repeats.
var toolDescriptions = map[string]string{
	ToolLookupCustomer:   "Look up a customer by ID: name, e-mail, tier and whether refunds are allowed.",
	ToolCreateTicket:     "Open a support ticket for the request. Returns the ticket with its id.",
	ToolSendConfirmation: "E-mail the customer: template ticket_opened when a ticket is open, refund_issued after a refund.",
	ToolIssueRefund:      "Refund an order (amount in cents). Refused for customers not allowed refunds and above 200.00.",
}

// effectSentence is what the model is told about repeating a tool of each effect class.
func effectSentence(e oncekey.Effect) string {
	if e == oncekey.ReadOnly {
		return "It only reads; calling it again is safe."
	}
	return "A repeat with the same arguments returns the first result; if a result says in_flight, wait; if it says unknown, do not repeat."
}

// ToolDefinitions returns the tools' definitions for the Chat Completions API, with each
// description and input schema and the policy's effect class from registry.
func ToolDefinitions(registry *oncekey.Registry) ([]openai.ChatCompletionToolUnionParam, error) {
	inputs := []struct {
		name     string
		activity string
		schema   func(*jsonschema.ForOptions) (*jsonschema.Schema, error)
	}{
		{ToolLookupCustomer, ActivityCallMcpTool, jsonschema.For[LookupInput]},
		{ToolCreateTicket, ToolCreateTicket, jsonschema.For[TicketInput]},
		{ToolSendConfirmation, ToolSendConfirmation, jsonschema.For[EmailInput]},
		{ToolIssueRefund, ToolIssueRefund, jsonschema.For[RefundInput]},
	}
	var out []openai.ChatCompletionToolUnionParam
	for _, in := range inputs {
		p, ok := registry.Policy(in.activity)
		if !ok {
			return nil, fmt.Errorf("desk: no policy for %s", in.activity)
		}
		s, err := in.schema(nil)
		if err != nil {
			return nil, fmt.Errorf("desk: schema of %s: %w", in.name, err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		var params shared.FunctionParameters
		if err := json.Unmarshal(b, &params); err != nil {
			return nil, err
		}
		out = append(out, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        in.name,
			Description: openai.String(toolDescriptions[in.name] + " " + effectSentence(p.Effect)),
			Parameters:  params,
		}))
	}
	return out, nil
}
