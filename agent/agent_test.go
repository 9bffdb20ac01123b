package agent_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
)

// requireModelText checks what a model reads: the fixed text of its status and next action, a
// few hundred bytes at most, and none of the operator's detail the Go error carries.
func requireModelText(t *testing.T, a Answer) {
	t.Helper()
	tr := a.Result
	require.Equal(t, oncekey.ModelText(tr.Status, tr.NextAction, tr.Reason), tr.Text)
	require.LessOrEqual(t, len(tr.Text), 300)
	b, err := json.Marshal(tr)
	require.NoError(t, err)
	for _, detail := range []string{"fingerprint", "oncekey resolve", "Policy.", "127.0.0.1", "10.0.0.7", "warehouse says"} {
		require.NotContains(t, string(b), detail)
	}
}

// A model proposes the same SendInvoice again in a later turn, with a new trace ID (excluded):
// one invoice, and the second call is labelled replayed with the first's key, effect reference
// and result. Other material arguments are another invoice; so is a new step ID.
func TestRepeatedProposalIsReplayed(t *testing.T) {
	e := setup(t)
	out := e.run(t, "invoice-1", LoopInput{Calls: []ModelCall{
		call("SendInvoice", `{"customer":"acme","amount_cents":1200,"trace_id":"p1"}`),
		call("SendInvoice", `{"trace_id":"p2","amount_cents":1200,"customer":"acme"}`),
		call("SendInvoice", `{"customer":"acme","amount_cents":1300,"trace_id":"p3"}`),
		{Tool: "SendInvoice", Args: `{"customer":"acme","amount_cents":1200,"trace_id":"p4"}`, StepID: "second-invoice"},
	}})
	effects, _ := e.b.count("SendInvoice")
	require.Equal(t, 3, effects, "the repeat sent nothing; other arguments and a new step ID each sent one")
	first, again, other, stepped := out[0].Result, out[1].Result, out[2].Result, out[3].Result
	require.Equal(t, oncekey.OutcomeApplied, first.Status)
	require.False(t, first.Replayed)
	require.Equal(t, oncekey.OutcomeReplayed, again.Status)
	require.True(t, again.Replayed)
	require.Regexp(t, `^ok1_[0-9a-f]{64}$`, first.OperationKey)
	require.Equal(t, first.OperationKey, again.OperationKey)
	require.Equal(t, "INV-1", first.EffectReference)
	require.Equal(t, "INV-1", again.EffectReference, "the effect reference comes back with the replay")
	require.Equal(t, first.Result, again.Result)
	require.Equal(t, oncekey.OutcomeApplied, other.Status)
	require.NotEqual(t, first.OperationKey, other.OperationKey)
	require.Equal(t, oncekey.OutcomeApplied, stepped.Status)
	require.Equal(t, "INV-3", stepped.EffectReference)
	for _, a := range out {
		requireModelText(t, a)
		require.Empty(t, a.Err)
	}
	require.Len(t, e.records(t), 3)
}

// The same call made again after a reset of the workflow, in a new run under the same workflow
// ID, and across continue-as-new is the same operation: one invoice each time.
func TestSameCallAcrossRuns(t *testing.T) {
	e := setup(t)
	invoice := call("SendInvoice", `{"customer":"acme","amount_cents":1200,"trace_id":"p1"}`)
	again := call("SendInvoice", `{"customer":"acme","amount_cents":1200,"trace_id":"p9"}`)

	first := e.run(t, "runs-1", LoopInput{Calls: []ModelCall{invoice}})
	require.Equal(t, oncekey.OutcomeApplied, first[0].Result.Status)

	// A new run under the same workflow ID.
	rerun := e.run(t, "runs-1", LoopInput{Calls: []ModelCall{again}})
	require.Equal(t, oncekey.OutcomeReplayed, rerun[0].Result.Status)
	require.Equal(t, first[0].Result.OperationKey, rerun[0].Result.OperationKey)

	// A reset to the first workflow task: the new run makes the call again.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := e.c.DescribeWorkflow(ctx, "runs-1", "")
	require.NoError(t, err)
	desc := d.RawResponse
	resetTo := int64(0)
	it := e.c.GetWorkflowHistory(ctx, "runs-1", desc.WorkflowExecutionInfo.Execution.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() && resetTo == 0 {
		ev, err := it.Next()
		require.NoError(t, err)
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			resetTo = ev.GetEventId()
		}
	}
	reset, err := e.c.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 "default",
		WorkflowExecution:         desc.WorkflowExecutionInfo.Execution,
		Reason:                    "test",
		WorkflowTaskFinishEventId: resetTo,
		RequestId:                 "reset-runs-1",
	})
	require.NoError(t, err)
	var afterReset []Answer
	require.NoError(t, e.c.GetWorkflow(ctx, "runs-1", reset.GetRunId()).Get(ctx, &afterReset))
	require.Equal(t, oncekey.OutcomeReplayed, afterReset[0].Result.Status)

	// Continue-as-new between two proposals of the same call.
	can := e.run(t, "runs-2", LoopInput{Calls: []ModelCall{invoice, again}, ContinueAsNewAfter: 1})
	require.Len(t, can, 2)
	require.Equal(t, oncekey.OutcomeApplied, can[0].Result.Status)
	require.Equal(t, oncekey.OutcomeReplayed, can[1].Result.Status)

	effects, _ := e.b.count("SendInvoice")
	require.Equal(t, 2, effects, "one invoice per workflow ID")
}

