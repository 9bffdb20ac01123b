package activities_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/activities"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/reconcile"
)

// The approval workflow's activities act only for the approval workflow of the key: another
// workflow of the namespace (another ID, another key's approval workflow, the right ID under
// another type, the key's reconciliation workflow) cannot ask or decide an approval through them,
// and the approval is unchanged. From the right workflow they act, and an approval of another
// tool is refused.
func TestApprovalActivitiesRefuseAnotherCaller(t *testing.T) {
	store := memstore.New(nil)
	ctx := context.Background()
	res, err := store.RequestApproval(ctx, &oncekey.RequestApprovalParams{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund",
		Fingerprint: "fp", Summary: "refund 120.00 EUR", Timeout: time.Hour})
	require.NoError(t, err)
	acts, err := activities.New(store, oncekey.NewRegistry(), nil)
	require.NoError(t, err)
	request := reconcile.ApprovalInput{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund", Fingerprint: "fp", Summary: "s", Timeout: time.Hour}
	decide := activities.DecideApprovalInput{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund", Episode: 1,
		Status: oncekey.ApprovalApproved, DecidedBy: "mallory", Retention: time.Hour}
	inputs := map[string]any{activities.RequestApprovalName: request, activities.DecideApprovalName: decide}
	for _, from := range []caller{
		{id: "mallory", typ: reconcile.ApprovalWorkflowName},
		{id: reconcile.ApprovalWorkflowID("ok1_other"), typ: reconcile.ApprovalWorkflowName},
		{id: reconcile.ApprovalWorkflowID("ok1_a"), typ: "Forger"},
		reconciliationOf("ok1_a"),
	} {
		for name, in := range inputs {
			_, err := callFrom(t, acts, from, name, in)
			requireForeign(t, err, name+" from "+from.id+"/"+from.typ,
				"only for its approval workflow ("+reconcile.ApprovalWorkflowID("ok1_a"), "nothing was read or written")
		}
	}
	after, err := store.GetApproval(ctx, &oncekey.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
	require.NoError(t, err)
	require.Equal(t, res.Approval, after, "the approval is unchanged")

	own := caller{id: reconcile.ApprovalWorkflowID("ok1_a"), typ: reconcile.ApprovalWorkflowName}
	other := decide
	other.Tool = "SendMoney"
	_, err = callFrom(t, acts, own, activities.DecideApprovalName, other)
	requireForeign(t, err, "another tool", `the approval of key ok1_a is of tool "Refund", not "SendMoney"`)
	out, err := callFrom(t, acts, own, activities.DecideApprovalName, decide)
	require.NoError(t, err)
	var ans activities.ApprovalAnswer
	require.NoError(t, json.Unmarshal(out, &ans))
	require.Equal(t, oncekey.ApprovalApproved, ans.Status)
	require.False(t, ans.Conflict)
	out, err = callFrom(t, acts, own, activities.DecideApprovalName, decide)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(out, &ans))
	require.False(t, ans.Conflict, "the same decision again (a retry whose answer was lost) finds itself written")
	require.Equal(t, "mallory", ans.DecidedBy)
	deny := decide
	deny.Status, deny.DecidedBy, deny.Reason = oncekey.ApprovalDenied, "bob", "no"
	out, err = callFrom(t, acts, own, activities.DecideApprovalName, deny)
	require.NoError(t, err)
	ans = activities.ApprovalAnswer{}
	require.NoError(t, json.Unmarshal(out, &ans))
	require.True(t, ans.Conflict, "another decision finds the first")
	require.Equal(t, oncekey.ApprovalApproved, ans.Status)
	require.Equal(t, "mallory", ans.DecidedBy)
}
