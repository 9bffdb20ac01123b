// Package openaitools gives the tool definitions of an oncekey.Registry in the shapes
// github.com/openai/openai-go/v3 takes: function tools for Chat Completions.
package openaitools

import (
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/adapters/toolschema"
)

// Function returns def as an openai-go function definition: its name, its description (the
// policy's description and a sentence about repeats from the effect class) and the JSON Schema
// of its input (toolschema.For) as the parameters. Strict is left unset. It returns the error of
// toolschema.Map.
func Function(def oncekey.ToolDefinition) (shared.FunctionDefinitionParam, error) {
	params, err := toolschema.Map(def)
	if err != nil {
		return shared.FunctionDefinitionParam{}, err
	}
	return shared.FunctionDefinitionParam{
		Name:        def.Name,
		Description: openai.String(def.Description),
		Parameters:  shared.FunctionParameters(params),
	}, nil
}

// Tools returns defs (from oncekey.Registry.Definitions) as the tools of a
// ChatCompletionNewParams. It returns the first error of Function.
func Tools(defs []oncekey.ToolDefinition) ([]openai.ChatCompletionToolUnionParam, error) {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(defs))
	for _, d := range defs {
		f, err := Function(d)
		if err != nil {
			return nil, err
		}
		out = append(out, openai.ChatCompletionFunctionTool(f))
	}
	return out, nil
}
