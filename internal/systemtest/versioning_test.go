package systemtest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// On a worker with Worker Deployment Versioning on and no DefaultVersioningBehavior (the dev
// server of Temporal CLI v1.9.1, server v1.32.0, supports deployment versions), the plugin
// registers the reconciliation workflow with a versioning behavior (AutoUpgrade), so the worker
// starts, and an unknown outcome is reconciled there: resolved by the update, the blocked call
// gets the result, one effect downstream.
func TestE2EVersionedWorkerRunsReconciliation(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	t.Parallel()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	store := pgstore.New(pool, nil)
	l := newLedger(faultLostAfterCommit)
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(l.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	plugin, err := worker.NewPlugin(worker.Options{Store: store, Registry: reg})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := "oncekey-e2e-versioned"
	deployment := "oncekey-e2e-versioned"
	w := sdkworker.New(c, tq, sdkworker.Options{DeploymentOptions: sdkworker.DeploymentOptions{
		UseVersioning: true,
		Version:       sdkworker.WorkerDeploymentVersion{DeploymentName: deployment, BuildID: "build-1"},
	}})
	w.RegisterWorkflowWithOptions(TicketWorkflow, workflow.RegisterOptions{VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade})
	w.RegisterActivity(l.CreateTicket)
	require.NoError(t, w.Start(), "the worker starts: oncekey's workflow has a versioning behavior")
	t.Cleanup(w.Stop)

	// Route the task queue's workflows to this version.
	h := c.WorkerDeploymentClient().GetHandle(deployment)
	require.Eventually(t, func() bool {
		_, err := h.SetCurrentVersion(context.Background(), client.WorkerDeploymentSetCurrentVersionOptions{BuildID: "build-1", IgnoreMissingTaskQueues: true})
		return err == nil
	}, 60*time.Second, 500*time.Millisecond, "the deployment version never became current")

	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "versioned", TaskQueue: tq, WorkflowExecutionTimeout: 2 * time.Minute},
		TicketWorkflow, req, CallOptions{StartToClose: 10 * time.Second})
	require.NoError(t, err)
	var key string
	require.Eventually(t, func() bool {
		res, err := reconcile.List(context.Background(), store, oncekeystore.ListParams{})
		if err != nil || len(res.Records) != 1 {
			return false
		}
		key = res.Records[0].OperationKey
		st, err := reconcile.Status(context.Background(), c, key)
		return err == nil && st.State == reconcile.StateWaiting
	}, 60*time.Second, 200*time.Millisecond, "the reconciliation never came to wait on the versioned worker")
	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, _ := json.Marshal(landed)
	out, err := reconcile.ResolveOutput(context.Background(), c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: body, ResolvedBy: "ada"})
	require.NoError(t, err)
	require.Equal(t, reconcile.Applied, out.Outcome)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, landed, got)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	desc, err := c.DescribeWorkflow(context.Background(), reconcile.WorkflowID(key), "")
	require.NoError(t, err)
	require.Equal(t, "AutoUpgrade", desc.RawResponse.GetWorkflowExecutionInfo().GetVersioningInfo().GetBehavior().String(),
		"the reconciliation workflow ran with its own behavior")
}
