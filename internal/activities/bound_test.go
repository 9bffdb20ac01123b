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
	"github.com/oncekey/oncekey/internal/failuredoc"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// caller names the workflow an activity is called from.
type caller struct{ id, typ string }

// reconciliationOf is the one caller the reconciliation activities act for: the reconciliation
// workflow of key.
func reconciliationOf(key string) caller {
	return caller{id: reconcile.WorkflowID(key), typ: reconcile.WorkflowName}
}

// callFrom runs the activity name with input in once (no retries), scheduled by a workflow of
// from's type and ID in the SDK's test environment (namespace "default-test-namespace"), and
// returns its JSON result or its error.
func callFrom(t *testing.T, acts *activities.Activities, from caller, name string, in any) (json.RawMessage, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	acts.Register(env)
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (json.RawMessage, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var out json.RawMessage
		err := workflow.ExecuteActivity(ctx, name, in).Get(ctx, &out)
		return out, err
	}, workflow.RegisterOptions{Name: from.typ})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: from.id})
	env.ExecuteWorkflow(from.typ)
	require.True(t, env.IsWorkflowCompleted())
	if err := env.GetWorkflowError(); err != nil {
		return nil, err
	}
	var out json.RawMessage
	require.NoError(t, env.GetWorkflowResult(&out))
	return out, nil
}

// unknownRecord puts an unknown record (tenant t1, tool CreateTicket) claimed in namespace ns
// under key into store and returns it.
func unknownRecord(t *testing.T, store oncekeystore.Store, key, ns string) *oncekeystore.Record {
	t.Helper()
	ctx := context.Background()
	res, err := store.Claim(ctx, &oncekeystore.ClaimParams{Tenant: "t1", OperationKey: key, Namespace: ns, Tool: "CreateTicket", Fingerprint: "fp",
		WorkflowID: "wf", StepID: "s", Effect: oncekey.Effectful, Lease: time.Minute, Retention: time.Hour, Tombstone: time.Hour})
	require.NoError(t, err)
	_, err = store.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: "t1", OperationKey: key, Epoch: res.Record.Epoch})
	require.NoError(t, err)
	rec, err := store.Get(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: key})
	require.NoError(t, err)
	return rec
}

