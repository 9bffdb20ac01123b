package activities_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
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
	res, err := store.RequestApproval(ctx, &oncekeystore.RequestApprovalParams{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund",
		Fingerprint: "fp", Summary: "refund 120.00 EUR", Timeout: time.Hour})
	require.NoError(t, err)
	acts, err := activities.New(store, oncekey.NewRegistry(), nil)
	require.NoError(t, err)
	request := decision.ApprovalInput{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund", Fingerprint: "fp", Summary: "s", Timeout: time.Hour}
	decide := activities.DecideApprovalInput{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund", Episode: 1,
		Status: oncekeystore.ApprovalApproved, DecidedBy: "mallory", Retention: time.Hour}
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
	after, err := store.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
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
	require.Equal(t, oncekeystore.ApprovalApproved, ans.Status)
	require.False(t, ans.Conflict)
	out, err = callFrom(t, acts, own, activities.DecideApprovalName, decide)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(out, &ans))
	require.False(t, ans.Conflict, "the same decision again (a retry whose answer was lost) finds itself written")
	require.Equal(t, "mallory", ans.DecidedBy)
	deny := decide
	deny.Status, deny.DecidedBy, deny.Reason = oncekeystore.ApprovalDenied, "bob", "no"
	out, err = callFrom(t, acts, own, activities.DecideApprovalName, deny)
	require.NoError(t, err)
	ans = activities.ApprovalAnswer{}
	require.NoError(t, json.Unmarshal(out, &ans))
	require.True(t, ans.Conflict, "another decision finds the first")
	require.Equal(t, oncekeystore.ApprovalApproved, ans.Status)
	require.Equal(t, "mallory", ans.DecidedBy)
}

// RequestApproval only reads: from the key's approval workflow, with any input (anyone who can
// start workflows in the namespace chooses it), it makes and changes no request. Without a
// worker's request it fails with ErrTypeNoWorkerRequest and the store stays as it was; with one it
// returns it, summary and token as the worker wrote them, whatever the input says.
func TestRequestApprovalOnlyReadsTheWorkersRequest(t *testing.T) {
	store := memstore.New(nil)
	acts, err := activities.New(store, oncekey.NewRegistry(), nil)
	require.NoError(t, err)
	in := decision.ApprovalInput{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund", Fingerprint: "fp", Summary: "refund 1", Timeout: time.Hour}
	read := func() (activities.ApprovalAnswer, error) {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		acts.Register(env)
		env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (activities.ApprovalAnswer, error) {
			ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second,
				RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Millisecond, MaximumAttempts: 3}})
			var ans activities.ApprovalAnswer
			err := workflow.ExecuteActivity(ctx, activities.RequestApprovalName, in).Get(ctx, &ans)
			return ans, err
		}, workflow.RegisterOptions{Name: reconcile.ApprovalWorkflowName})
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: reconcile.ApprovalWorkflowID("ok1_a")})
		env.ExecuteWorkflow(reconcile.ApprovalWorkflowName)
		require.True(t, env.IsWorkflowCompleted())
		var ans activities.ApprovalAnswer
		if err := env.GetWorkflowError(); err != nil {
			return ans, err
		}
		require.NoError(t, env.GetWorkflowResult(&ans))
		return ans, nil
	}
	noRequest := func() {
		t.Helper()
		_, err := read()
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, activities.ErrTypeNoWorkerRequest, appErr.Type())
		require.Contains(t, appErr.Error(), "no worker asked for approval of ok1_a")
	}
	noRequest()
	_, err = store.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound, "nothing was written")

	// A request of the earlier protocol (no worker token) is not a worker's either.
	p := &oncekeystore.RequestApprovalParams{Tenant: "t1", OperationKey: "ok1_a", Namespace: "default-test-namespace", Tool: "Refund",
		Fingerprint: "fp", Summary: "refund 99999", Timeout: time.Hour}
	_, err = store.RequestApproval(context.Background(), p)
	require.NoError(t, err)
	noRequest()

	p.Token = "w1_worker"
	res, err := store.RequestApproval(context.Background(), p)
	require.NoError(t, err)
	ans, err := read()
	require.NoError(t, err)
	require.Equal(t, "refund 99999", ans.Summary, "the worker's summary, not the input's")
	require.Equal(t, "w1_worker", ans.Token)
	require.False(t, ans.Created)
	require.Equal(t, oncekeystore.ApprovalPending, ans.Status)
	after, err := store.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
	require.NoError(t, err)
	require.Equal(t, res.Approval, after, "nothing was changed")
}
