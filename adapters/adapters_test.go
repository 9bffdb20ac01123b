package adapters_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/adapters/anthropictools"
	"github.com/oncekey/oncekey/adapters/mcptools"
	"github.com/oncekey/oncekey/adapters/openaitools"
	"github.com/oncekey/oncekey/adapters/toolschema"
)

type Address struct {
	City string `json:"city"`
}

type InvoiceRequest struct {
	Customer    string   `json:"customer"`
	AmountCents int64    `json:"amount_cents"`
	Note        string   `json:"note,omitempty"`
	BillTo      *Address `json:"bill_to,omitempty"`
}

type billing struct{}

func (billing) SendInvoice(ctx context.Context, in InvoiceRequest) (string, error) { return "", nil }
func (billing) FindInvoice(ctx context.Context, id string) (string, error)         { return "", nil }

func registry(t *testing.T) *oncekey.Registry {
	t.Helper()
	r := oncekey.NewRegistry()
	var b billing
	require.NoError(t, r.Set(b.SendInvoice, oncekey.Policy{Effect: oncekey.Effectful, Description: "Sends an invoice."}))
	require.NoError(t, oncekey.SetTool[map[string]any](r, "search", oncekey.Policy{Effect: oncekey.ReadOnly, Description: "Searches."}))
	return r
}

// wantSchema is the JSON Schema of InvoiceRequest both vendors must carry.
const wantSchema = `{"type":"object","additionalProperties":false,
	"required":["customer","amount_cents"],
	"properties":{
		"customer":{"type":"string"},
		"amount_cents":{"type":"integer"},
		"note":{"type":"string"},
		"bill_to":{"type":["null","object"],"additionalProperties":false,"required":["city"],"properties":{"city":{"type":"string"}}}}}`

func TestOpenAITools(t *testing.T) {
	t.Parallel()
	defs, err := registry(t).Definitions()
	require.NoError(t, err)
	tools, err := openaitools.Tools(defs)
	require.NoError(t, err)
	// The tools go into a request as they are.
	req := openai.ChatCompletionNewParams{Model: "gpt-5", Tools: tools,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("bill acme")}}
	b, err := json.Marshal(req)
	require.NoError(t, err)
	var wire struct {
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(b, &wire))
	require.Len(t, wire.Tools, 2)
	send := wire.Tools[0]
	require.Equal(t, "function", send.Type)
	require.Equal(t, "SendInvoice", send.Function.Name)
	require.Equal(t, "Sends an invoice. "+oncekey.EffectSentence(oncekey.Effectful), send.Function.Description)
	require.JSONEq(t, wantSchema, string(send.Function.Parameters))
	require.Equal(t, "search", wire.Tools[1].Function.Name)
	require.JSONEq(t, `{"type":"object","additionalProperties":true}`, string(wire.Tools[1].Function.Parameters), "a map input takes any object")
}

func TestAnthropicTools(t *testing.T) {
	t.Parallel()
	defs, err := registry(t).Definitions()
	require.NoError(t, err)
	tools, err := anthropictools.Tools(defs)
	require.NoError(t, err)
	req := anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 1024, Tools: tools,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("bill acme"))}}
	b, err := json.Marshal(req)
	require.NoError(t, err)
	var wire struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(b, &wire))
	require.Len(t, wire.Tools, 2)
	require.Equal(t, "SendInvoice", wire.Tools[0].Name)
	require.Equal(t, "Sends an invoice. "+oncekey.EffectSentence(oncekey.Effectful), wire.Tools[0].Description)
	require.JSONEq(t, wantSchema, string(wire.Tools[0].InputSchema))
	require.JSONEq(t, `{"type":"object","additionalProperties":true}`, string(wire.Tools[1].InputSchema))
}

func TestMCPAnnotationsPerEffectClass(t *testing.T) {
	t.Parallel()
	ptr := func(b bool) *bool { return &b }
	cases := []struct {
		p    oncekey.Policy
		want mcp.ToolAnnotations
	}{
		{oncekey.Policy{Effect: oncekey.ReadOnly}, mcp.ToolAnnotations{ReadOnlyHint: true}},
		{oncekey.Policy{Effect: oncekey.Idempotent}, mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: ptr(true)}},
		{oncekey.Policy{Effect: oncekey.Idempotent, Additive: true}, mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: ptr(false)}},
		// Effectful keeps idempotentHint false: MCP means "same arguments", oncekey deduplicates by key.
		{oncekey.Policy{Effect: oncekey.Effectful}, mcp.ToolAnnotations{IdempotentHint: false, DestructiveHint: ptr(true)}},
		{oncekey.Policy{Effect: oncekey.Effectful, Additive: true}, mcp.ToolAnnotations{DestructiveHint: ptr(false)}},
	}
	for _, c := range cases {
		got := mcptools.Annotations(c.p)
		require.Equal(t, c.want, *got, "%s additive=%v", c.p.Effect, c.p.Additive)
		require.False(t, got.OpenWorldHint != nil)
	}

	defs, err := registry(t).Definitions("SendInvoice")
	require.NoError(t, err)
	tool, err := mcptools.Tool(defs[0])
	require.NoError(t, err)
	b, err := json.Marshal(tool)
	require.NoError(t, err)
	var wire struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Annotations map[string]any  `json:"annotations"`
		Meta        map[string]any  `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(b, &wire))
	require.Equal(t, "SendInvoice", wire.Name)
	require.JSONEq(t, wantSchema, string(wire.InputSchema))
	require.Equal(t, map[string]any{"readOnlyHint": false, "idempotentHint": false, "destructiveHint": true}, wire.Annotations)
	require.Equal(t, map[string]any{mcptools.MetaEffect: "effectful"}, wire.Meta)

	// The tool registers on a go-sdk server as is.
	srv := mcp.NewServer(&mcp.Implementation{Name: "billing", Version: "v0"}, nil)
	srv.AddTool(tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
}

func TestSchemaRefusesNonObjectInput(t *testing.T) {
	t.Parallel()
	r := oncekey.NewRegistry()
	require.NoError(t, r.Set(billing{}.FindInvoice, oncekey.Policy{Effect: oncekey.ReadOnly}))
	defs, err := r.Definitions()
	require.NoError(t, err)
	_, err = toolschema.For(defs[0])
	require.ErrorContains(t, err, "not a JSON object")
}

func TestMCPSuggestEffect(t *testing.T) {
	t.Parallel()
	require.Equal(t, oncekey.Effectful, mcptools.SuggestEffect(nil), "no annotations: the safe default")
	require.Equal(t, oncekey.Effectful, mcptools.SuggestEffect(&mcp.ToolAnnotations{}))
	require.Equal(t, oncekey.ReadOnly, mcptools.SuggestEffect(&mcp.ToolAnnotations{ReadOnlyHint: true}))
	require.Equal(t, oncekey.Idempotent, mcptools.SuggestEffect(&mcp.ToolAnnotations{IdempotentHint: true}))
	// Round trip: what Annotations says of a class suggests that class back.
	for _, e := range []oncekey.Effect{oncekey.ReadOnly, oncekey.Idempotent, oncekey.Effectful} {
		require.Equal(t, e, mcptools.SuggestEffect(mcptools.Annotations(oncekey.Policy{Effect: e})))
	}
}
