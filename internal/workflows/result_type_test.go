package workflows_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

type TicketInput struct {
	Title string `json:"title"`
}

type Ticket struct {
	ID string `json:"id"`
}

// CreateTicket is the tool of these tests: registered with its function value, so the registry
// knows its result type.
func CreateTicket(ctx context.Context, in TicketInput) (Ticket, error) {
	return Ticket{ID: "T-" + in.Title}, nil
}

// A resolution whose result does not decode into the tool's result type is refused like any
// invalid signal: the record stays unknown, the status query says why, and a good resolution
// afterwards settles the operation with a result the blocked workflow can decode.
func TestResultOfTheWrongTypeIsRefused(t *testing.T) {
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	env, store := setup(t, reg)
	epoch := claim(t, store, "ok1_k", time.Minute)
	_, err := store.MarkUnknown(context.Background(), &oncekeystore.MarkUnknownParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: epoch})
	require.NoError(t, err)

	var refused string
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`"T-1"`), ResolvedBy: "ada", Tenant: "t1"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(reconcile.QueryName)
		require.NoError(t, err)
		var st reconcile.StatusReport
		require.NoError(t, v.Get(&st))
		require.Equal(t, reconcile.StateWaiting, st.State, "still waiting after the refused signal")
		refused = st.LastInvalidSignal
		rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
		require.NoError(t, err)
		require.Equal(t, oncekeystore.StatusUnknown, rec.Status, "the refused resolution changed nothing")
		require.Empty(t, rec.Result)
		require.Empty(t, rec.ResolvedBy)
		env.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":"T-1"}`), ResolvedBy: "ada", Tenant: "t1"})
	}, 2*time.Minute)

	out := run(t, env)
	require.Contains(t, refused, "does not decode into CreateTicket's result type workflows_test.Ticket")
	require.Contains(t, refused, activities.ErrTypeInvalid)
	require.Equal(t, reconcile.Applied, out.Outcome)

	rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	var ps commonpb.Payloads
	require.NoError(t, proto.Unmarshal(rec.Result, &ps))
	var got Ticket
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(&ps, &got), "the blocked workflow can decode the stored result")
	require.Equal(t, Ticket{ID: "T-1"}, got)
}

// A tool registered by name has no known result type: the result is stored as given, as before.
func TestResultOfAToolRegisteredByNameIsNotChecked(t *testing.T) {
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set("CreateTicket", oncekey.Policy{Effect: oncekey.Effectful}))
	env, store := setup(t, reg)
	epoch := claim(t, store, "ok1_k", time.Minute)
	_, err := store.MarkUnknown(context.Background(), &oncekeystore.MarkUnknownParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: epoch})
	require.NoError(t, err)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`"T-1"`), ResolvedBy: "ada"})
	}, time.Minute)
	out := run(t, env)
	require.Equal(t, reconcile.Applied, out.Outcome)
	rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
}

// toolExecutor is a routed activity: it carries every tool and answers with a string.
func toolExecutor(ctx context.Context, in map[string]any) (string, error) { return "", nil }

// A routed tool (registered with SetTool, which says nothing of its result) has the routed
// activity's result type (its Route registered with the activity's function value): the input names the activity type, and a resolution
// of another shape is refused by the signal's path as by the update's, until a string settles it.
func TestResultOfARoutedToolIsCheckedAgainstTheActivitys(t *testing.T) {
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Route(toolExecutor, oncekey.Route{Tool: oncekey.ToolAt("tool"), Args: "args"}))
	require.NoError(t, oncekey.SetTool[map[string]any](reg, "CreateTicket", oncekey.Policy{Effect: oncekey.Effectful}))
	env, store := setup(t, reg)
	epoch := claim(t, store, "ok1_k", time.Minute)
	_, err := store.MarkUnknown(context.Background(), &oncekeystore.MarkUnknownParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: epoch})
	require.NoError(t, err)

	var refused string
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":"T-1"}`), ResolvedBy: "ada", Tenant: "t1"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(reconcile.QueryName)
		require.NoError(t, err)
		var st reconcile.StatusReport
		require.NoError(t, v.Get(&st))
		refused = st.LastInvalidSignal
		rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
		require.NoError(t, err)
		require.Equal(t, oncekeystore.StatusUnknown, rec.Status, "the refused resolution changed nothing")
		env.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`"T-1"`), ResolvedBy: "ada", Tenant: "t1"})
	}, 2*time.Minute)

	routed := input
	routed.ActivityType = "toolExecutor"
	env.ExecuteWorkflow(reconcile.WorkflowName, routed)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out reconcile.Output
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Contains(t, refused, `does not decode into CreateTicket's result type string (json: cannot unmarshal object into Go value of type string); give JSON of that type, e.g. "text"; nothing was recorded`)
	require.Equal(t, reconcile.Applied, out.Outcome)

	rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	var ps commonpb.Payloads
	require.NoError(t, proto.Unmarshal(rec.Result, &ps))
	var got string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(&ps, &got), "the blocked workflow can decode the stored result")
	require.Equal(t, "T-1", got)
}
