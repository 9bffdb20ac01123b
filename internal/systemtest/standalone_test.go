package systemtest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// Standalone activities (client.ExecuteActivity, no workflow) on the dev server: the worker keys
// them by their activity ID, replays a repeat, reconciles an unknown outcome and asks for
// approvals itself (interceptor/standalone.go).

// executeStandalone starts CreateTicket as a standalone activity under id and returns its result
// as oncekey.Label reads it, with the error handle.Get gave.
func (e *e2e) executeStandalone(t *testing.T, id string, in TicketRequest) (oncekey.ToolResult, error) {
	t.Helper()
	h, err := e.c.ExecuteActivity(context.Background(), client.StartActivityOptions{
		ID: id, TaskQueue: e.tq, StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second},
	}, "CreateTicket", in)
	require.NoError(t, err)
	var raw converter.RawValue
	err = h.Get(testCtx(t), &raw)
	if err != nil {
		return oncekey.Label(nil, err), err
	}
	return oncekey.Label(raw, nil), nil
}

// ticketOf decodes a labelled result's ticket.
func ticketOf(t *testing.T, tr oncekey.ToolResult) Ticket {
	t.Helper()
	b, ok := tr.Result.(json.RawMessage)
	require.True(t, ok, "the result is JSON: %T", tr.Result)
	var tk Ticket
	require.NoError(t, json.Unmarshal(b, &tk))
	return tk
}

// ModelToolCall is one tool call a model returned: its ID, the tool's name and its arguments as
// JSON text.
type ModelToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolTurn is one entry of a conversation's transcript: what a tool call came to, for the model.
type ToolTurn struct {
	ToolCallID string             `json:"tool_call_id"`
	Content    oncekey.ToolResult `json:"content"`
}

// ChatTurn runs the tool calls a model returned in one turn of a conversation, for a chat server
// that is not a workflow: each as a standalone activity whose ID names the intended effect (the
// conversation and the model's tool call ID), so a turn run again after the server crashed
// replays what already happened instead of doing it twice.
func ChatTurn(ctx context.Context, c client.Client, taskQueue, conversation string, calls []ModelToolCall) []ToolTurn {
	var transcript []ToolTurn
	for _, call := range calls {
		h, err := c.ExecuteActivity(ctx, client.StartActivityOptions{
			ID:                  conversation + "/" + call.ID,
			TaskQueue:           taskQueue,
			StartToCloseTimeout: time.Minute,
		}, call.Name, json.RawMessage(call.Arguments))
		var raw converter.RawValue
		if err == nil {
			err = h.Get(ctx, &raw)
		}
		// The model reads the label (res.Text says what to do next); err is for the logs.
		res := oncekey.Label(raw, err)
		transcript = append(transcript, ToolTurn{ToolCallID: call.ID, Content: res})
	}
	return transcript
}

// A standalone activity run twice under one ID, the second after the first completed (Temporal's
// default reuse policy starts it again): one effect, the second a replay of the first's result.
// Another ID is another operation.
func TestE2EStandaloneSameIDReplays(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	args, err := json.Marshal(req)
	require.NoError(t, err)
	calls := []ModelToolCall{{ID: "call_1", Name: "CreateTicket", Arguments: string(args)}}

	first := ChatTurn(testCtx(t), e.c, e.tq, "conv-1001", calls)[0].Content
	require.Equal(t, oncekey.OutcomeApplied, first.Status, first.Text)
	require.NotEmpty(t, first.OperationKey)
	// The chat server crashed before it saved the transcript and runs the turn again.
	second := ChatTurn(testCtx(t), e.c, e.tq, "conv-1001", calls)[0].Content
	require.Equal(t, oncekey.OutcomeReplayed, second.Status, "the same activity ID replays")
	require.Equal(t, first.OperationKey, second.OperationKey)
	require.Equal(t, ticketOf(t, first), ticketOf(t, second), "the caller gets the first result")
	requireRuns(t, l, 1, 1)

	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: first.OperationKey})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Empty(t, rec.WorkflowID)
	require.Equal(t, "activity/conv-1001/call_1", rec.StepID)

	other, err := e.executeStandalone(t, "conv-1002/call_1", req)
	require.NoError(t, err)
	require.Equal(t, oncekey.OutcomeApplied, other.Status)
	require.NotEqual(t, first.OperationKey, other.OperationKey, "another activity ID is another operation")
	requireRuns(t, l, 2, 2)
}

