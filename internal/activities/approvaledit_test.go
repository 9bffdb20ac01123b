package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
)

type refundIn struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

func refundTool(context.Context, refundIn) (string, error) { return "", nil }

// An edit is checked against the tool's input type on the worker and written once: the edit's
// approval (approved, EditOf) and the original's replacement (EditedAs). Refused edits write
// nothing; an attempt repeated after its answer was lost learns it recorded the replacement.
func TestDecideApprovalEdit(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(nil)
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.SetAs("Refund", refundTool, oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{}}))
	acts, err := activities.New(store, reg, nil)
	require.NoError(t, err)
	res, err := store.RequestApproval(ctx, &oncekeystore.RequestApprovalParams{Tenant: "t1", OperationKey: "ok1_a", Namespace: "ns", Tool: "Refund",
		Fingerprint: "fp", WorkflowID: "wf", StepID: "refund", Summary: "Refund, step refund of workflow wf", Token: "w1_x", Timeout: time.Hour})
	require.NoError(t, err)
	in := activities.DecideApprovalInput{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund", Episode: 1, Token: res.Approval.Token,
		Status: oncekeystore.ApprovalApproved, DecidedBy: "ada", Reason: "half", Retention: time.Hour}

	for name, args := range map[string]string{
		"unknown member": `{"order_id":"O-1","amount_cents":50,"tool":"SendMoney"}`,
		"wrong type":     `{"order_id":"O-1","amount_cents":"50"}`,
		"not an object":  `["O-1"]`,
	} {
		bad := in
		bad.Arguments = json.RawMessage(args)
		_, err := acts.DecideApproval(ctx, bad)
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), name)
		require.Equal(t, activities.ErrTypeInvalid, appErr.Type(), name)
		require.Contains(t, appErr.Error(), "nothing was written", name)
	}
	list, err := store.ListApprovals(ctx, &oncekeystore.ListApprovalsParams{})
	require.NoError(t, err)
	require.Len(t, list.Approvals, 1, "refused edits wrote nothing")
	require.Equal(t, oncekeystore.ApprovalPending, list.Approvals[0].Status)

	in.Arguments = json.RawMessage(`{"amount_cents":50,"order_id":"O-1"}`)
	for attempt := range 2 {
		ans, err := acts.DecideApproval(ctx, in)
		require.NoError(t, err, "attempt %d", attempt)
		require.False(t, ans.Conflict, "attempt %d: its own write", attempt)
		require.Equal(t, oncekeystore.ApprovalReplaced, ans.Status)
		key, err := oncekey.EditKey("ns", "t1", "ok1_a", 1)
		require.NoError(t, err)
		require.Equal(t, key, ans.EditedAs)
		require.JSONEq(t, `{"amount_cents":50,"order_id":"O-1"}`, string(ans.Arguments))
		ed, err := store.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: key})
		require.NoError(t, err)
		require.Equal(t, oncekeystore.ApprovalApproved, ed.Status)
		require.Equal(t, "ok1_a", ed.EditOf)
		require.Equal(t, int64(1), ed.Episode)
	}
}
