package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// fourEyesRegistry has the tool Refund, whose approval asks for two signers.
func fourEyesRegistry(t *testing.T) *oncekey.Registry {
	t.Helper()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.SetAs("Refund", func(context.Context, refundIn) error { return nil },
		oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{Signers: 2}}))
	return reg
}

// A policy asking for two signers: the first signer's approval is recorded as a partial
// approval and answered as waiting (1 of 2); the same key again, or another key under the same
// decider, adds nothing; an edit is refused; the second signer's approval decides it.
func TestDecideApprovalFourEyes(t *testing.T) {
	store := memstore.New(nil)
	ctx := context.Background()
	res, err := store.RequestApproval(ctx, &oncekeystore.RequestApprovalParams{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund",
		Fingerprint: "fp", Summary: "refund 120.00 EUR", Token: "w1_tok", Timeout: time.Hour})
	require.NoError(t, err)
	ap := res.Approval
	ada, bob := testSigner(t), testSigner(t)
	kinds := []decisionsig.Kind{decisionsig.Approve, decisionsig.ApproveEdited, decisionsig.Deny}
	tl, err := decisionsig.NewTrustList(
		decisionsig.Entry{PublicKey: ada.Public(), Tenants: []string{"t1"}, Tools: []string{"Refund"}, Kinds: kinds},
		decisionsig.Entry{PublicKey: bob.Public(), Tenants: []string{"t1"}, Tools: []string{"Refund"}, Kinds: kinds})
	require.NoError(t, err)
	acts, err := activities.NewWithOptions(store, activities.Options{Registry: fourEyesRegistry(t), TrustList: tl})
	require.NoError(t, err)
	own := caller{id: reconcile.ApprovalWorkflowID("ok1_a"), typ: reconcile.ApprovalWorkflowName}
	decide := func(s decisionsig.Signer, d reconcile.Decision) (activities.ApprovalAnswer, error) {
		signed, err := reconcile.SignDecision(s, ap, d)
		require.NoError(t, err)
		out, err := callFrom(t, acts, own, activities.DecideApprovalName, activities.DecideApprovalInput{Tenant: "t1", OperationKey: "ok1_a",
			Tool: "Refund", Episode: 1, Token: "w1_tok", Status: oncekeystore.ApprovalApproved, DecidedBy: d.DecidedBy, Reason: d.Reason,
			Retention: time.Hour, Arguments: d.Arguments, Signature: signed.Signature})
		var ans activities.ApprovalAnswer
		if err == nil {
			require.NoError(t, json.Unmarshal(out, &ans))
		}
		return ans, err
	}
	stored := func() *oncekeystore.Approval {
		a, err := store.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
		require.NoError(t, err)
		return a
	}

	ans, err := decide(ada, reconcile.Decision{Decision: reconcile.Approve, Tenant: "t1", DecidedBy: "ada"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalPending, ans.Status)
	require.Equal(t, "recorded; waiting for another signer (1 of 2)", ans.SignersText())
	require.Len(t, stored().Cosignatures, 1)

	ans, err = decide(ada, reconcile.Decision{Decision: reconcile.Approve, Tenant: "t1", DecidedBy: "ada", Reason: "again"})
	require.NoError(t, err)
	require.Equal(t, 1, ans.Signers)
	ans, err = decide(bob, reconcile.Decision{Decision: reconcile.Approve, Tenant: "t1", DecidedBy: "Ada"})
	require.NoError(t, err)
	require.Equal(t, 1, ans.Signers, "another key under a decider already counted adds nothing")
	require.Len(t, stored().Cosignatures, 1, "nothing is written for a signer already counted")

	_, err = decide(bob, reconcile.Decision{Decision: reconcile.Approve, Tenant: "t1", DecidedBy: "bob", Arguments: json.RawMessage(`{"amount_cents":100}`)})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, activities.ErrTypeInvalid, appErr.Type())
	require.Contains(t, appErr.Error(), "request changes instead")
	require.Equal(t, oncekeystore.ApprovalPending, stored().Status)

	ans, err = decide(bob, reconcile.Decision{Decision: reconcile.Approve, Tenant: "t1", DecidedBy: "bob"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalApproved, ans.Status)
	require.Equal(t, 2, ans.Signers)
	final := stored()
	require.Equal(t, oncekeystore.ApprovalApproved, final.Status)
	require.Equal(t, 2, reconcile.ApprovalSigners(tl, final))
}

// Without a trust list, a decision on a request that needs two signers records nothing and
// fails as a configuration error.
func TestDecideApprovalFourEyesNeedsTrustList(t *testing.T) {
	store := memstore.New(nil)
	_, err := store.RequestApproval(context.Background(), &oncekeystore.RequestApprovalParams{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund",
		Fingerprint: "fp", Summary: "s", Token: "w1_tok", Timeout: time.Hour})
	require.NoError(t, err)
	acts, err := activities.New(store, fourEyesRegistry(t), nil)
	require.NoError(t, err)
	_, err = callFrom(t, acts, caller{id: reconcile.ApprovalWorkflowID("ok1_a"), typ: reconcile.ApprovalWorkflowName}, activities.DecideApprovalName,
		activities.DecideApprovalInput{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund", Episode: 1, Token: "w1_tok",
			Status: oncekeystore.ApprovalApproved, DecidedBy: "ada", Retention: time.Hour})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, oncekey.ErrTypeConfig, appErr.Type())
	require.Contains(t, appErr.Error(), "give every worker the trust list")
	a, err := store.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalPending, a.Status)
}
