package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestAgentLoop runs the cookbook-shaped agent with oncekey added by registration alone, then on
// plain Temporal, against the same faults: a weather 503, a ticket answer lost after the ticket
// was opened, the model proposing the same ticket again, a worker restart while a ticket call
// waits for its answer, and a second conversation refunding the same order. The counts are the
// services' own ledgers.
func TestAgentLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a dev server")
	}
	pool := testenv.Postgres(t)
	c := testenv.Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	rep, err := Run(ctx, Config{Client: c, HostPort: testenv.TemporalHostPort(t), Namespace: "default", Pool: pool})
	require.NoError(t, err)
	defer func() {
		if !t.Failed() {
			return
		}
		for _, id := range append(rep.Oncekey.WorkflowIDs, rep.Plain.WorkflowIDs...) {
			it := c.GetWorkflowHistory(ctx, id, "", false, 0)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					break
				}
				t.Logf("%s %d %s %v", id, ev.GetEventId(), ev.GetEventType(), ev.GetAttributes())
			}
		}
	}()
	var out strings.Builder
	rep.print(&out)
	t.Log("\n" + out.String())

	// With oncekey: one ticket per intended call. The lost answer's ticket and its re-proposal
	// are one (the re-proposal never reached the ticket system), and so is the courier ticket
	// whose worker restarted; one refund for the order across both conversations.
	o := rep.Oncekey.Ledger
	require.Equal(t, 1, o.LostAnswers)
	require.Equal(t, 1, rep.Oncekey.Restarts)
	require.Len(t, o.Tickets, 2)
	require.Equal(t, 2, o.Requests["tickets"], "the re-proposal and the restarted call must not reach the ticket system")
	require.Equal(t, CourierTicket, o.Tickets[1].Subject)
	require.Len(t, o.Refunds, 1)
	require.Equal(t, 1, o.Requests["refunds"], "the second conversation's refund must be answered from the record")
	require.Equal(t, 2, o.Requests["weather"], "the read-only weather call is retried after its 503")

	// What the model read: the ticket the lost answer opened (found by the receipt lookup), the
	// same ticket for the re-proposal, the courier ticket opened before the restart, and the
	// first conversation's refund in the second.
	first, second := rep.Oncekey.Read[FirstConversation], rep.Oncekey.Read[SecondConversation]
	require.Len(t, first, 4)
	require.Contains(t, first[0], `"forecast"`)
	require.Equal(t, encode(t, o.Tickets[0]), first[1])
	require.Equal(t, first[1], first[2])
	require.Equal(t, encode(t, o.Refunds[0]), first[3])
	require.Equal(t, []string{encode(t, o.Tickets[1]), first[3]}, second)
	require.Equal(t, Scripts()[SecondConversation].Final, rep.Oncekey.Answers[SecondConversation])

	// The store: the tickets and the refund applied, nothing left unknown. Both tickets were
	// settled by the receipt lookup, which gave their effect references; the refund tool
	// records none.
	page, err := pgstore.New(pool, nil).List(ctx, &oncekeystore.ListParams{})
	require.NoError(t, err)
	applied := map[string][]string{}
	for _, r := range page.Records {
		require.Equal(t, oncekeystore.StatusApplied, r.Status, "%s %s", r.Tool, r.OperationKey)
		applied[r.Tool] = append(applied[r.Tool], r.EffectReference)
	}
	require.ElementsMatch(t, []string{"T-1", "T-2"}, applied[ToolTicket])
	require.Equal(t, []string{""}, applied[ToolRefund])
	require.Len(t, page.Records, 3, "only the Effectful tools are recorded")

	// Plain Temporal, same workflow and faults: the lost answer is retried into a second ticket,
	// the re-proposal opens a third, the restarted call a fifth beside the fourth, and the
	// second conversation refunds the order again.
	p := rep.Plain.Ledger
	require.Equal(t, 1, p.LostAnswers)
	require.Equal(t, 1, rep.Plain.Restarts)
	require.Len(t, p.Tickets, 5)
	require.Len(t, p.Refunds, 2)
	require.Equal(t, p.Refunds[0].OrderID, p.Refunds[1].OrderID)
	require.Equal(t, "agentloop: oncekey: tickets=2 refunds=1 | plain retries: tickets=5 refunds=2", rep.Summary())
}

func encode(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestOrderKeyRefusesAMissingOrder: a refund without an order_id is never keyed, so refunds that
// lack one are not merged into one operation.
func TestOrderKeyRefusesAMissingOrder(t *testing.T) {
	for _, args := range []string{`{}`, `{"order_id":""}`, `{"order_id":"  "}`, `null`} {
		_, err := orderKey(oncekey.Operation{ArgsJSON: json.RawMessage(args)})
		require.Error(t, err, args)
	}
	k, err := orderKey(oncekey.Operation{ArgsJSON: json.RawMessage(`{"order_id":"A-1001","amount_cents":4200}`)})
	require.NoError(t, err)
	require.Equal(t, "order:A-1001", k)
}

// TestScriptedModelKeepsToTheWire: the scripted model answers openai-go's Responses requests
// with the script's next call, and refuses a conversation whose tool call has no output, as the
// Responses API does.
func TestScriptedModelKeepsToTheWire(t *testing.T) {
	m, err := StartModel(Scripts())
	require.NoError(t, err)
	defer m.Close()
	a := &Activities{ModelBaseURL: m.BaseURL, APIKey: "scripted"}
	ctx := context.Background()
	user := InputItem{Type: "message", Role: "user", Content: SecondConversation}

	res, err := a.OpenAIResponsesCreate(ctx, ResponsesRequest{Model: ModelName, Input: []InputItem{user}, Tools: ToolDefinitions()})
	require.NoError(t, err)
	require.Len(t, res.ToolCalls, 1)
	require.Equal(t, ToolTicket, res.ToolCalls[0].Name)
	require.JSONEq(t, `{"subject":"`+CourierTicket+`","body":"The customer says the courier was rude."}`, res.ToolCalls[0].Arguments)

	call := InputItem{Type: "function_call", CallID: res.ToolCalls[0].CallID, Name: ToolTicket, Arguments: res.ToolCalls[0].Arguments}
	_, err = a.OpenAIResponsesCreate(ctx, ResponsesRequest{Model: ModelName, Input: []InputItem{user, call}, Tools: ToolDefinitions()})
	requireAPIError(t, err, "without an output")

	out := InputItem{Type: "function_call_output", CallID: call.CallID, Output: `{"id":"T-1"}`}
	res, err = a.OpenAIResponsesCreate(ctx, ResponsesRequest{Model: ModelName, Input: []InputItem{user, call, out}, Tools: ToolDefinitions()})
	require.NoError(t, err)
	require.Equal(t, ToolRefund, res.ToolCalls[0].Name)
	require.Equal(t, []string{`{"id":"T-1"}`}, m.Read(SecondConversation))

	_, err = a.OpenAIResponsesCreate(ctx, ResponsesRequest{Model: ModelName, Input: []InputItem{user}, Tools: ToolDefinitions()[:1]})
	requireAPIError(t, err, "does not offer")
}

// requireAPIError checks that err is a 400 from the API whose message contains want.
func requireAPIError(t *testing.T, err error, want string) {
	t.Helper()
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.StatusCode)
	require.Contains(t, apiErr.Message, want)
}
