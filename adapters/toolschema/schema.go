// Package toolschema derives the JSON Schema of a tool's input type, for tool definitions, with
// github.com/google/jsonschema-go (the library the MCP go-sdk uses). It imports no vendor SDK.
package toolschema

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/oncekey/oncekey"
)

// anyValue is the schema of a value of any JSON type.
var anyValue = &jsonschema.Schema{}

// For returns the JSON Schema of def's input: the schema jsonschema.ForType infers for
// def.Input (struct fields by their JSON names, fields without omitempty or omitzero required,
// additionalProperties false), with a json.RawMessage or an interface standing for any value.
// A tool whose input type is unknown (registered by name) or a map takes any JSON object
// ({"type":"object"}). It returns an error when the input is not a JSON object (a string, a
// list), since a model's tool call arguments always are, or when jsonschema-go cannot describe
// a field (a channel, a function).
func For(def oncekey.ToolDefinition) (*jsonschema.Schema, error) {
	t := def.Input
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || t == reflect.TypeFor[json.RawMessage]() {
		return &jsonschema.Schema{Type: "object"}, nil
	}
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): anyValue,
	}})
	if err != nil {
		return nil, fmt.Errorf("toolschema: input of %s: %w", def.Name, err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("toolschema: input of %s is %s, not a JSON object: a model's tool arguments are an object", def.Name, t)
	}
	return s, nil
}

// Map returns For(def) as the map[string]any of its JSON form, the shape openai-go's
// FunctionParameters and anthropic-sdk-go's input schema take.
func Map(def oncekey.ToolDefinition) (map[string]any, error) {
	s, err := For(def)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("toolschema: input of %s: %w", def.Name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("toolschema: input of %s: %w", def.Name, err)
	}
	return m, nil
}
