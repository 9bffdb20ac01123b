package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/workflows"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// setup returns a test environment running the reconciliation workflow with oncekey's real
// activities over a memstore whose clock is the environment's (so leases run out as workflow
// time passes).
func setup(t *testing.T, reg *oncekey.Registry) (*testsuite.TestWorkflowEnvironment, *memstore.Store) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
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
	return env, store
}

// asReconciliation makes env run its workflow as the reconciliation workflow of the tests' key
// "ok1_k" (its workflow ID), the only caller oncekey's activities act for.
func asReconciliation(env *testsuite.TestWorkflowEnvironment) {
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: reconcile.WorkflowID("ok1_k")})
}

func claim(t *testing.T, s oncekeystore.Store, key string, lease time.Duration) int64 {
	t.Helper()
	res, err := s.Claim(context.Background(), &oncekeystore.ClaimParams{Tenant: "t1", OperationKey: key, Tool: "CreateTicket", Fingerprint: "fp",
		WorkflowID: "wf", StepID: "create_ticket", Effect: oncekey.Effectful, Lease: lease, Retention: 24 * time.Hour, Tombstone: 24 * time.Hour})
	require.NoError(t, err)
	require.True(t, res.Acquired)
	return res.Record.Epoch
}

var input = decision.Input{Tenant: "t1", OperationKey: "ok1_k", Tool: "CreateTicket", WorkflowID: "wf", StepID: "create_ticket", Reason: "start-to-close timeout"}

func run(t *testing.T, env *testsuite.TestWorkflowEnvironment) reconcile.Output {
	t.Helper()
	env.ExecuteWorkflow(reconcile.WorkflowName, input)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out reconcile.Output
	require.NoError(t, env.GetWorkflowResult(&out))
	return out
}

func TestNoRecordMeansNotApplied(t *testing.T) {
	env, _ := setup(t, nil)
	out := run(t, env)
	require.Equal(t, reconcile.NotApplied, out.Outcome, "no claim was made, so the body never ran")
}

func TestAppliedRecordSettlesAtOnce(t *testing.T) {
	env, store := setup(t, nil)
	epoch := claim(t, store, "ok1_k", time.Minute)
	ps, err := converter.GetDefaultDataConverter().ToPayloads("T-1")
	require.NoError(t, err)
	b, err := proto.Marshal(ps)
	require.NoError(t, err)
	_, err = store.Complete(context.Background(), &oncekeystore.CompleteParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: epoch, Status: oncekeystore.StatusApplied, Result: b})
	require.NoError(t, err)
	out := run(t, env)
	require.Equal(t, reconcile.Applied, out.Outcome)
	require.Equal(t, b, out.Result, "the stored result, byte for byte")
}

// A zombie attempt still holds a live lease: the workflow waits for the lease, marks the record
// unknown once it runs out, and then waits for a person.
func TestZombieLeaseThenPerson(t *testing.T) {
	env, store := setup(t, nil)
	claim(t, store, "ok1_k", 10*time.Minute)
	var states []reconcile.State
	query := func() {
		v, err := env.QueryWorkflow(reconcile.QueryName)
		require.NoError(t, err)
		var st reconcile.StatusReport
		require.NoError(t, v.Get(&st))
		states = append(states, st.State)
	}
	env.RegisterDelayedCallback(query, 5*time.Minute)
	env.RegisterDelayedCallback(func() {
		query()
		rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
		require.NoError(t, err)
		require.Equal(t, oncekeystore.StatusUnknown, rec.Status, "the lease ran out and the record was marked unknown")
		env.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied, ResolvedBy: "gina"})
	}, 20*time.Minute)
	out := run(t, env)
	require.Equal(t, reconcile.NotApplied, out.Outcome)
	require.Equal(t, "gina", out.ResolvedBy)
	require.Equal(t, []reconcile.State{reconcile.StateWaitingForLease, reconcile.StateWaiting}, states)
	rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusReleased, rec.Status)
}

func TestReceiptHookDecides(t *testing.T) {
	reg := oncekey.NewRegistry()
	var asked oncekey.ReconcileRequest
	require.NoError(t, reg.Set("CreateTicket", oncekey.Policy{Effect: oncekey.Effectful, Reconcile: func(ctx context.Context, r oncekey.ReconcileRequest) (oncekey.Receipt, error) {
		asked = r
		return oncekey.Receipt{Outcome: oncekey.ReceiptNotApplied, Note: "no such ticket downstream"}, nil
	}}))
	env, store := setup(t, reg)
	epoch := claim(t, store, "ok1_k", time.Minute)
	_, err := store.MarkUnknown(context.Background(), &oncekeystore.MarkUnknownParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: epoch})
	require.NoError(t, err)
	out := run(t, env)
	require.Equal(t, reconcile.NotApplied, out.Outcome)
	require.Equal(t, "receipt:CreateTicket", out.ResolvedBy)
	require.Equal(t, oncekey.ReconcileRequest{Tenant: "t1", OperationKey: "ok1_k", Tool: "CreateTicket", WorkflowID: "wf", StepID: "create_ticket"}, asked)
}
