package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// editDecision approves key's pending approval with args instead of the model's.
func editDecision(args string) reconcile.Decision {
	return reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada", Reason: "customer agreed to less",
		Arguments: json.RawMessage(args)}
}

// A person approves the model's call with edited arguments: the edit runs once, as a new
// operation linked to the original in both approvals; the original never runs and is settled as
// replaced; the model reads that the call ran with changed arguments, and which. A repeat of the
// original call runs nothing more and tells the model it was handled.
func TestE2EApprovalEditedArgumentsRunOnce(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	const id = "approval-edit"
	run := e.startAgent(t, id, 1)
	a := e.pendingApproval(t)

	out, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, editDecision(`{"customer":"acme","subject":"printer smoking","request_id":"r-1"}`))
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalReplaced, out.Status)
	editKey, err := oncekey.EditKey("default", "default", a.OperationKey, a.Episode)
	require.NoError(t, err)
	require.Equal(t, editKey, out.EditedAs)
	rep, err := reconcile.QueryApproval(context.Background(), e.c, a.OperationKey)
	require.NoError(t, err)
	require.Equal(t, editKey, rep.EditedAs, "the query links the original to its edit")
	require.JSONEq(t, `{"customer":"acme","subject":"printer smoking","request_id":"r-1"}`, string(out.Arguments))

	var got []oncekey.ToolResult
	require.NoError(t, run.Get(testCtx(t), &got))
	tr := got[0]
	require.Equal(t, oncekey.OutcomeApplied, tr.Status, tr.Text)
	require.Equal(t, oncekey.ReasonEdited, tr.Reason)
	require.Equal(t, []string{"subject"}, tr.Changed)
	require.JSONEq(t, `{"customer":"acme","subject":"printer smoking","request_id":"r-1"}`, string(tr.Arguments))
	require.Equal(t, editKey, tr.OperationKey)
	require.Equal(t, oncekey.ModelText(oncekey.OutcomeApplied, oncekey.NextNone, oncekey.ReasonEdited), tr.Text)
	require.NotContains(t, tr.Text, "customer agreed")
	requireRuns(t, l, 1, 1)
	require.Equal(t, "printer smoking", onlyTicket(t, l).Subject, "the edited arguments ran")

	orig, edit := e.approval(t, a.OperationKey), e.approval(t, editKey)
	require.Equal(t, oncekeystore.ApprovalReplaced, orig.Status)
	require.Equal(t, editKey, orig.EditedAs)
	require.Equal(t, "ada", orig.DecidedBy)
	require.Equal(t, oncekeystore.ApprovalApproved, edit.Status)
	require.Equal(t, a.OperationKey, edit.EditOf)
	require.Equal(t, "ticket for acme: printer smoking", edit.Summary, "the summary the worker derives from the edit")
	require.NotEqual(t, orig.Fingerprint, edit.Fingerprint)
	_, err = e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: a.OperationKey})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound, "the original call never claimed")
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: editKey})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.NoError(t, e.replay(t, true, id, reconcile.ApprovalWorkflowID(a.OperationKey)))

	// The model proposes the original call again: nothing more runs, and it reads that it was
	// handled with changed arguments.
	again := e.startAgent(t, id, 1)
	require.NoError(t, again.Get(testCtx(t), &got))
	require.Equal(t, oncekey.OutcomeRejected, got[0].Status)
	require.Equal(t, oncekey.NextStop, got[0].NextAction)
	require.Equal(t, oncekey.ReasonEdited, got[0].Reason)
	requireRuns(t, l, 1, 1)
}

// Edits the worker refuses, each leaving the approval pending and nothing run: arguments that do
// not decode into the tool's input type (an unknown member, a wrong type), that are not an
// object, that are the call's own; a decision that names a tool or another tenant. The update is
// refused before anything is written; a valid denial then still lands.
func TestE2EApprovalEditRefusedLeavesItPending(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	run := e.startAgent(t, "approval-edit-refused", 1)
	a := e.pendingApproval(t)
	for name, c := range map[string]struct {
		d    reconcile.Decision
		want string
	}{
		"unknown member":    {editDecision(`{"customer":"acme","subject":"x","amount":5}`), `unknown field "amount"`},
		"wrong type":        {editDecision(`{"customer":"acme","subject":7}`), "do not decode into"},
		"the call's own":    {editDecision(`{"customer":"acme","subject":"printer on fire","request_id":"r-1"}`), "the call's own"},
		"another tenant":    {func() reconcile.Decision { d := editDecision(`{"customer":"acme"}`); d.Tenant = "other"; return d }(), "tenant"},
		"deny with an edit": {reconcile.Decision{Decision: reconcile.Deny, Tenant: "default", Reason: "no", Arguments: json.RawMessage(`{"subject":"x"}`)}, "only an approval takes edited arguments"},
	} {
		_, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, c.d)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), c.want, name)
	}
	// A raw update naming the tool (an edit of another tool) is refused by the strict decoder.
	h, err := e.c.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{
		WorkflowID: reconcile.ApprovalWorkflowID(a.OperationKey), UpdateName: reconcile.DecideUpdateName, UpdateID: "tool-swap",
		Args:         []any{json.RawMessage(`{"decision":"approve","tenant":"default","tool":"SendMoney","arguments":{"subject":"x"}}`)},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	require.NoError(t, err)
	err = h.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Contains(t, appErr.Error(), `"tool"`)

	stored := e.approval(t, a.OperationKey)
	require.Equal(t, oncekeystore.ApprovalPending, stored.Status, "nothing was decided")
	require.Empty(t, stored.EditedAs)
	requireRuns(t, l, 0, 0)
	_, err = reconcile.Decide(context.Background(), e.c, a.OperationKey, reconcile.Decision{Decision: reconcile.Deny, Tenant: "default", Reason: "done testing"})
	require.NoError(t, err)
	var got []oncekey.ToolResult
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, oncekey.OutcomeRejected, got[0].Status)
	requireRuns(t, l, 0, 0)
}

