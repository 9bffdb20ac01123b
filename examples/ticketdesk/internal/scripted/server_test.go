package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/require"
)

const requestJSON = `{"id":"REQ-7","customer_id":"C-1","subject":"Broken","body":"It broke.","priority":"normal",` +
	`"refund":{"order_id":"O-9","amount_cents":1299,"currency":"EUR","reason":"damaged"}}`

// client returns the official OpenAI client pointed at a scripted server started with opts.
func client(t *testing.T, opts Options) (openai.Client, *Server) {
	t.Helper()
	srv, err := Start(opts)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return openai.NewClient(option.WithBaseURL(srv.BaseURL), option.WithAPIKey("unused"), option.WithMaxRetries(0)), srv
}

func tools(names ...string) []openai.ChatCompletionToolUnionParam {
	var out []openai.ChatCompletionToolUnionParam
	for _, n := range names {
		out = append(out, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: n, Description: openai.String("tool " + n),
			Parameters: shared.FunctionParameters{"type": "object"},
		}))
	}
	return out
}

var allTools = tools("lookup_customer", "CreateTicket", "SendConfirmation", "IssueRefund", "GrantCredit")

// call is one tool call the model made, as the test's loop ran it.
type call struct {
	ID, Name string
	Args     map[string]any
}

// answer decides a tool message's content for a call; the n-th call of that tool is n (1-based).
type answer func(c call, n int) string

// applied answers every call as applied, with a plausible result.
func applied(c call, n int) string {
	res := map[string]any{}
	switch c.Name {
	case "lookup_customer":
		res = map[string]any{"id": c.Args["customer_id"], "email": "ada@example.com"}
	case "CreateTicket":
		res = map[string]any{"id": fmt.Sprintf("TCK-%d", n)}
	case "SendConfirmation":
		res = map[string]any{"id": fmt.Sprintf("MSG-%d", n)}
	case "IssueRefund":
		res = map[string]any{"id": fmt.Sprintf("RF-%d", n)}
	}
	b, _ := json.Marshal(map[string]any{"status": "applied", "next_action": "none", "safe_to_repeat": true, "result": res,
		"text": "Done."})
	return string(b)
}

func status(s, next string) string {
	b, _ := json.Marshal(map[string]any{"status": s, "next_action": next, "text": "status " + s})
	return string(b)
}

// converse runs a tool loop against the server until the model answers without tool calls (at
// most 20 turns) and returns the calls in order and the final text.
func converse(t *testing.T, c openai.Client, ans answer) ([]call, string) {
	t.Helper()
	msgs := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are a support agent."),
		openai.UserMessage("Support request:\n" + requestJSON),
	}
	var calls []call
	count := map[string]int{}
	for range 20 {
		resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: ModelName, Messages: msgs, Tools: allTools,
		})
		require.NoError(t, err)
		require.Len(t, resp.Choices, 1)
		m := resp.Choices[0].Message
		if len(m.ToolCalls) == 0 {
			require.Equal(t, "stop", resp.Choices[0].FinishReason)
			return calls, m.Content
		}
		require.Equal(t, "tool_calls", resp.Choices[0].FinishReason)
		msgs = append(msgs, m.ToParam())
		for _, tc := range m.ToolCalls {
			require.Equal(t, "function", tc.Type)
			var args map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.Function.Arguments), &args))
			cl := call{ID: tc.ID, Name: tc.Function.Name, Args: args}
			calls = append(calls, cl)
			count[cl.Name]++
			msgs = append(msgs, openai.ToolMessage(ans(cl, count[cl.Name]), tc.ID))
		}
	}
	t.Fatal("the model did not finish in 20 turns")
	return nil, ""
}

func names(calls []call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Name)
	}
	return out
}