// reconcilerInputs are an input for each activity the reconciliation workflow calls, for the
// record ref; RecordResolution's would resolve it with a forged result.
func reconcilerInputs(ref activities.RecordRef) map[string]any {
	return map[string]any{
		activities.InspectName:     ref,
		activities.MarkUnknownName: activities.MarkUnknownInput{RecordRef: ref, Epoch: 1},
		activities.LookupReceiptName: activities.ReceiptInput{Epoch: 1, Request: oncekey.ReconcileRequest{
			Tenant: ref.Tenant, OperationKey: ref.OperationKey, Tool: ref.Tool}},
		activities.RecordResolutionName: activities.RecordInput{RecordRef: ref, Tool: ref.Tool, Resolution: reconcile.Resolution{
			Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":"FORGED"}`)}},
	}
}

func requireForeign(t *testing.T, err error, name string, want ...string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, name)
	require.Equal(t, activities.ErrTypeForeignRecord, appErr.Type(), name)
	require.True(t, appErr.NonRetryable(), name)
	for _, w := range want {
		require.Contains(t, err.Error(), w, name)
	}
}

// Every activity the reconciliation workflow calls refuses, non-retryably and changing nothing,
// a record of another tool than the request names, and a record claimed in another namespace
// than the calling workflow's, even when called from the record's reconciliation workflow.
func TestActivitiesRefuseAForeignRecord(t *testing.T) {
	for _, c := range []struct {
		name, namespace, tool, want string
	}{
		{"another tool", "", "SendMoney", `is of tool "CreateTicket", not "SendMoney"`},
		{"another namespace", "prod", "CreateTicket", `belongs to a workflow of namespace "prod"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := memstore.New(nil)
			before := unknownRecord(t, store, "ok1_f", c.namespace)
			acts, err := activities.New(store, oncekey.NewRegistry(), nil)
			require.NoError(t, err)
			for name, in := range reconcilerInputs(activities.RecordRef{Tenant: "t1", OperationKey: "ok1_f", Tool: c.tool}) {
				_, err := callFrom(t, acts, reconciliationOf("ok1_f"), name, in)
				requireForeign(t, err, name, c.want)
			}
			after, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_f"})
			require.NoError(t, err)
			require.Equal(t, before, after, "the record is unchanged")
		})
	}
}

// The activities the reconciliation workflow calls act only for the reconciliation workflow of
// the record's key: called from any other workflow (another ID, the ID of another key's
// reconciliation, the right ID under another workflow type) they refuse before reading anything,
// and the record is unchanged. From the right workflow they act (Inspect reads the record).
func TestReconcilerActivitiesRefuseAnotherCaller(t *testing.T) {
	store := memstore.New(nil)
	before := unknownRecord(t, store, "ok1_f", "")
	acts, err := activities.New(store, oncekey.NewRegistry(), nil)
	require.NoError(t, err)
	ref := activities.RecordRef{Tenant: "t1", OperationKey: "ok1_f", Tool: "CreateTicket"}
	for _, from := range []caller{
		{id: "mallory", typ: reconcile.WorkflowName},
		{id: reconcile.WorkflowID("ok1_other"), typ: reconcile.WorkflowName},
		{id: reconcile.WorkflowID("ok1_f"), typ: "Forger"},
	} {
		for name, in := range reconcilerInputs(ref) {
			_, err := callFrom(t, acts, from, name, in)
			requireForeign(t, err, name+" from "+from.id+"/"+from.typ,
				"only for its reconciliation workflow ("+reconcile.WorkflowID("ok1_f"), "called by workflow \""+from.id+"\"", "nothing was read or written")
		}
	}
	after, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_f"})
	require.NoError(t, err)
	require.Equal(t, before, after, "the record is unchanged")

	out, err := callFrom(t, acts, reconciliationOf("ok1_f"), activities.InspectName, ref)
	require.NoError(t, err)
	var in activities.Inspection
	require.NoError(t, json.Unmarshal(out, &in))
	require.True(t, in.Found)
	require.Equal(t, oncekeystore.StatusUnknown, in.Status)
}

// An activity started without a workflow (a standalone activity a client starts) has no
// workflow to be, and is refused.
func TestReconcilerActivitiesRefuseAStandaloneCall(t *testing.T) {
	store := memstore.New(nil)
	unknownRecord(t, store, "ok1_f", "")
	acts, err := activities.New(store, oncekey.NewRegistry(), nil)
	require.NoError(t, err)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetExecuteActivitiesInWorkflow(false)
	acts.Register(env)
	for name, in := range reconcilerInputs(activities.RecordRef{Tenant: "t1", OperationKey: "ok1_f", Tool: "CreateTicket"}) {
		_, err := env.ExecuteActivity(name, in)
		requireForeign(t, err, name, "started without a workflow")
	}
}

// The await activity refuses to wait on a workflow that is not the reconciliation (or approval)
// workflow of the record it names, or not a reconciliation workflow at all, before asking
// Temporal anything.
func TestAwaitRefusesAnotherWorkflow(t *testing.T) {
	store := memstore.New(nil)
	unknownRecord(t, store, "ok1_f", "")
	acts, err := activities.New(store, oncekey.NewRegistry(), nil)
	require.NoError(t, err)
	ref := activities.RecordRef{Tenant: "t1", OperationKey: "ok1_f", Tool: "CreateTicket"}
	for _, c := range []struct {
		in   activities.AwaitInput
		want string
	}{
		{activities.AwaitInput{WorkflowID: reconcile.WorkflowID("ok1_other"), Record: ref}, "whose reconciliation workflow is " + reconcile.WorkflowID("ok1_f")},
		{activities.AwaitInput{WorkflowID: "payments-42", Record: ref}, "whose reconciliation workflow is"},
		{activities.AwaitInput{WorkflowID: "payments-42"}, "not a reconciliation workflow"},
		{activities.AwaitInput{WorkflowID: reconcile.WorkflowID("ok1_f"), Approval: ref}, "whose approval workflow is " + reconcile.ApprovalWorkflowID("ok1_f")},
	} {
		_, err := callFrom(t, acts, caller{id: "blocked", typ: "Agent"}, activities.AwaitReconciliationName, c.in)
		requireForeign(t, err, c.in.WorkflowID, c.want)
	}
}

// SettleHandOff acts only for the workflow run that handed the result off: called from another
// workflow (one a namespace writer could start with a made-up completion in mind), it refuses,
// non-retryably, and the record keeps waiting, unchanged.
func TestSettleHandOffOnlyForTheRunThatHandedOff(t *testing.T) {
	store := memstore.New(nil)
	ctx := context.Background()
	res, err := store.Claim(ctx, &oncekeystore.ClaimParams{Tenant: "t1", OperationKey: "ok1_h", Tool: "Pay", Fingerprint: "fp",
		WorkflowID: "expense-1", StepID: "pay", Effect: oncekey.Effectful, Lease: time.Minute, Retention: time.Hour, Tombstone: time.Hour})
	require.NoError(t, err)
	doc := failuredoc.Doc{Message: "handed off", HandOff: &failuredoc.HandOff{Epoch: res.Record.Epoch, WorkflowID: "expense-1", RunID: "run-1", ActivityID: "5", Attempt: 1}}
	_, err = store.HandOff(ctx, &oncekeystore.HandOffParams{Tenant: "t1", OperationKey: "ok1_h", Epoch: res.Record.Epoch, Lease: time.Hour, HandOff: doc.Bytes()})
	require.NoError(t, err)
	before, err := store.Get(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_h"})
	require.NoError(t, err)
	acts, err := activities.New(store, oncekey.NewRegistry(), nil)
	require.NoError(t, err)
	for _, from := range []caller{{id: "attacker", typ: "AnyWorkflow"}, {id: "expense-1", typ: "ExpenseWorkflow"}} {
		_, err = callFrom(t, acts, from, activities.SettleHandOffName, activities.RecordRef{Tenant: "t1", OperationKey: "ok1_h", Tool: "Pay"})
		requireForeign(t, err, from.id, "only for the workflow run that made it")
	}
	after, err := store.Get(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_h"})
	require.NoError(t, err)
	require.Equal(t, before, after, "the record is unchanged")
}