// The trust rule for edits: a call scheduled by a workflow worker without oncekey's interceptor,
// pointing at an edited approval (the oncekey-edit-of header) with other arguments, is refused
// and runs nothing, from the same workflow ID as well as another; an edit update sent twice with
// one request ID is taken once, and one sent after the decision is refused.
func TestE2EApprovalForgedEditIsRefused(t *testing.T) {
	l := newLedger()
	e := setupE2E(t, l, approvalPolicy(0))
	const id = "approval-edit-forged"
	run := e.startAgent(t, id, 1)
	a := e.pendingApproval(t)
	d := editDecision(`{"customer":"acme","subject":"printer smoking","request_id":"r-1"}`)
	d.RequestID = "edit-1"
	_, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, d)
	require.NoError(t, err)
	var got []oncekey.ToolResult
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, oncekey.ReasonEdited, got[0].Reason)
	requireRuns(t, l, 1, 1)

	// The same update again is taken once: the answer is the decision recorded, nothing more runs;
	// another edit finds no workflow waiting.
	out, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, d)
	require.NoError(t, err)
	require.Equal(t, "edit-1", out.RequestID)
	d.RequestID, d.Arguments = "edit-2", json.RawMessage(`{"customer":"acme","subject":"printer melted"}`)
	_, err = reconcile.Decide(context.Background(), e.c, a.OperationKey, d)
	require.ErrorIs(t, err, reconcile.ErrNoApproval)

	dc := converter.GetDefaultDataConverter()
	fields := map[string]*commonpb.Payload{}
	fields[wire.HeaderTenant], err = dc.ToPayload("default")
	require.NoError(t, err)
	fields[wire.HeaderEditOf], err = dc.ToPayload(a.OperationKey)
	require.NoError(t, err)
	ac, atq := e.attacker(t, fields)
	for _, wid := range []string{id, "attacker-wf"} {
		fr, err := ac.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: wid, TaskQueue: atq, WorkflowExecutionTimeout: time.Minute},
			ForgedCallWorkflow, evilReq, e.tq)
		require.NoError(t, err)
		err = fr.Get(testCtx(t), nil)
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), "%s: %v", wid, err)
		require.Equal(t, oncekey.ErrTypeApproval, appErr.Type(), appErr.Error())
		require.Contains(t, detail(err), "nothing was asked and nothing ran")
	}
	requireRuns(t, l, 1, 1)
	res, err := e.approvals(t).ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{})
	require.NoError(t, err)
	require.Len(t, res.Approvals, 2, "the forged calls asked nothing")
}

// Denied, or asked for changes, with a message for the model: the model reads the message beside
// the fixed text, never the reason; a request for changes tells it to fix the arguments. A repeat
// of the denied call reads the message again without asking.
func TestE2EApprovalMessageForTheModel(t *testing.T) {
	for name, c := range map[string]struct {
		d            reconcile.Decision
		next, reason string
	}{
		"deny": {reconcile.Decision{Decision: reconcile.Deny, Tenant: "default", DecidedBy: "bob", Reason: "fraud flag on acct 991 (ops only)",
			Message: "Refunds for this customer go through the billing team; tell them so."}, oncekey.NextStop, oncekey.ReasonDenied},
		"request changes": {reconcile.Decision{Decision: reconcile.RequestChanges, Tenant: "default", DecidedBy: "bob", Reason: "ops note",
			Message: "Use a subject that names the printer model."}, oncekey.NextFix, oncekey.ReasonChangesRequested},
	} {
		t.Run(name, func(t *testing.T) {
			l := newLedger()
			e := setupE2E(t, l, approvalPolicy(0))
			wid := "approval-message-" + name
			run := e.startAgent(t, wid, 1)
			a := e.pendingApproval(t)
			out, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, c.d)
			require.NoError(t, err)
			require.Equal(t, c.d.Message, out.Message)
			rep, err := reconcile.QueryApproval(context.Background(), e.c, a.OperationKey)
			require.NoError(t, err)
			require.Equal(t, c.d.Message, rep.Message, "the query shows what the model was told")
			require.Equal(t, c.d.Decision == reconcile.RequestChanges, rep.ChangesRequested)
			var got []oncekey.ToolResult
			require.NoError(t, run.Get(testCtx(t), &got))
			for _, tr := range [][]oncekey.ToolResult{got, func() []oncekey.ToolResult {
				again := e.startAgent(t, wid, 1)
				var got []oncekey.ToolResult
				require.NoError(t, again.Get(testCtx(t), &got))
				return got
			}()} {
				require.Equal(t, oncekey.OutcomeRejected, tr[0].Status)
				require.Equal(t, c.next, tr[0].NextAction)
				require.Equal(t, c.reason, tr[0].Reason)
				require.Equal(t, c.d.Message, tr[0].Message)
				b, err := json.Marshal(tr[0])
				require.NoError(t, err)
				require.NotContains(t, string(b), c.d.Reason)
				require.NotContains(t, string(b), "bob")
			}
			stored := e.approval(t, a.OperationKey)
			require.Equal(t, c.d.Message, stored.ModelMessage)
			require.Equal(t, c.d.Decision == reconcile.RequestChanges, stored.ChangesRequested)
			require.Equal(t, int64(1), stored.Episode)
			requireRuns(t, l, 0, 0)
		})
	}
}
