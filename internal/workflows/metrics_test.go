package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/testing/metricstest"
	"github.com/oncekey/oncekey/internal/workflows"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/metrics"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// setupMetrics is setup with a capturing metrics handler on the test suite.
func setupMetrics(t *testing.T, reg *oncekey.Registry) (*testsuite.TestWorkflowEnvironment, *memstore.Store, *metricstest.Handler) {
	t.Helper()
	h := metricstest.New()
	var s testsuite.WorkflowTestSuite
	s.SetMetricsHandler(h)
	env := s.NewTestWorkflowEnvironment()
	asReconciliation(env)
	store := memstore.New(&memstore.Options{Clock: env.Now})
	if reg == nil {
		reg = oncekey.NewRegistry()
	}
	acts, err := activities.New(store, reg, nil)
	require.NoError(t, err)
	acts.Register(env)
	workflows.Register(env)
	return env, store, h
}

func tool(kv ...string) map[string]string {
	m := map[string]string{metrics.TagTool: "CreateTicket"}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// The reconciliation workflow counts itself started and settled, by outcome and by who settled
// it (the record, a receipt lookup, a person), and times a person's wait.
func TestReconcileMetrics(t *testing.T) {
	t.Run("settled by the record", func(t *testing.T) {
		env, _, h := setupMetrics(t, nil)
		run(t, env)
		require.EqualValues(t, 1, h.Sum(metrics.ReconciliationsStarted, tool()))
		require.EqualValues(t, 1, h.Sum(metrics.ReconciliationsSettled, tool("outcome", "not_applied", "settled_by", "record")))
		require.Empty(t, h.Records(metrics.UnknownWait, nil), "nobody waited")
	})
	t.Run("settled by a receipt lookup", func(t *testing.T) {
		reg := oncekey.NewRegistry()
		require.NoError(t, reg.Set("CreateTicket", oncekey.Policy{Effect: oncekey.Effectful, Reconcile: func(context.Context, oncekey.ReconcileRequest) (oncekey.Receipt, error) {
			return oncekey.Receipt{Outcome: oncekey.ReceiptNotApplied}, nil
		}}))
		env, store, h := setupMetrics(t, reg)
		epoch := claim(t, store, "ok1_k", time.Minute)
		_, err := store.MarkUnknown(context.Background(), &oncekeystore.MarkUnknownParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: epoch})
		require.NoError(t, err)
		run(t, env)
		require.EqualValues(t, 1, h.Sum(metrics.ReconciliationsSettled, tool("outcome", "not_applied", "settled_by", "receipt")))
		require.EqualValues(t, 1, h.Sum(metrics.ReconciliationsSettled, nil))
	})
	t.Run("settled by a person", func(t *testing.T) {
		env, store, h := setupMetrics(t, nil)
		epoch := claim(t, store, "ok1_k", time.Minute)
		_, err := store.MarkUnknown(context.Background(), &oncekeystore.MarkUnknownParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: epoch})
		require.NoError(t, err)
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, ResolvedBy: "gina"})
		}, 3*time.Hour)
		run(t, env)
		require.EqualValues(t, 1, h.Sum(metrics.ReconciliationsSettled, tool("outcome", "applied", "settled_by", "person")))
		waits := h.Records(metrics.UnknownWait, tool())
		require.Len(t, waits, 1)
		require.Equal(t, 3*time.Hour, waits[0].Round(time.Minute), "workflow time from waiting to the decision")
		for _, name := range h.Names() {
			require.NotContains(t, name, "ok1_", "never tagged by operation key")
			require.NotContains(t, name, "tenant=", "no tenant tag unless asked")
		}
	})
	t.Run("escalated, tenant tagged", func(t *testing.T) {
		env, store, h := setupMetrics(t, nil)
		epoch := claim(t, store, "ok1_k", time.Minute)
		_, err := store.MarkUnknown(context.Background(), &oncekeystore.MarkUnknownParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: epoch})
		require.NoError(t, err)
		in := input
		in.EscalationTimeout, in.MetricsTenant = time.Hour, true
		env.ExecuteWorkflow(reconcile.WorkflowName, in)
		require.Error(t, env.GetWorkflowError())
		require.EqualValues(t, 1, h.Sum(metrics.ReconciliationsEscalated, tool("tenant", "t1")))
		require.EqualValues(t, 1, h.Sum(metrics.ReconciliationsStarted, tool("tenant", "t1")))
		require.Zero(t, h.Sum(metrics.ReconciliationsSettled, nil))
	})
}
