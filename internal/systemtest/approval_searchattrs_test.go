package systemtest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// registerSearchAttributes registers oncekey's search attributes on the dev server's default
// namespace and waits until the namespace reports them, so a worker with the option on starts.
func registerSearchAttributes(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	ctx := testCtx(t)
	admin, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}})
	require.NoError(t, err)
	defer admin.Close()
	_, err = worker.RegisterSearchAttributes(ctx, admin, "default")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return worker.CheckSearchAttributes(ctx, admin, "default") == nil }, 20*time.Second, 200*time.Millisecond,
		"the namespace reports the registered search attributes")
}

// listIDs returns the workflow IDs the visibility query finds in the default namespace.
func listIDs(t *testing.T, c client.Client, query string) []string {
	t.Helper()
	res, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: query})
	require.NoError(t, err)
	var ids []string
	for _, e := range res.GetExecutions() {
		ids = append(ids, e.GetExecution().GetWorkflowId())
	}
	return ids
}

// On a dev server with oncekey's search attributes registered and the option on: a call waiting
// for approval is found by reconcile.ApprovalWaitingQuery (and by tool, tenant and since when it
// waits, which is when it was asked), not by the reconciliations' filter; once approved it leaves
// the filter and its status attribute says approved. Its history, upserts included, replays.
func TestE2EApprovalFoundBySearchAttributes(t *testing.T) {
	registerSearchAttributes(t)
	l := newLedger()
	e := setupE2EWith(t, l, approvalPolicy(0), func(o *worker.Options) { o.SearchAttributes = true })
	wf := "approval-search-attributes"
	run := e.start(t, wf, req, 10*time.Second)
	a := e.pendingApproval(t)
	id := reconcile.ApprovalWorkflowID(a.OperationKey)

	narrowed := reconcile.ApprovalWaitingQuery + ` AND OncekeyTool = "CreateTicket" AND OncekeyTenant = "default" AND OncekeyWaitingSince < "2999-01-01T00:00:00Z"`
	require.Eventually(t, func() bool { return slices.Contains(listIDs(t, e.c, narrowed), id) }, 20*time.Second, 200*time.Millisecond,
		"the documented filter finds the pending approval")
	require.NotContains(t, listIDs(t, e.c, reconcile.ApprovalWaitingQuery+` AND OncekeyTool = "SendEmail"`), id)
	require.NotContains(t, listIDs(t, e.c, reconcile.WaitingQuery), id, "an approval is not an unknown outcome")

	desc, err := e.c.DescribeWorkflow(testCtx(t), id, "")
	require.NoError(t, err)
	sa := desc.TypedSearchAttributes
	status, _ := sa.GetKeyword(decision.SearchAttributeStatus)
	require.Equal(t, reconcile.SearchStatusWaitingForApproval, status)
	tool, _ := sa.GetKeyword(decision.SearchAttributeTool)
	require.Equal(t, "CreateTicket", tool)
	tenant, _ := sa.GetKeyword(decision.SearchAttributeTenant)
	require.Equal(t, "default", tenant)
	since, ok := sa.GetTime(decision.SearchAttributeWaitingSince)
	require.True(t, ok, "OncekeyWaitingSince is set while it waits")
	require.WithinDuration(t, a.RequestedAt, since, time.Millisecond, "waiting since it was asked")
	requireRuns(t, l, 0, 0)

	e.approve(t, a.OperationKey, "alice")
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
	approved := `WorkflowType = "` + reconcile.ApprovalWorkflowName + `" AND OncekeyStatus = "` + reconcile.SearchStatusApproved + `" AND OncekeyTool = "CreateTicket"`
	require.Eventually(t, func() bool {
		return !slices.Contains(listIDs(t, e.c, reconcile.ApprovalWaitingQuery), id) && slices.Contains(listIDs(t, e.c, approved), id)
	}, 20*time.Second, 200*time.Millisecond, "decided: out of the waiting filter, status approved")

	require.NoError(t, e.replay(t, true, wf, id))
}