// Two ExplicitKey tools whose keys are one business ID (an order ID) are two operations.
func TestExplicitKeysAreScopedToTheTool(t *testing.T) {
	e := setup(t)
	out := e.run(t, "orders-1", LoopInput{Calls: []ModelCall{
		call("RefundOrder", `{"order_id":"o-1001"}`),
		call("CancelOrder", `{"order_id":"o-1001"}`),
	}})
	for _, a := range out {
		require.Equal(t, oncekey.OutcomeApplied, a.Result.Status, a.Err)
	}
	refunds, _ := e.b.count("RefundOrder")
	cancels, _ := e.b.count("CancelOrder")
	require.Equal(t, 1, refunds)
	require.Equal(t, 1, cancels)
	require.NotEqual(t, out[0].Result.OperationKey, out[1].Result.OperationKey)
}

// A tool that takes map[string]any decodes 2^53+1 and 2^53 into one float64; the calls are two
// operations all the same, because identity comes from the arguments as the workflow scheduled
// them. The same number again is a replay. Likewise for tools taking any, json.RawMessage and a
// typed struct.
func TestNumbersBeyond2To53AreExact(t *testing.T) {
	e := setup(t)
	for _, tool := range []string{"ChargeAny", "ChargeRaw", "ChargeTyped"} {
		out := e.run(t, "charges-"+tool, LoopInput{Calls: []ModelCall{
			call(tool, `{"order":9007199254740993}`),
			call(tool, `{"order":9007199254740992}`),
			call(tool, `{"order": 9007199254740992}`),
		}})
		require.Equal(t, []oncekey.Outcome{oncekey.OutcomeApplied, oncekey.OutcomeApplied, oncekey.OutcomeReplayed},
			[]oncekey.Outcome{out[0].Result.Status, out[1].Result.Status, out[2].Result.Status}, tool)
		effects, _ := e.b.count(tool)
		require.Equal(t, 2, effects, tool)
	}
	out := e.run(t, "charges-1", LoopInput{Calls: []ModelCall{
		call("ChargeOrder", `{"order":9007199254740993}`),
		call("ChargeOrder", `{"order":9007199254740992}`),
		call("ChargeOrder", `{"order":9007199254740993.0}`),
	}})
	require.Equal(t, oncekey.OutcomeApplied, out[0].Result.Status, out[0].Err)
	require.Equal(t, oncekey.OutcomeApplied, out[1].Result.Status, out[1].Err)
	require.NotEqual(t, out[0].Result.OperationKey, out[1].Result.OperationKey)
	effects, _ := e.b.count("ChargeOrder")
	require.Equal(t, 2, effects)
	// 9007199254740993.0 has a fraction part: it is read as a double, which is 2^53, the second call.
	require.Equal(t, oncekey.OutcomeReplayed, out[2].Result.Status, out[2].Err)
	require.Equal(t, out[1].Result.OperationKey, out[2].Result.OperationKey)
}

// One MCP-proxy-style activity type carries a ReadOnly and an Effectful tool: only the Effectful
// one is claimed, its Temporal retries are turned off, and a re-proposal of it with a new call
// ID is a replay; the ReadOnly one runs every time under the user's retry policy.
func TestMcpProxyToolsHaveTheirOwnPolicies(t *testing.T) {
	e := setup(t)
	out := e.run(t, "mcp-1", LoopInput{Calls: []ModelCall{
		{Tool: "read_file", Args: `{"path":"/tmp/a"}`, Mcp: true},
		{Tool: "read_file", Args: `{"path":"/tmp/a"}`, Mcp: true},
		{Tool: "delete_file", Args: `{"path":"/tmp/a"}`, Mcp: true},
		{Tool: "delete_file", Args: `{"path":"/tmp/a"}`, Mcp: true},
	}})
	_, reads := e.b.count("read_file")
	deletes, _ := e.b.count("delete_file")
	require.Equal(t, 2, reads, "ReadOnly: not claimed, runs every time")
	require.Equal(t, 1, deletes, "Effectful: the re-proposal with a new call ID is a replay")
	require.Equal(t, oncekey.OutcomeApplied, out[0].Result.Status)
	require.Empty(t, out[0].Result.OperationKey, "nothing claimed, no key")
	require.Equal(t, oncekey.OutcomeApplied, out[2].Result.Status)
	require.Equal(t, oncekey.OutcomeReplayed, out[3].Result.Status)

	recs := e.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, "delete_file", recs[0].Tool)
	require.Equal(t, oncekeystore.StatusApplied, recs[0].Status)

	// Retries: the Effectful tool's activities are scheduled with one attempt each; the ReadOnly
	// tool's keep the workflow's retry policy (two attempts).
	attempts := map[string][]int32{}
	ctx := context.Background()
	it := e.c.GetWorkflowHistory(ctx, "mcp-1", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			var in McpCall
			require.NoError(t, json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in))
			attempts[in.Tool] = append(attempts[in.Tool], a.GetRetryPolicy().GetMaximumAttempts())
		}
	}
	require.Equal(t, []int32{2, 2}, attempts["read_file"])
	require.Equal(t, []int32{1, 1}, attempts["delete_file"])
}