func TestScriptedHappyPath(t *testing.T) {
	c, srv := client(t, Options{Seed: 1, RepeatPercent: -1, ChangePercent: -1})
	calls, final := converse(t, c, applied)
	require.Equal(t, []string{"lookup_customer", "CreateTicket", "SendConfirmation", "IssueRefund"}, names(calls))
	require.Equal(t, "TCK-1", calls[2].Args["ticket_id"], "the e-mail uses the ticket the tool result named")
	require.Equal(t, "ada@example.com", calls[2].Args["to"], "and the address the lookup returned")
	require.Equal(t, TemplateTicketOpened, calls[2].Args["template"])
	require.EqualValues(t, 1299, calls[3].Args["amount_cents"])
	require.Contains(t, final, "Ticket TCK-1 is open")
	require.Contains(t, final, "refund is issued")
	require.EqualValues(t, 4, srv.Requests(), "lookup and ticket in one turn, then e-mail, refund, answer")
	ids := map[string]bool{}
	for _, cl := range calls {
		require.False(t, ids[cl.ID], "tool-call IDs are unique")
		ids[cl.ID] = true
	}
}

func TestScriptedIsDeterministic(t *testing.T) {
	a, _ := client(t, Options{Seed: 3})
	b, _ := client(t, Options{Seed: 3})
	ca, fa := converse(t, a, applied)
	cb, fb := converse(t, b, applied)
	require.Equal(t, ca, cb)
	require.Equal(t, fa, fb)

	// Other seeds choose other repeats or other IDs.
	differ := false
	for seed := int64(4); seed < 12 && !differ; seed++ {
		o, _ := client(t, Options{Seed: seed})
		co, _ := converse(t, o, applied)
		differ = len(co) != len(ca) || co[0].ID != ca[0].ID
	}
	require.True(t, differ)
}

func TestScriptedProposesAgainWithNewIDAndTrace(t *testing.T) {
	c, _ := client(t, Options{Seed: 1, RepeatPercent: 100, ChangePercent: -1})
	calls, _ := converse(t, c, applied)
	require.Equal(t, []string{"lookup_customer", "CreateTicket", "CreateTicket", "SendConfirmation", "SendConfirmation", "IssueRefund", "IssueRefund"}, names(calls),
		"each effectful call is proposed once more after it applied; the read-only lookup is not")
	for _, pair := range [][2]int{{1, 2}, {3, 4}, {5, 6}} {
		first, again := calls[pair[0]], calls[pair[1]]
		require.NotEqual(t, first.ID, again.ID, "a new tool-call ID")
		require.NotEqual(t, first.Args["trace_id"], again.Args["trace_id"], "regenerated free text")
		delete(first.Args, "trace_id")
		delete(again.Args, "trace_id")
		if first.Name == "SendConfirmation" {
			// The second ticket result names TCK-2; the e-mail follows the latest result.
			require.Equal(t, first.Args["template"], again.Args["template"])
			continue
		}
		require.Equal(t, first.Args, again.Args, "the same material arguments")
	}
}

func TestScriptedGrantsGoldCustomersACredit(t *testing.T) {
	c, _ := client(t, Options{Seed: 1, RepeatPercent: -1, ChangePercent: -1})
	gold := func(cl call, n int) string {
		if cl.Name != "lookup_customer" {
			return applied(cl, n)
		}
		b, _ := json.Marshal(map[string]any{"status": "applied", "next_action": "none",
			"result": map[string]any{"id": cl.Args["customer_id"], "email": "ada@example.com", "tier": CreditTier}})
		return string(b)
	}
	calls, final := converse(t, c, gold)
	require.Equal(t, []string{"lookup_customer", "CreateTicket", "SendConfirmation", "GrantCredit", "IssueRefund"}, names(calls),
		"a gold customer's credit comes once the ticket is open; others get none (TestScriptedHappyPath)")
	cr := calls[3].Args
	require.Equal(t, "ada@example.com", cr["to"], "the confirmation goes to the address the lookup returned")
	require.EqualValues(t, CreditAmountCents, cr["amount_cents"])
	require.Equal(t, "REQ-7", cr["request_id"])
	require.Contains(t, final, "goodwill credit of 5.00 EUR")
}

