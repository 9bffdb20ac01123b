package desk

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// sampleResult is a conversation with a first call, a re-proposal (new ID, new trace ID) and the
// same tool with other arguments.
func sampleResult() AgentResult {
	mail := func(id, template, trace string, o Outcome) (ToolCall, Call, ChatMessage) {
		args := `{"request_id":"R-1","ticket_id":"TCK-1","to":"a@example.com","template":"` + template + `","trace_id":"` + trace + `"}`
		tc := ToolCall{ID: id, Name: ToolSendConfirmation, Arguments: args}
		return tc, Call{Turn: 1, ID: id, Tool: ToolSendConfirmation, Arguments: args, Outcome: o},
			ChatMessage{Role: "tool", ToolCallID: id, Content: o.forModel()}
	}
	applied := Outcome{Status: oncekey.OutcomeApplied, OperationKey: "ok1_a", EffectReference: "MSG-1", Text: "Done.", Result: json.RawMessage(`{"id":"MSG-1"}`)}
	replayed := Outcome{Status: oncekey.OutcomeReplayed, Replayed: true, OperationKey: "ok1_a", EffectReference: "MSG-1", Text: "Already done."}
	other := Outcome{Status: oncekey.OutcomeApplied, OperationKey: "ok1_b", EffectReference: "MSG-2", Text: "Done.", Error: "operator detail"}
	tc1, c1, m1 := mail("call_1", "ticket_opened", "tr-1", applied)
	tc2, c2, m2 := mail("call_2", "ticket_opened", "tr-2", replayed)
	tc3, c3, m3 := mail("call_3", "refund_issued", "tr-3", other)
	c2.Turn, c3.Turn = 2, 3
	return AgentResult{
		RequestID: "R-1", Answer: "All done.", Turns: 4,
		Messages: []ChatMessage{
			{Role: "system", Content: "sys"}, {Role: "user", Content: "req"},
			{Role: "assistant", ToolCalls: []ToolCall{tc1}}, m1,
			{Role: "assistant", Content: "Let me check.", ToolCalls: []ToolCall{tc2}}, m2,
			{Role: "assistant", ToolCalls: []ToolCall{tc3}}, m3,
			{Role: "assistant", Content: "All done."},
		},
		Calls: []Call{c1, c2, c3},
	}
}

func TestClassifyCalls(t *testing.T) {
	r := sampleResult()
	require.Equal(t, []string{KindFirst, KindReproposal, KindChanged}, classify(r.Calls))
	lookup := Call{Tool: ToolLookupCustomer, Arguments: `{"customer_id":"C-1"}`}
	other := Call{Tool: ToolLookupCustomer, Arguments: `{"customer_id":"C-2"}`}
	require.Equal(t, []string{KindFirst, KindReproposal, KindFirst}, classify([]Call{lookup, lookup, other}),
		"another read is not a changed operation")
	require.Equal(t, material(json.RawMessage(`{"a":1,"trace_id":"x"}`)), material(json.RawMessage(`{"trace_id":"y","a":1}`)))
	require.NotEqual(t, material(json.RawMessage(`{"a":1}`)), material(json.RawMessage(`{"a":2}`)))
}

func TestWriteTranscript(t *testing.T) {
	r := sampleResult()
	var buf bytes.Buffer
	require.NoError(t, WriteTranscript(&buf, r))
	var lines []map[string]any
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var l map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		lines = append(lines, l)
	}
	require.Len(t, lines, len(r.Messages), "one line per message the model saw")
	require.Equal(t, "system", lines[0]["role"])
	require.Equal(t, "assistant", lines[2]["role"])
	require.EqualValues(t, 1, lines[2]["turn"])
	calls := lines[2]["tool_calls"].([]any)
	require.Equal(t, "call_1", calls[0].(map[string]any)["id"])

	again := lines[5]
	require.Equal(t, "tool", again["role"])
	require.EqualValues(t, 2, again["turn"])
	require.Equal(t, "call_2", again["tool_call_id"])
	require.Equal(t, ToolSendConfirmation, again["tool"])
	require.Equal(t, "replayed", again["status"])
	require.Equal(t, true, again["replayed"])
	require.Equal(t, KindReproposal, again["kind"])
	require.Equal(t, "ok1_a", again["operation_key"])
	require.Equal(t, "MSG-1", again["effect_reference"])
	var seen map[string]any
	require.NoError(t, json.Unmarshal([]byte(again["content"].(string)), &seen), "content is what the model read")
	require.Equal(t, "replayed", seen["status"])
	require.Equal(t, "Already done.", seen["text"])

	require.Equal(t, KindChanged, lines[7]["kind"])
	require.NotContains(t, buf.String()+lines[7]["content"].(string), "operator detail", "the Go error never reaches the model")
	require.Equal(t, "All done.", lines[8]["content"])
}

func TestWriteTranscriptsOneFilePerRequest(t *testing.T) {
	dir := t.TempDir()
	a, b := sampleResult(), sampleResult()
	b.RequestID = "../escape"
	require.NoError(t, writeTranscripts(filepath.Join(dir, "oncekey"), []AgentResult{a, b}))
	files, err := filepath.Glob(filepath.Join(dir, "oncekey", "*.jsonl"))
	require.NoError(t, err)
	require.Len(t, files, 2)
	_, err = os.Stat(filepath.Join(dir, "oncekey", "R-1.jsonl"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "oncekey", "_._escape.jsonl"))
	require.NoError(t, err, "a request ID cannot leave the directory")
}
