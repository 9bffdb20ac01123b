package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
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

var approvalInput = decision.ApprovalInput{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund", Fingerprint: "fp1", WorkflowID: "wf",
	StepID: "refund", Summary: "refund 120.00 EUR on order 42", Timeout: time.Hour, Retention: 24 * time.Hour}

// setupApproval returns an environment with the approval workflow and its activities over a
// memstore on the environment's clock.
func setupApproval(t *testing.T) (*testsuite.TestWorkflowEnvironment, *memstore.Store) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	// The approval workflow of the tests' key: the one caller its activities act for.
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: reconcile.ApprovalWorkflowID(approvalInput.OperationKey)})
	store := memstore.New(&memstore.Options{Clock: env.Now})
	acts, err := activities.New(store, oncekey.NewRegistry(), nil)
	require.NoError(t, err)
	acts.Register(env)
	workflows.Register(env)
	askAsWorker(t, store, approvalInput)
	return env, store
}

// askAsWorker writes the request for approval of in's key as the worker's interceptor does (with
// a worker's token): the approval workflow only reads it.
func askAsWorker(t *testing.T, store *memstore.Store, in decision.ApprovalInput) *oncekeystore.Approval {
	t.Helper()
	res, err := store.RequestApproval(context.Background(), &oncekeystore.RequestApprovalParams{
		Tenant: in.Tenant, OperationKey: in.OperationKey, Namespace: "default-test-namespace", Tool: in.Tool, Fingerprint: in.Fingerprint,
		WorkflowID: in.WorkflowID, StepID: in.StepID, Summary: in.Summary, Token: "w1_test", Timeout: in.Timeout,
	})
	require.NoError(t, err)
	return res.Approval
}

func approvalOf(t *testing.T, store *memstore.Store) *oncekeystore.Approval {
	t.Helper()
	a, err := store.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
	require.NoError(t, err)
	return a
}

func runApproval(t *testing.T, env *testsuite.TestWorkflowEnvironment, in decision.ApprovalInput) reconcile.ApprovalOutput {
	t.Helper()
	env.ExecuteWorkflow(reconcile.ApprovalWorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out reconcile.ApprovalOutput
	require.NoError(t, env.GetWorkflowResult(&out))
	return out
}

func queryApproval(t *testing.T, env *testsuite.TestWorkflowEnvironment) reconcile.ApprovalReport {
	t.Helper()
	v, err := env.QueryWorkflow(reconcile.ApprovalQueryName)
	require.NoError(t, err)
	var rep reconcile.ApprovalReport
	require.NoError(t, v.Get(&rep))
	return rep
}

type decideResult struct {
	accepted bool
	rejected error
	out      reconcile.ApprovalOutput
}

func sendDecision(env *testsuite.TestWorkflowEnvironment, id string, d reconcile.Decision, res *decideResult) {
	env.UpdateWorkflow(reconcile.DecideUpdateName, id, &testsuite.TestUpdateCallback{
		OnAccept: func() { res.accepted = true },
		OnReject: func(err error) { res.rejected = err },
		OnComplete: func(v any, err error) {
			if o, ok := v.(reconcile.ApprovalOutput); ok {
				res.out = o
			}
		},
	}, d)
}

// The update's validator refuses another tenant, another episode and a denial without a reason,
// with nothing written; the query shows the pending request; a valid decision is recorded and
// answered with the workflow's output.
func TestApprovalDecideUpdateValidator(t *testing.T) {
	env, store := setupApproval(t)
	var tenant, episode, noReason, ok decideResult
	var rep reconcile.ApprovalReport
	env.RegisterDelayedCallback(func() {
		rep = queryApproval(t, env)
		sendDecision(env, "u1", reconcile.Decision{Decision: reconcile.Approve, Tenant: "t2"}, &tenant)
		sendDecision(env, "u2", reconcile.Decision{Decision: reconcile.Approve, Tenant: "t1", Episode: 2}, &episode)
		sendDecision(env, "u3", reconcile.Decision{Decision: reconcile.Deny, Tenant: "t1"}, &noReason)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, oncekeystore.ApprovalPending, approvalOf(t, store).Status, "refusals write nothing")
		sendDecision(env, "u4", reconcile.Decision{Decision: reconcile.Deny, Tenant: "t1", Episode: 1, DecidedBy: "bob", Reason: "over budget", RequestID: "u4"}, &ok)
	}, 2*time.Minute)
	out := runApproval(t, env, approvalInput)

	require.Equal(t, reconcile.ApprovalStateWaiting, rep.State)
	require.Equal(t, oncekeystore.ApprovalPending, rep.Status)
	require.Equal(t, int64(1), rep.Episode)
	require.Equal(t, approvalInput.Summary, rep.Summary)
	require.WithinDuration(t, rep.RequestedAt.Add(time.Hour), rep.Deadline, time.Second)
	for _, c := range []struct {
		res  decideResult
		want string
	}{{tenant, "another tenant"}, {episode, "episode 2"}, {noReason, "a denial needs a reason"}} {
		require.False(t, c.res.accepted)
		require.ErrorContains(t, c.res.rejected, c.want)
	}
	require.True(t, ok.accepted)
	require.Equal(t, oncekeystore.ApprovalDenied, ok.out.Status)
	require.Equal(t, "u4", ok.out.RequestID)
	require.Equal(t, ok.out, out)
	require.True(t, out.Created)
	a := approvalOf(t, store)
	require.Equal(t, oncekeystore.ApprovalDenied, a.Status)
	require.Equal(t, "bob", a.DecidedBy)
	require.Equal(t, "over budget", a.Reason)
}