func TestScriptedSameToolOtherArguments(t *testing.T) {
	c, _ := client(t, Options{Seed: 1, RepeatPercent: -1, ChangePercent: 100})
	calls, _ := converse(t, c, applied)
	require.Equal(t, []string{"lookup_customer", "CreateTicket", "SendConfirmation", "IssueRefund", "SendConfirmation"}, names(calls))
	require.Equal(t, TemplateRefundIssued, calls[4].Args["template"], "a new operation: the e-mail tool with another template")
}

func TestScriptedObeysResultTexts(t *testing.T) {
	t.Run("unknown is not repeated", func(t *testing.T) {
		c, _ := client(t, Options{Seed: 1, RepeatPercent: 100, ChangePercent: -1})
		calls, final := converse(t, c, func(cl call, n int) string {
			if cl.Name == "CreateTicket" {
				return status("unknown", "reconcile")
			}
			return applied(cl, n)
		})
		require.Equal(t, 1, count(calls, "CreateTicket"))
		require.Zero(t, count(calls, "SendConfirmation"), "no e-mail for a ticket whose outcome is unknown")
		require.Contains(t, final, "cannot confirm yet", "the model tells the user the outcome is not known")
	})
	t.Run("in_flight is asked again", func(t *testing.T) {
		c, _ := client(t, Options{Seed: 1, RepeatPercent: -1, ChangePercent: -1})
		calls, _ := converse(t, c, func(cl call, n int) string {
			if cl.Name == "IssueRefund" && n == 1 {
				return status("in_flight", "poll")
			}
			return applied(cl, n)
		})
		require.Equal(t, 2, count(calls, "IssueRefund"))
	})
	t.Run("retryable failures are retried, boundedly", func(t *testing.T) {
		c, _ := client(t, Options{Seed: 1, RepeatPercent: -1, ChangePercent: -1, MaxAttempts: 3})
		calls, final := converse(t, c, func(cl call, n int) string {
			if cl.Name == "SendConfirmation" {
				return status("failed", "poll")
			}
			return applied(cl, n)
		})
		require.Equal(t, 3, count(calls, "SendConfirmation"))
		require.Contains(t, final, "not confirmed")
	})
	t.Run("rejected and stop are not repeated", func(t *testing.T) {
		for _, st := range [][2]string{{"rejected", "ask_for_approval"}, {"failed", "stop"}} {
			c, _ := client(t, Options{Seed: 1, RepeatPercent: 100, ChangePercent: 100})
			calls, final := converse(t, c, func(cl call, n int) string {
				if cl.Name == "IssueRefund" {
					return status(st[0], st[1])
				}
				return applied(cl, n)
			})
			require.Equal(t, 1, count(calls, "IssueRefund"), st)
			require.Contains(t, final, "needs a person")
		}
	})
}

func count(calls []call, name string) int {
	n := 0
	for _, c := range calls {
		if c.Name == name {
			n++
		}
	}
	return n
}

func TestScriptedErrorsAreOpenAIErrors(t *testing.T) {
	c, _ := client(t, Options{})
	ctx := context.Background()
	var apiErr *openai.Error

	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: ModelName, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello, no request here")}, Tools: allTools,
	})
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, 400, apiErr.StatusCode)
	require.Contains(t, apiErr.Message, "no JSON support request")

	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: ModelName, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(requestJSON)}, Tools: tools("lookup_customer"),
	})
	require.True(t, errors.As(err, &apiErr))
	require.Contains(t, apiErr.Message, `"CreateTicket"`, "a tool the request does not define is named")

	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: ModelName, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(requestJSON)}, Tools: allTools,
	})
	for stream.Next() {
	}
	require.True(t, errors.As(stream.Err(), &apiErr), "%v", stream.Err())
	require.Equal(t, 400, apiErr.StatusCode)
}