// The downstream commits and the response is lost: the outcome is unknown, the worker starts the
// reconciliation workflow itself, a person resolves it (the Update `oncekey resolve` sends), and
// the caller's handle.Get gets the result, labelled applied and confirmed. One effect; a repeat
// under the same ID replays it.
func TestE2EStandaloneLostResponseReconciled(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})

	type answer struct {
		tr  oncekey.ToolResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		tr, err := e.executeStandalone(t, "charge-7", req)
		got <- answer{tr, err}
	}()
	key := e.waitingKey(t)
	st, err := reconcile.Status(context.Background(), e.c, key)
	require.NoError(t, err)
	require.Equal(t, "CreateTicket", st.Tool)
	require.Equal(t, "activity/charge-7", st.StepID)
	require.Equal(t, oncekeystore.StatusUnknown, st.RecordStatus)
	requireRuns(t, l, 1, 1)

	landed, ok := l.lookup(key)
	require.True(t, ok, "the body passed its operation key downstream")
	body, err := json.Marshal(landed)
	require.NoError(t, err)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Epoch: 1, Outcome: reconcile.Applied, Result: body, EffectReference: landed.ID, ResolvedBy: "alice", Note: "found it downstream",
	}))
	var a answer
	select {
	case a = <-got:
	case <-time.After(60 * time.Second):
		t.Fatal("the standalone activity did not complete after the resolution")
	}
	require.NoError(t, a.err)
	require.Equal(t, oncekey.OutcomeApplied, a.tr.Status)
	require.Equal(t, oncekey.ReasonConfirmed, a.tr.Reason)
	require.Equal(t, key, a.tr.OperationKey)
	require.Equal(t, landed, ticketOf(t, a.tr))
	requireRuns(t, l, 1, 1)

	again, err := e.executeStandalone(t, "charge-7", req)
	require.NoError(t, err)
	require.Equal(t, oncekey.OutcomeReplayed, again.Status)
	require.Equal(t, landed, ticketOf(t, again))
	requireRuns(t, l, 1, 1)
}

// An approval: the worker writes the request and starts the approval workflow, and the call fails
// at once, non-retryable, ApprovalPending, labelled ask_for_approval. Once a person approves, the
// caller starts the activity again under the same ID and it runs: one effect.
func TestE2EStandaloneApproval(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))

	tr, err := e.executeStandalone(t, "ticket-9", req)
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, oncekey.ErrTypeApprovalPending, appErr.Type())
	require.Equal(t, oncekey.NextAsk, tr.NextAction)
	d, ok := oncekey.ErrorDetails(err)
	require.True(t, ok)
	require.NotNil(t, d.Approval)
	requireRuns(t, l, 0, 0)

	a := e.pendingApproval(t)
	require.Equal(t, d.OperationKey, a.OperationKey)
	require.Equal(t, "ticket for acme: printer on fire", a.Summary)
	e.approve(t, a.OperationKey, "carol")
	var out reconcile.ApprovalOutput
	require.NoError(t, e.c.GetWorkflow(context.Background(), reconcile.ApprovalWorkflowID(a.OperationKey), "").Get(testCtx(t), &out))
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)

	ran, err := e.executeStandalone(t, "ticket-9", req)
	require.NoError(t, err)
	require.Equal(t, oncekey.OutcomeApplied, ran.Status)
	require.Equal(t, a.OperationKey, ran.OperationKey)
	requireRuns(t, l, 1, 1)
}

// stepHeader is a client interceptor that sets oncekey's step ID header on every standalone
// activity it starts: what only oncekey's workflow side may set.
type stepHeader struct {
	tinterceptor.ClientInterceptorBase
}

func (*stepHeader) InterceptClient(next tinterceptor.ClientOutboundInterceptor) tinterceptor.ClientOutboundInterceptor {
	return &stepHeaderOut{ClientOutboundInterceptorBase: tinterceptor.ClientOutboundInterceptorBase{Next: next}}
}

type stepHeaderOut struct {
	tinterceptor.ClientOutboundInterceptorBase
}

func (o *stepHeaderOut) ExecuteActivity(ctx context.Context, in *tinterceptor.ClientExecuteActivityInput) (client.ActivityHandle, error) {
	p, err := converter.GetDefaultDataConverter().ToPayload("create_ticket")
	if err != nil {
		return nil, err
	}
	tinterceptor.Header(ctx)[wire.HeaderStepID] = p
	return o.Next.ExecuteActivity(ctx, in)
}