// Nobody decides: at the deadline the approval is timed out, decided by TimeoutDecider.
func TestApprovalTimesOut(t *testing.T) {
	env, store := setupApproval(t)
	start := env.Now()
	out := runApproval(t, env, approvalInput)
	require.Equal(t, oncekeystore.ApprovalTimedOut, out.Status)
	require.Equal(t, workflows.TimeoutDecider, out.DecidedBy)
	require.Empty(t, out.RequestID)
	require.WithinDuration(t, start.Add(time.Hour), env.Now(), time.Minute)
	require.Equal(t, oncekeystore.ApprovalTimedOut, approvalOf(t, store).Status)
}

// approvedBefore stores the tests' approval, for fingerprint fp1, approved by alice.
func approvedBefore(t *testing.T, store *memstore.Store) {
	t.Helper()
	a := approvalOf(t, store) // the worker's request, setupApproval's
	_, err := store.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: "t1", OperationKey: "ok1_a", Episode: a.Episode,
		Token: a.Token, Status: oncekeystore.ApprovalApproved, DecidedBy: "alice", Retention: time.Hour})
	require.NoError(t, err)
}

// An approval found decided is answered at once (nothing asked); one asked for other arguments
// is answered as a fingerprint mismatch, untouched.
func TestApprovalFoundDecidedOrOfOtherArguments(t *testing.T) {
	for _, fp := range []string{"fp1", "fp2"} {
		env, store := setupApproval(t)
		approvedBefore(t, store)
		in := approvalInput
		in.Fingerprint = fp
		out := runApproval(t, env, in)
		require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
		require.Equal(t, "alice", out.DecidedBy)
		require.False(t, out.Created)
		require.Equal(t, fp != "fp1", out.FingerprintMismatch, fp)
		require.Equal(t, "fp1", out.Fingerprint)
		require.Equal(t, int64(1), approvalOf(t, store).Episode)
	}
}

// Past decision.MaxInvalidSignals invalid signals the workflow continues as new, carrying the
// count; a valid signal is still taken.
func TestApprovalTooManyInvalidSignalsContinueAsNew(t *testing.T) {
	env, _ := setupApproval(t)
	env.RegisterDelayedCallback(func() {
		for range decision.MaxInvalidSignals {
			env.SignalWorkflow(reconcile.DecideSignalName, json.RawMessage(`{"decision":"approve","tenant":"t2"}`))
		}
	}, time.Minute)
	env.ExecuteWorkflow(reconcile.ApprovalWorkflowName, approvalInput)
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "got %v", env.GetWorkflowError())
	require.Equal(t, reconcile.ApprovalWorkflowName, can.WorkflowType.Name)
	var next decision.ApprovalInput
	require.NoError(t, json.Unmarshal(payloadData(t, can), &next))
	require.NotNil(t, next.Continued)
	require.Equal(t, decision.MaxInvalidSignals, next.Continued.InvalidSignals)
	require.Contains(t, next.Continued.LastInvalidSignal, "another tenant")
	require.True(t, next.Continued.Created)
}

// currentDetails returns the workflow's current details (the Temporal UI's), from the metadata query.
func currentDetails(t *testing.T, env *testsuite.TestWorkflowEnvironment) string {
	t.Helper()
	v, err := env.QueryWorkflow("__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	return md.GetCurrentDetails()
}

// The current details of a call without a step ID say so instead of a blank step; those of a
// run that found the approval decided say it was already decided and nobody was asked.
func TestApprovalDetailsNoStepIDAndFoundDecided(t *testing.T) {
	env, _ := setupApproval(t)
	in := approvalInput
	in.StepID = ""
	var waiting string
	env.RegisterDelayedCallback(func() {
		waiting = currentDetails(t, env)
		sendDecision(env, "u1", reconcile.Decision{Decision: reconcile.Approve, Tenant: "t1", DecidedBy: "ada"}, &decideResult{})
	}, time.Minute)
	runApproval(t, env, in)
	require.Contains(t, waiting, "**Waiting for approval** since ")
	require.Contains(t, waiting, "Refund in workflow wf (no step ID) (tenant t1, operation key ok1_a)")
	require.NotContains(t, waiting, "step  of")
	require.Contains(t, currentDetails(t, env), "**Decided: approved** by ada at ")

	// A repeat: the approval workflow runs again and finds the decision recorded.
	env2, store2 := setupApproval(t)
	approvedBefore(t, store2)
	runApproval(t, env2, approvalInput)
	found := currentDetails(t, env2)
	require.Contains(t, found, "**Already decided: approved** by alice at ")
	require.Contains(t, found, "Nobody was asked again")
	require.Contains(t, found, "Refund, step refund of workflow wf")
}
