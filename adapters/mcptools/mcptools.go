// Package mcptools gives the tool definitions of an oncekey.Registry in the shapes of the MCP
// go-sdk (github.com/modelcontextprotocol/go-sdk/mcp): a Tool with ToolAnnotations derived from
// the effect class, and the exact class in _meta.
package mcptools

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/adapters/toolschema"
)

// MetaEffect is the _meta key of a Tool that carries the tool's exact effect class
// ("read_only", "idempotent" or "effectful", oncekey.Effect.String).
const MetaEffect = "io.oncekey/effect"

// Annotations returns the MCP annotations of a tool with policy p. ReadOnly gives readOnlyHint
// true. Idempotent gives idempotentHint true. Effectful keeps idempotentHint false although
// oncekey deduplicates it: MCP means "calling the tool repeatedly with the same arguments has no
// additional effect", and oncekey deduplicates by operation key, so an identical call under a new
// step ID is a second effect. Idempotent and Effectful tools get destructiveHint from the policy:
// false when p.Additive, true otherwise (MCP's default, said explicitly). openWorldHint is left
// unset (MCP's default: true). Annotations are hints for clients; they grant nothing.
func Annotations(p oncekey.Policy) *mcp.ToolAnnotations {
	if p.Effect == oncekey.ReadOnly {
		return &mcp.ToolAnnotations{ReadOnlyHint: true}
	}
	destructive := !p.Additive
	return &mcp.ToolAnnotations{IdempotentHint: p.Effect == oncekey.Idempotent, DestructiveHint: &destructive}
}

// Tool returns def as an MCP tool: its name, its description (the policy's description and a
// sentence about repeats from the effect class), the JSON Schema of its input (toolschema.For),
// Annotations(def.Policy) and the effect class in _meta under MetaEffect. It returns the error of
// toolschema.For.
func Tool(def oncekey.ToolDefinition) (*mcp.Tool, error) {
	s, err := toolschema.For(def)
	if err != nil {
		return nil, err
	}
	return &mcp.Tool{
		Name:        def.Name,
		Description: def.Description,
		InputSchema: s,
		Annotations: Annotations(def.Policy),
		Meta:        mcp.Meta{MetaEffect: def.Policy.Effect.String()},
	}, nil
}

// SuggestEffect returns the effect class an MCP server's annotations for one of its tools claim:
// ReadOnly for readOnlyHint, Idempotent for idempotentHint, Effectful otherwise and for nil.
// It is a suggestion for the person who writes the tool's policy, never a grant: annotations
// from a server are hints its author chose, and MCP's idempotentHint means "the same arguments
// have no further effect", not deduplication by operation key. Register the class you have
// checked (oncekey.SetTool), or leave the tool to its Route's Fallback (Effectful by default).
func SuggestEffect(a *mcp.ToolAnnotations) oncekey.Effect {
	switch {
	case a == nil:
		return oncekey.Effectful
	case a.ReadOnlyHint:
		return oncekey.ReadOnly
	case a.IdempotentHint:
		return oncekey.Idempotent
	}
	return oncekey.Effectful
}
