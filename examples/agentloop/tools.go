package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// The tools' names, as the model calls them.
const (
	ToolWeather = "get_weather"
	ToolTicket  = "create_ticket"
	ToolRefund  = "refund"
)

// ToolDefinitions are the tools offered to the model.
func ToolDefinitions() []ToolDefinition {
	obj := func(required []string, props map[string]any) map[string]any {
		return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
	}
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	return []ToolDefinition{
		{Name: ToolWeather, Description: "Get the current weather in a city.",
			Parameters: obj([]string{"city"}, map[string]any{"city": str("The city, e.g. Berlin.")})},
		{Name: ToolTicket, Description: "Open a support ticket.",
			Parameters: obj([]string{"subject", "body"}, map[string]any{"subject": str("One line."), "body": str("What the customer needs.")})},
		{Name: ToolRefund, Description: "Refund an order in full or in part.",
			Parameters: obj([]string{"order_id", "amount_cents", "reason"}, map[string]any{
				"order_id": str("The order, e.g. A-1001."), "reason": str("Why, for the records."),
				"amount_cents": map[string]any{"type": "integer", "description": "The amount in cents."}})},
	}
}

// NewTools returns the handlers of the tools, calling the services at base with hc.
func NewTools(base string, hc *http.Client) map[string]ToolHandler {
	t := &tools{base: base, hc: hc}
	return map[string]ToolHandler{ToolWeather: t.weather, ToolTicket: t.ticket, ToolRefund: t.refund}
}

type tools struct {
	base string
	hc   *http.Client
}

// weather reads the weather service: a read, safe to repeat.
func (t *tools) weather(ctx context.Context, args map[string]interface{}) (string, error) {
	city, _ := args["city"].(string)
	return t.do(ctx, http.MethodGet, "/weather?city="+url.QueryEscape(city), nil)
}

// ticket opens a ticket: the ticket service opens one per request it gets.
func (t *tools) ticket(ctx context.Context, args map[string]interface{}) (string, error) {
	return t.do(ctx, http.MethodPost, "/tickets", args)
}

// refund refunds an order: the payment service refunds once per request it gets.
func (t *tools) refund(ctx context.Context, args map[string]interface{}) (string, error) {
	return t.do(ctx, http.MethodPost, "/refunds", args)
}

// do sends one request and returns the answer's body; a status other than 200 is an error.
func (t *tools) do(ctx context.Context, method, path string, body any) (string, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return "", err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.base+path, rd)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return strings.TrimSpace(string(b)), nil
}
