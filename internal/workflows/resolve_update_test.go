package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/workflows"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// setupUnknown returns an environment whose workflow is registered with reg (RegisterWithOptions),
// over a store holding an unknown record for input's key.
func setupUnknown(t *testing.T, reg *oncekey.Registry) (*testsuite.TestWorkflowEnvironment, *memstore.Store) {
	t.Helper()
	return setupUnknownLimit(t, reg, 0)
}

// setupUnknownLimit is setupUnknown with the store's MaxResultBytes.
func setupUnknownLimit(t *testing.T, reg *oncekey.Registry, maxResultBytes int) (*testsuite.TestWorkflowEnvironment, *memstore.Store) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	asReconciliation(env)
	env.SetTestTimeout(30 * time.Second)
	store := memstore.New(&memstore.Options{Clock: env.Now, MaxResultBytes: maxResultBytes})
	if reg == nil {
		reg = oncekey.NewRegistry()
	}
	acts, err := activities.New(store, reg, nil)
	require.NoError(t, err)
	acts.Register(env)
	workflows.RegisterWithOptions(env, workflows.Options{Registry: reg})
	epoch := claim(t, store, "ok1_k", time.Minute)
	_, err = store.MarkUnknown(context.Background(), &oncekeystore.MarkUnknownParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: epoch})
	require.NoError(t, err)
	return env, store
}

func status(t *testing.T, env *testsuite.TestWorkflowEnvironment) reconcile.StatusReport {
	t.Helper()
	v, err := env.QueryWorkflow(reconcile.QueryName)
	require.NoError(t, err)
	var st reconcile.StatusReport
	require.NoError(t, v.Get(&st))
	return st
}

func requireUnknown(t *testing.T, store oncekeystore.Store) {
	t.Helper()
	rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)
	require.Empty(t, rec.ResolvedBy)
}

// Malformed signals (fields of the wrong JSON type, a bare string, no payload at all) are refused
// in the status query, each replacing the previous reason, and do not keep the escalation timer
// from firing.
func TestMalformedSignalsAreRefusedAndEscalationStillFires(t *testing.T) {
	env, store := setupUnknown(t, nil)
	in := input
	in.EscalationTimeout = time.Hour
	var reasons []string
	var counts []int
	send := func(at time.Duration, arg any) {
		env.RegisterDelayedCallback(func() {
			if arg == nil {
				env.SignalWorkflow(reconcile.SignalName, nil)
			} else {
				env.SignalWorkflow(reconcile.SignalName, arg)
			}
		}, at)
		env.RegisterDelayedCallback(func() {
			st := status(t, env)
			require.Equal(t, reconcile.StateWaiting, st.State)
			reasons = append(reasons, st.LastInvalidSignal)
			counts = append(counts, st.InvalidSignals)
			requireUnknown(t, store)
		}, at+time.Minute)
	}
	send(time.Minute, json.RawMessage(`{"outcome":"applied","effect_reference":42}`))
	send(5*time.Minute, json.RawMessage(`{"outcome":5}`))
	send(10*time.Minute, "applied")
	send(15*time.Minute, json.RawMessage(`{"outcome":"perhaps","request_id":"r-4"}`))
	env.ExecuteWorkflow(reconcile.WorkflowName, in)

	require.True(t, env.IsWorkflowCompleted())
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(env.GetWorkflowError(), &appErr), "got %v", env.GetWorkflowError())
	require.Equal(t, workflows.ErrTypeEscalationTimeout, appErr.Type(), "the timer fired after malformed signals")
	require.Len(t, reasons, 4)
	require.Contains(t, reasons[0], "does not decode into a resolution")
	require.Contains(t, reasons[0], "effect_reference")
	require.Contains(t, reasons[1], "does not decode into a resolution")
	require.Contains(t, reasons[1], "outcome")
	require.Contains(t, reasons[2], "does not decode into a resolution")
	require.Contains(t, reasons[3], `"perhaps"`)
	require.Equal(t, []int{1, 2, 3, 4}, counts)
	requireUnknown(t, store)
}

// A malformed signal does not keep a later valid one from settling the operation.
func TestValidSignalAfterMalformedOneSettles(t *testing.T) {
	env, store := setupUnknown(t, nil)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(reconcile.SignalName, json.RawMessage(`{"outcome":5}`))
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied, ResolvedBy: "gina"})
	}, 2*time.Minute)
	out := run(t, env)
	require.Equal(t, reconcile.NotApplied, out.Outcome)
	rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusReleased, rec.Status)
	require.Equal(t, "gina", rec.ResolvedBy)
}

// Past decision.MaxInvalidSignals invalid signals in one run the workflow continues as new,
// carrying its escalation deadline and what the status query showed; the new run still takes a
// valid resolution.
func TestTooManyInvalidSignalsContinueAsNew(t *testing.T) {
	env, _ := setupUnknown(t, nil)
	in := input
	in.EscalationTimeout = 10 * time.Hour
	start := env.Now()
	env.RegisterDelayedCallback(func() {
		for i := 0; i < decision.MaxInvalidSignals; i++ {
			env.SignalWorkflow(reconcile.SignalName, json.RawMessage(`"junk"`))
		}
	}, time.Minute)
	env.ExecuteWorkflow(reconcile.WorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "got %v", env.GetWorkflowError())
	require.Equal(t, reconcile.WorkflowName, can.WorkflowType.Name)
	var next decision.Input
	require.NoError(t, json.Unmarshal(payloadData(t, can), &next))
	require.NotNil(t, next.Continued)
	require.Equal(t, decision.MaxInvalidSignals, next.Continued.InvalidSignals)
	require.Contains(t, next.Continued.LastInvalidSignal, "does not decode")
	require.WithinDuration(t, start.Add(10*time.Hour), next.Continued.EscalationDeadline, 2*time.Minute, "the deadline counts from the first wait, not from the new run")

	// The continued run: it takes a valid resolution and answers the query with the carried count.
	env2, store2 := setupUnknown(t, nil)
	var st reconcile.StatusReport
	env2.RegisterDelayedCallback(func() {
		st = status(t, env2)
		env2.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Failed, ResolvedBy: "ada"})
	}, time.Minute)
	env2.ExecuteWorkflow(reconcile.WorkflowName, next)
	require.True(t, env2.IsWorkflowCompleted())
	require.NoError(t, env2.GetWorkflowError())
	require.Equal(t, decision.MaxInvalidSignals, st.InvalidSignals)
	require.Equal(t, reconcile.StateWaiting, st.State)
	rec, err := store2.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusFailed, rec.Status)
}

