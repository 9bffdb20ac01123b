package systemtest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// Two namespaces on one dev server, their workers sharing one store. A workflow of the second
// namespace starts oncekey's reconciliation workflow for a key of the first (keys can be computed
// from namespace, tenant, workflow ID and step ID), to read its record and resolve it with a
// forged result. oncekey's activities refuse: the record belongs to the other namespace. The
// first namespace's own operator then settles it, and its workflow gets the real result.
func TestReconciliationBoundToTheRecordsNamespace(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.start(t, "two-namespaces", req, 10*time.Second)
	key := e.waitingKey(t)
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, "default", rec.Namespace)

	// The other namespace's worker shares the store.
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(l.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	plugin, err := worker.NewPlugin(worker.Options{Store: e.store, Registry: reg})
	require.NoError(t, err)
	other := testenv.TemporalIn(t, testenv.SecondNamespace, plugin)
	tq := "oncekey-other-" + t.Name()
	w := sdkworker.New(other, tq, sdkworker.Options{})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	for _, in := range []decision.Input{
		{Tenant: "default", OperationKey: key, Tool: "CreateTicket", WorkflowID: "two-namespaces", StepID: "create_ticket"},
		{Tenant: "default", OperationKey: key, Tool: "SomethingElse"},
	} {
		forged, err := other.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			ID: reconcile.WorkflowID(key), TaskQueue: tq, WorkflowExecutionTimeout: time.Minute,
		}, reconcile.WorkflowName, in)
		require.NoError(t, err)
		// Should it wait for a person, the forger resolves it with a result of its own.
		fake, _ := json.Marshal(Ticket{ID: "FORGED", Subject: "forged"})
		_ = other.SignalWorkflow(context.Background(), reconcile.WorkflowID(key), "", reconcile.SignalName,
			reconcile.Resolution{Epoch: rec.Epoch, Outcome: reconcile.Applied, Result: fake, ResolvedBy: "mallory", Tenant: "default"})
		var out reconcile.Output
		err = forged.Get(testCtx(t), &out)
		require.Error(t, err, "the other namespace's reconciliation settled %+v", out)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, activities.ErrTypeForeignRecord, appErr.Type(), err.Error())
		require.Contains(t, err.Error(), `belongs to a workflow of namespace "default"`)
	}
	after, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, after.Status, "the record was left as it was")
	require.Empty(t, after.ResolvedBy)

	// The first namespace's operator decides; its workflow gets the real ticket.
	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, _ := json.Marshal(landed)
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Epoch: rec.Epoch, Outcome: reconcile.Applied, Result: body, EffectReference: landed.ID, ResolvedBy: "ana"}))
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, landed, got)
	effects, _ := l.counts()
	require.Equal(t, 1, effects)
}