// Every status of the tool call, with its model text: applied and replayed above; here
// conflict (a reused step with other arguments), rejected (an unknown tool, arguments that are
// not JSON),
// in_flight, expired, unknown and failed.
func TestToolCallStatuses(t *testing.T) {
	e := setup(t)
	out := e.run(t, "statuses-1", LoopInput{Calls: []ModelCall{
		{Tool: "SendInvoice", Args: `{"customer":"acme","amount_cents":1}`, StepID: "inv"},
		{Tool: "SendInvoice", Args: `{"customer":"acme","amount_cents":2}`, StepID: "inv"},
		call("NoSuchTool", `{}`),
		call("SendInvoice", `{"customer":"acme",`),
		{Tool: "SlowReport", Args: `{"order_id":"o-1"}`, Async: true, OneAttempt: true},
		{Tool: "SlowReport", Args: `{"order_id":"o-1"}`, Async: true, OneAttempt: true},
		call("PostNote", `{"order_id":"o-1"}`),
		{Tool: "PostNote", Args: `{"order_id":"o-1"}`, SleepBefore: 3 * time.Second},
		call("WireMoney", `{"order_id":"o-1"}`),
		call("ShipOrder", `{"order_id":"o-1"}`),
	}})
	status := func(i int) oncekey.Outcome { return out[i].Result.Status }
	require.Equal(t, oncekey.OutcomeApplied, status(0))
	require.Equal(t, oncekey.OutcomeConflict, status(1))
	require.Equal(t, oncekey.NextFix, out[1].Result.NextAction)
	require.Contains(t, out[1].Err, "different arguments", "the operator's detail stays in the Go error")
	require.Equal(t, oncekey.OutcomeRejected, status(2))
	require.Equal(t, oncekey.NextFix, out[2].Result.NextAction)
	require.Contains(t, out[2].Err, "NoSuchTool")
	require.Equal(t, oncekey.OutcomeRejected, status(3))
	require.Equal(t, oncekey.NextFix, out[3].Result.NextAction)

	// Two identical SlowReport calls at once: one runs, the other is told it is in flight.
	slow := []oncekey.Outcome{status(4), status(5)}
	require.ElementsMatch(t, []oncekey.Outcome{oncekey.OutcomeApplied, oncekey.OutcomeInFlight}, slow)
	inflight := out[4].Result
	if status(5) == oncekey.OutcomeInFlight {
		inflight = out[5].Result
	}
	require.True(t, inflight.SafeToRepeat)
	require.Equal(t, oncekey.NextPoll, inflight.NextAction)
	require.Positive(t, inflight.RetryAfter)

	require.Equal(t, oncekey.OutcomeApplied, status(6))
	require.Equal(t, oncekey.OutcomeExpired, status(7), out[7].Err)
	require.Equal(t, oncekey.NextAsk, out[7].Result.NextAction)
	require.Equal(t, oncekey.OutcomeUnknown, status(8), out[8].Err)
	require.Equal(t, oncekey.NextReconcile, out[8].Result.NextAction)
	require.False(t, out[8].Result.SafeToRepeat)
	require.Equal(t, oncekey.OutcomeFailed, status(9), out[9].Err)
	require.Equal(t, oncekey.NextStop, out[9].Result.NextAction)

	seen := map[oncekey.Outcome]bool{}
	for _, a := range out {
		requireModelText(t, a)
		seen[a.Result.Status] = true
	}
	for _, s := range []oncekey.Outcome{oncekey.OutcomeApplied, oncekey.OutcomeRejected, oncekey.OutcomeInFlight,
		oncekey.OutcomeExpired, oncekey.OutcomeUnknown, oncekey.OutcomeFailed} {
		require.True(t, seen[s], "no call ended %s", s)
	}
	invoices, _ := e.b.count("SendInvoice")
	require.Equal(t, 1, invoices)
	reports, _ := e.b.count("SlowReport")
	require.Equal(t, 1, reports)
	wires, _ := e.b.count("WireMoney")
	require.Equal(t, 1, wires, "an unknown outcome is not retried blindly")
}
