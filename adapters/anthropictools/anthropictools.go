// Package anthropictools gives the tool definitions of an oncekey.Registry in the shapes
// github.com/anthropics/anthropic-sdk-go/v2 takes: client tools for the Messages API.
package anthropictools

import (
	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/adapters/toolschema"
)

// Tool returns def as an anthropic-sdk-go tool: its name, its description (the policy's
// description and a sentence about repeats from the effect class) and the JSON Schema of its
// input (toolschema.For) as the input schema: properties and required in their fields, every
// other keyword (additionalProperties, $defs…) in ExtraFields. It returns the error of
// toolschema.Map.
func Tool(def oncekey.ToolDefinition) (anthropic.ToolParam, error) {
	m, err := toolschema.Map(def)
	if err != nil {
		return anthropic.ToolParam{}, err
	}
	schema := anthropic.ToolInputSchemaParam{ExtraFields: map[string]any{}}
	for k, v := range m {
		switch k {
		case "type":
		case "properties":
			schema.Properties = v
		case "required":
			for _, r := range v.([]any) {
				schema.Required = append(schema.Required, r.(string))
			}
		default:
			schema.ExtraFields[k] = v
		}
	}
	return anthropic.ToolParam{Name: def.Name, Description: anthropic.String(def.Description), InputSchema: schema}, nil
}

// Tools returns defs (from oncekey.Registry.Definitions) as the tools of a MessageNewParams. It
// returns the first error of Tool.
func Tools(defs []oncekey.ToolDefinition) ([]anthropic.ToolUnionParam, error) {
	out := make([]anthropic.ToolUnionParam, 0, len(defs))
	for _, d := range defs {
		t, err := Tool(d)
		if err != nil {
			return nil, err
		}
		out = append(out, anthropic.ToolUnionParam{OfTool: &t})
	}
	return out, nil
}
