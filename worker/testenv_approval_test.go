package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// On the SDK's test environment, a denied approval fails the call as rejected with nothing run,
// and the Label a model would see says stop; the approval records who denied it and why.
func TestTestEnvironmentApprovalDenied(t *testing.T) {
	refunds := &Refunds{}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(refunds.IssueRefund, oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{
		Summary: func(op oncekey.Operation) string { return "refund " + string(op.ArgsJSON) + " cents" },
	}}))
	store := memstore.New(nil)
	opts := worker.Options{Store: store, Registry: reg}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	wo, err := worker.WorkerOptions(opts, sdkworker.Options{})
	require.NoError(t, err)
	env.SetWorkerOptions(wo)
	require.NoError(t, worker.Register(env, opts))
	env.RegisterActivity(refunds.IssueRefund)
	env.RegisterWorkflow(Refund)

	var key, tenant string
	env.RegisterDelayedCallback(func() {
		page, err := store.ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending})
		require.NoError(t, err)
		require.Len(t, page.Approvals, 1)
		a := page.Approvals[0]
		key, tenant = a.OperationKey, a.Tenant
		env.SignalWorkflowByID(reconcile.ApprovalWorkflowID(a.OperationKey), reconcile.DecideSignalName, reconcile.Decision{
			Decision: reconcile.Deny, Tenant: a.Tenant, Episode: a.Episode, DecidedBy: "ines", Reason: "over the limit", RequestID: "test-deny"})
	}, time.Minute)
	env.ExecuteWorkflow(Refund, 12000)
	require.True(t, env.IsWorkflowCompleted())
	err = env.GetWorkflowError()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, oncekey.ErrTypeApproval, appErr.Type())
	tr := oncekey.Label(nil, err)
	require.Equal(t, oncekey.OutcomeRejected, tr.Status)
	require.Equal(t, oncekey.NextStop, tr.NextAction)
	require.Zero(t, refunds.issued, "a denied call never runs")

	a, err := store.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalDenied, a.Status)
	require.Equal(t, "ines", a.DecidedBy)
	require.Equal(t, "over the limit", a.Reason)
}