// A standalone activity whose starter set oncekey's step ID header is refused before anything is
// claimed: its key is the worker's to derive, from the activity ID.
func TestE2EStandaloneHeaderRefused(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	c, err := client.NewClientFromExisting(e.c, client.Options{Interceptors: []tinterceptor.ClientInterceptor{&stepHeader{}}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	h, err := c.ExecuteActivity(context.Background(), client.StartActivityOptions{
		ID: "forged-1", TaskQueue: e.tq, StartToCloseTimeout: time.Minute,
	}, "CreateTicket", req)
	require.NoError(t, err)
	err = h.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, oncekey.ErrTypeConfig, appErr.Type())
	require.Contains(t, detail(err), wire.HeaderStepID)
	requireRuns(t, l, 0, 0)
	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Empty(t, res.Records, "nothing was claimed")
}

// An Idempotent tool as a standalone activity whose response is lost: Temporal retries it under
// the caller's RetryPolicy (there is no workflow side), the downstream deduplicates on the
// operation key, one effect; a repeat under the same ID replays without running the body.
func TestE2EStandaloneIdempotentRetried(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	l.dedupe = true
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Idempotent})
	first, err := e.executeStandalone(t, "sync-3", req)
	require.NoError(t, err)
	require.Equal(t, oncekey.OutcomeApplied, first.Status)
	requireRuns(t, l, 1, 2)
	again, err := e.executeStandalone(t, "sync-3", req)
	require.NoError(t, err)
	require.Equal(t, oncekey.OutcomeReplayed, again.Status)
	require.Equal(t, ticketOf(t, first), ticketOf(t, again))
	requireRuns(t, l, 1, 2)
}

// An unknown outcome nobody decides while the attempt lasts, whether the body returned (its
// response lost) or ran into the attempt's timeout (it hangs after committing): the attempt stops
// its body and its wait a margin before the start-to-close timeout, so the caller gets the
// documented non-retryable oncekey.IndeterminateOutcome error (unknown, next action reconcile),
// not Temporal's timeout. The reconciliation goes on: resolved applied, a start under the same ID
// replays the ticket. One effect.
func TestE2EStandaloneUndecidedIsIndeterminate(t *testing.T) {
	for _, fault := range []string{faultLostAfterCommit, faultHangAfterCommit} {
		t.Run(fault, func(t *testing.T) {
			l := newLedger(fault)
			e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
			id := "charge-8-" + fault // the subtests run in parallel on one server
			h, err := e.c.ExecuteActivity(context.Background(), client.StartActivityOptions{
				ID: id, TaskQueue: e.tq, StartToCloseTimeout: 4 * time.Second,
				RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
			}, "CreateTicket", req)
			require.NoError(t, err)
			err = h.Get(testCtx(t), nil)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr, "not a timeout: %v", err)
			require.Equal(t, oncekey.ErrTypeIndeterminate, appErr.Type())
			require.True(t, appErr.NonRetryable())
			tr := oncekey.Label(nil, err)
			require.Equal(t, oncekey.OutcomeUnknown, tr.Status)
			require.Equal(t, oncekey.NextReconcile, tr.NextAction)
			requireRuns(t, l, 1, 1)

			key := e.waitingKey(t)
			landed, ok := l.lookup(key)
			require.True(t, ok)
			body, err := json.Marshal(landed)
			require.NoError(t, err)
			require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
				Epoch: 1, Outcome: reconcile.Applied, Result: body, EffectReference: landed.ID, ResolvedBy: "alice",
			}))
			again, err := e.executeStandalone(t, id, req)
			require.NoError(t, err)
			require.Equal(t, oncekey.OutcomeReplayed, again.Status)
			require.Equal(t, landed, ticketOf(t, again))
			requireRuns(t, l, 1, 1)
		})
	}
}

// Other arguments under the same activity ID: by default (StepKey) another operation, so a chat
// turn run again with the model's arguments reworded lands a second ticket; with
// Policy.Key ArgsKey("customer") the activity ID and the customer are the operation, so the
// reworded start is refused (oncekey.FingerprintMismatch, not retryable) and the first one's
// start again replays: one ticket.
func TestE2EStandaloneOtherArgumentsSameID(t *testing.T) {
	reworded := req
	reworded.Subject = "printer still on fire"
	t.Run("StepKey", func(t *testing.T) {
		l := newLedger()
		e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
		first, err := e.executeStandalone(t, "conv-7/call_1", req)
		require.NoError(t, err)
		second, err := e.executeStandalone(t, "conv-7/call_1", reworded)
		require.NoError(t, err)
		require.Equal(t, oncekey.OutcomeApplied, second.Status, "another operation")
		require.NotEqual(t, first.OperationKey, second.OperationKey)
		requireRuns(t, l, 2, 2)
	})
	t.Run("ArgsKey", func(t *testing.T) {
		const id = "conv-8/call_1" // the subtests run in parallel on one server
		l := newLedger()
		e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ArgsKey("customer")})
		first, err := e.executeStandalone(t, id, req)
		require.NoError(t, err)
		require.Equal(t, oncekey.OutcomeApplied, first.Status)
		_, err = e.executeStandalone(t, id, reworded)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, oncekey.ErrTypeFingerprintMismatch, appErr.Type())
		require.True(t, appErr.NonRetryable())
		again, err := e.executeStandalone(t, id, req)
		require.NoError(t, err)
		require.Equal(t, oncekey.OutcomeReplayed, again.Status)
		require.Equal(t, ticketOf(t, first), ticketOf(t, again))
		requireRuns(t, l, 1, 1)
	})
}