func payloadData(t *testing.T, can *workflow.ContinueAsNewError) []byte {
	t.Helper()
	ps := can.Input.GetPayloads()
	require.Len(t, ps, 1)
	return ps[0].GetData()
}

type updateResult struct {
	accepted bool
	rejected error
	out      reconcile.Output
	err      error
}

func sendUpdate(env *testsuite.TestWorkflowEnvironment, id string, r reconcile.Resolution, res *updateResult) {
	env.UpdateWorkflow(reconcile.UpdateName, id, &testsuite.TestUpdateCallback{
		OnAccept: func() { res.accepted = true },
		OnReject: func(err error) { res.rejected = err },
		OnComplete: func(v any, err error) {
			res.err = err
			if o, ok := v.(reconcile.Output); ok {
				res.out = o
			}
		},
	}, r)
}

func requireRefused(t *testing.T, res *updateResult, errType, contains string) {
	t.Helper()
	require.False(t, res.accepted, "a refused update is never accepted (so nothing reaches history)")
	require.Error(t, res.rejected)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(res.rejected, &appErr), "got %v", res.rejected)
	require.Equal(t, errType, appErr.Type())
	require.Contains(t, appErr.Error(), contains)
}

// The update's validator refuses a bad outcome, another tenant, a result of the wrong type and
// an update sent while there is nothing to resolve; the record is untouched, and a valid update
// is accepted and answered with the workflow's output.
func TestResolveUpdateValidator(t *testing.T) {
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	env, store := setupUnknown(t, reg)
	var bad, tenant, typ, ok updateResult
	env.RegisterDelayedCallback(func() {
		sendUpdate(env, "u-bad", reconcile.Resolution{Epoch: 1, Outcome: "perhaps"}, &bad)
		sendUpdate(env, "u-tenant", reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied, Tenant: "someone-else"}, &tenant)
		sendUpdate(env, "u-type", reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`"T-1"`)}, &typ)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		requireUnknown(t, store)
		st := status(t, env)
		require.Empty(t, st.LastInvalidSignal, "refused updates are answered to their sender, not recorded in the workflow")
		require.Zero(t, st.InvalidSignals)
		sendUpdate(env, "u-ok", reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":"T-1"}`), ResolvedBy: "ada", Tenant: "t1", EffectReference: "T-1"}, &ok)
	}, 2*time.Minute)
	out := run(t, env)

	requireRefused(t, &bad, reconcile.ErrTypeRefused, `"perhaps"`)
	requireRefused(t, &tenant, reconcile.ErrTypeRefused, "tenant")
	requireRefused(t, &typ, reconcile.ErrTypeRefused, "does not decode into CreateTicket's result type workflows_test.Ticket")
	require.True(t, ok.accepted)
	require.NoError(t, ok.err)
	require.Equal(t, reconcile.Applied, ok.out.Outcome)
	require.Equal(t, "T-1", ok.out.EffectReference)
	require.Equal(t, out, ok.out, "the update answers with the workflow's output")
	rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, "ada", rec.ResolvedBy)
}

// While the record's claim is still live there is nothing to resolve: the update is refused as
// not waiting, and the record keeps its pending state.
func TestResolveUpdateWhileNotWaitingIsRefused(t *testing.T) {
	env, store := setup(t, nil)
	claim(t, store, "ok1_k", time.Hour)
	var early updateResult
	env.RegisterDelayedCallback(func() {
		sendUpdate(env, "u-early", reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied}, &early)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied, ResolvedBy: "gina"})
	}, 2*time.Hour)
	out := run(t, env)
	requireRefused(t, &early, reconcile.ErrTypeNotWaiting, string(reconcile.StateWaitingForLease))
	require.Equal(t, reconcile.NotApplied, out.Outcome)
}

// An update the store refuses (a result over the store's size limit is one) fails the update with
// the reason, and the workflow keeps waiting for a good one.
func TestResolveUpdateRefusedByTheStoreKeepsWaiting(t *testing.T) {
	env, store := setupUnknownLimit(t, nil, 16)
	var big, ok updateResult
	env.RegisterDelayedCallback(func() {
		sendUpdate(env, "u-big", reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":"a very long ticket identifier indeed"}`)}, &big)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		requireUnknown(t, store)
		sendUpdate(env, "u-ok", reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied, ResolvedBy: "ada"}, &ok)
	}, 2*time.Minute)
	out := run(t, env)
	require.True(t, big.accepted)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(big.err, &appErr), "got %v", big.err)
	require.Equal(t, reconcile.ErrTypeRefused, appErr.Type())
	require.Equal(t, reconcile.NotApplied, out.Outcome)
	require.Equal(t, out, ok.out)
}
