package systemtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// Four-eyes approval (ApprovalPolicy.Signers: 2) on a dev server and Postgres: one signer's
// approval is recorded and the call keeps waiting, with no effect downstream, however often that
// signer approves; a second trusted signer's approval runs it once; a denial by the second
// signer after the first's approval denies it.

// fourEyesPolicy is approvalPolicy asking for two different signers.
func fourEyesPolicy() oncekey.Policy {
	p := approvalPolicy(0)
	p.Approval.Signers = 2
	return p
}

// requireStillWaiting checks that the call of run waits for a decision: the approval workflow
// of a waits, the approval is pending, and the caller's workflow is running.
func (e *e2e) requireStillWaiting(t *testing.T, id string, a *oncekeystore.Approval) {
	t.Helper()
	ctx := context.Background()
	rep, err := reconcile.QueryApproval(ctx, e.c, a.OperationKey)
	require.NoError(t, err)
	require.Equal(t, reconcile.ApprovalStateWaiting, rep.State)
	require.Equal(t, oncekeystore.ApprovalPending, e.approval(t, a.OperationKey).Status)
	desc, err := e.c.DescribeWorkflow(ctx, id, "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.RawResponse.GetWorkflowExecutionInfo().GetStatus())
}

func TestE2EFourEyesApproval(t *testing.T) {
	l := newLedger()
	ada, bob := newSigner(t), newSigner(t)
	e, _, _ := setupSigned(t, l, fourEyesPolicy(), trustEntry{s: ada}, trustEntry{s: bob})
	run := e.start(t, "four-eyes-approve", req, 10*time.Second)
	a := e.pendingOf(t, "four-eyes-approve")

	out, err := e.decideSigned(t, ada, a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada", Reason: "checked"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalPending, out.Status)
	require.True(t, out.Waiting())
	require.Equal(t, "recorded; waiting for another signer (1 of 2)", out.SignersText())
	require.Len(t, e.approval(t, a.OperationKey).Cosignatures, 1, "the first approval is recorded with its signature")
	e.requireStillWaiting(t, "four-eyes-approve", a)
	requireRuns(t, l, 0, 0)

	// The same signer again, and the same signer's key under another decider's name: one signer.
	out, err = e.decideSigned(t, ada, a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada", Reason: "still fine"})
	require.NoError(t, err)
	require.Equal(t, "recorded; waiting for another signer (1 of 2)", out.SignersText())
	out, err = e.decideSigned(t, ada, a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "bob", Reason: "as bob"})
	require.NoError(t, err)
	require.Equal(t, 1, out.Signers)
	// Bob's key under ada's name: the same decider.
	out, err = e.decideSigned(t, bob, a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ADA", Reason: "as ada"})
	require.NoError(t, err)
	require.Equal(t, 1, out.Signers)
	e.requireStillWaiting(t, "four-eyes-approve", a)
	requireRuns(t, l, 0, 0)

	out, err = e.decideSigned(t, bob, a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "bob", Reason: "agreed"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
	require.Equal(t, 2, out.Signers)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	requireRuns(t, l, 1, 1)
}

func TestE2EFourEyesDenyAfterOneApproval(t *testing.T) {
	l := newLedger()
	ada, bob := newSigner(t), newSigner(t)
	e, _, _ := setupSigned(t, l, fourEyesPolicy(), trustEntry{s: ada}, trustEntry{s: bob})
	run := e.start(t, "four-eyes-deny", req, 10*time.Second)
	a := e.pendingOf(t, "four-eyes-deny")

	out, err := e.decideSigned(t, ada, a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada", Reason: "checked"})
	require.NoError(t, err)
	require.True(t, out.Waiting())
	out, err = e.decideSigned(t, bob, a, reconcile.Decision{Decision: reconcile.Deny, Tenant: "default", DecidedBy: "bob", Reason: "no"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalDenied, out.Status)
	err = run.Get(testCtx(t), nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), "did not approve it")
	require.Equal(t, oncekeystore.ApprovalDenied, e.approval(t, a.OperationKey).Status)
	requireRuns(t, l, 0, 0)
}

// A policy asking for two signers on a worker without a trust list: the worker does not start.
func TestFourEyesNeedsTrustList(t *testing.T) {
	t.Parallel()
	l := newLedger()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(l.CreateTicket, fourEyesPolicy()))
	_, err := worker.NewPlugin(worker.Options{Store: memstore.New(nil), Registry: reg})
	var ce *worker.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "TrustList", ce.Field)
	var st *oncekey.SignersNeedTrustListError
	require.True(t, errors.As(err, &st))
	require.Equal(t, 2, st.Signers)
	require.Contains(t, err.Error(), "give every worker the trust list")
	_, err = worker.NewInterceptor(worker.Options{Store: memstore.New(nil), Registry: reg})
	require.ErrorAs(t, err, &st)
}

// An approval in the store signed by one trusted signer only (written by hand, or by a worker
// whose registry asked for one signer) authorises nothing at the gate when the policy asks for
// two: the approval workflow finds it decided and releases the call, which the worker refuses.
func TestE2EFourEyesGateCountsTheStoredSigners(t *testing.T) {
	l := newLedger()
	ada, bob := newSigner(t), newSigner(t)
	e, _, _ := setupSigned(t, l, fourEyesPolicy(), trustEntry{s: ada}, trustEntry{s: bob})
	run := e.start(t, "four-eyes-gate", req, 10*time.Second)
	a := e.pendingOf(t, "four-eyes-gate")
	d, err := reconcile.SignDecision(ada, a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada"})
	require.NoError(t, err)
	_, err = e.approvals(t).DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: a.Tenant, OperationKey: a.OperationKey,
		Episode: a.Episode, Token: a.Token, Status: oncekeystore.ApprovalApproved, DecidedBy: "ada", Retention: time.Hour, Signature: d.Signature})
	require.NoError(t, err)
	_, _ = e.decideSigned(t, bob, a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "bob"})
	err = run.Get(testCtx(t), nil)
	require.Error(t, err)
	require.Contains(t, detail(err), "has 1 of the 2 different signers the worker trusts that its policy asks for")
	requireRuns(t, l, 0, 0)
}
