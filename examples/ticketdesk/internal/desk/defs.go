package desk

import (
	"fmt"

	"github.com/openai/openai-go/v3"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/adapters/openaitools"
)

// ModelTools are the tools the model is offered, by the names it calls them.
var ModelTools = []string{ToolLookupCustomer, ToolCreateTicket, ToolSendConfirmation, ToolIssueRefund, ToolGrantCredit}

// ToolDefinitions returns the tools' definitions for the Chat Completions API from registry
// (Registry.Definitions: the policy's description, a sentence from the effect class, the JSON
// Schema of the input type).
func ToolDefinitions(registry *oncekey.Registry) ([]openai.ChatCompletionToolUnionParam, error) {
	defs, err := registry.Definitions(ModelTools...)
	if err != nil {
		return nil, fmt.Errorf("desk: tool definitions: %w", err)
	}
	return openaitools.Tools(defs)
}
