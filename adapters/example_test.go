package adapters_test

import (
	"fmt"

	"github.com/openai/openai-go/v3"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/adapters/anthropictools"
	"github.com/oncekey/oncekey/adapters/mcptools"
	"github.com/oncekey/oncekey/adapters/openaitools"
)

// The tools a model may call come from the Registry that protects them: the same names,
// descriptions that say what a repeat does, and the input types' JSON Schemas.
func Example_toolDefinitions() {
	reg := oncekey.NewRegistry()
	var b billing
	if err := reg.Set(b.SendInvoice, oncekey.Policy{Effect: oncekey.Effectful, Description: "Sends an invoice."}); err != nil {
		panic(err)
	}
	defs, err := reg.Definitions("SendInvoice")
	if err != nil {
		panic(err)
	}

	tools, err := openaitools.Tools(defs) // for openai.ChatCompletionNewParams.Tools
	if err != nil {
		panic(err)
	}
	_ = openai.ChatCompletionNewParams{Model: "gpt-5", Tools: tools}
	claude, err := anthropictools.Tools(defs) // for anthropic.MessageNewParams.Tools
	if err != nil {
		panic(err)
	}
	mcpTool, err := mcptools.Tool(defs[0]) // for mcp.Server.AddTool
	if err != nil {
		panic(err)
	}

	fmt.Println(tools[0].GetFunction().Name, claude[0].GetName() != nil, mcpTool.Annotations.IdempotentHint, mcpTool.Meta[mcptools.MetaEffect])
	fmt.Println(defs[0].Description)
	// Output:
	// SendInvoice true false effectful
	// Sends an invoice. It has side effects: an identical repeat returns the stored result instead of acting again; if the status is in_flight, wait and call again with the same arguments; if it is unknown, do not repeat it.
}
