package activities_test

import (
	"context"
	"crypto/ed25519"
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

func testSigner(t *testing.T) *decisionsig.Ed25519Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	s, err := decisionsig.NewEd25519Signer(priv)
	require.NoError(t, err)
	return s
}

// requireSignatureRefused checks err is the non-retryable refusal of a decision for reason: of
// its own type, oncekey.ErrTypeSignatureRefused (oncekey.InvalidResolution before it, which it no
// longer is), saying what to do.
func requireSignatureRefused(t *testing.T, err error, reason decisionsig.Reason) {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, oncekey.ErrTypeSignatureRefused, appErr.Type())
	require.NotEqual(t, activities.ErrTypeInvalid, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.Contains(t, appErr.Error(), "decision refused ("+string(reason)+")")
	require.Contains(t, appErr.Error(), "nothing was recorded. Sign it with a key the workers' trust list holds for tenant t1, tool ")
	require.Contains(t, appErr.Error(), " --tenant t1 ")
	require.Contains(t, appErr.Error(), " --sign-key FILE`")
}

// With a trust list, oncekey's decision activities called straight from a workflow a namespace
// writer runs (under the approval workflow's ID and type) record nothing without a trusted
// signature made for exactly that request: unsigned, another key's, another request's, another
// tenant's key's, or edited arguments other than the signed ones. A trusted one lands, and is
// stored with the decision.
func TestDecideApprovalVerifiesTheSignature(t *testing.T) {
	store := memstore.New(nil)
	ctx := context.Background()
	res, err := store.RequestApproval(ctx, &oncekeystore.RequestApprovalParams{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund",
		Fingerprint: "fp", Summary: "refund 120.00 EUR", Token: "w1_tok", Timeout: time.Hour})
	require.NoError(t, err)
	ap := res.Approval
	ada, otherTenant := testSigner(t), testSigner(t)
	tl, err := decisionsig.NewTrustList(
		decisionsig.Entry{PublicKey: ada.Public(), Tenants: []string{"t1"}, Tools: []string{"Refund"}, Kinds: []decisionsig.Kind{decisionsig.Approve, decisionsig.ApproveEdited}},
		decisionsig.Entry{PublicKey: otherTenant.Public(), Tenants: []string{"t2"}, Tools: []string{"*"}, Kinds: []decisionsig.Kind{decisionsig.Approve}})
	require.NoError(t, err)
	acts, err := activities.NewWithOptions(store, activities.Options{Registry: oncekey.NewRegistry(), TrustList: tl})
	require.NoError(t, err)
	own := caller{id: reconcile.ApprovalWorkflowID("ok1_a"), typ: reconcile.ApprovalWorkflowName}
	approve := reconcile.Decision{Decision: reconcile.Approve, Tenant: "t1", DecidedBy: "ada"}
	input := func(d reconcile.Decision) activities.DecideApprovalInput {
		return activities.DecideApprovalInput{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund", Episode: 1, Token: "w1_tok",
			Status: oncekeystore.ApprovalApproved, DecidedBy: d.DecidedBy, Reason: d.Reason, Retention: time.Hour,
			Arguments: d.Arguments, Signature: d.Signature, SignatureRefusedType: true}
	}
	sign := func(s decisionsig.Signer, a *oncekeystore.Approval, d reconcile.Decision) reconcile.Decision {
		signed, err := reconcile.SignDecision(s, a, d)
		require.NoError(t, err)
		return signed
	}

	_, err = callFrom(t, acts, own, activities.DecideApprovalName, input(approve))
	requireSignatureRefused(t, err, decisionsig.ReasonUnsigned)
	older := input(approve)
	older.SignatureRefusedType = false
	_, err = callFrom(t, acts, own, activities.DecideApprovalName, older)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activities.ErrTypeInvalid, appErr.Type(), "a workflow of an earlier worker gets the type it knows, and waits on")
	require.Contains(t, appErr.Error(), "decision refused (unsigned)")
	_, err = callFrom(t, acts, own, activities.DecideApprovalName, input(sign(testSigner(t), ap, approve)))
	requireSignatureRefused(t, err, decisionsig.ReasonUntrusted)
	_, err = callFrom(t, acts, own, activities.DecideApprovalName, input(sign(otherTenant, ap, approve)))
	requireSignatureRefused(t, err, decisionsig.ReasonUntrusted)
	otherRequest := *ap
	otherRequest.Token = "w1_another"
	_, err = callFrom(t, acts, own, activities.DecideApprovalName, input(sign(ada, &otherRequest, approve)))
	requireSignatureRefused(t, err, decisionsig.ReasonMismatch)
	edited := approve
	edited.Arguments = json.RawMessage(`{"amount_cents":100}`)
	signedEdit := sign(ada, ap, edited)
	signedEdit.Arguments = json.RawMessage(`{"amount_cents":100000}`)
	_, err = callFrom(t, acts, own, activities.DecideApprovalName, input(signedEdit))
	requireSignatureRefused(t, err, decisionsig.ReasonMismatch)
	byMallory := sign(ada, ap, approve)
	byMallory.DecidedBy = "mallory"
	_, err = callFrom(t, acts, own, activities.DecideApprovalName, input(byMallory))
	requireSignatureRefused(t, err, decisionsig.ReasonMismatch)

	after, err := store.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
	require.NoError(t, err)
	require.Equal(t, ap, after, "refused decisions leave the approval untouched")

	good := sign(ada, ap, approve)
	_, err = callFrom(t, acts, own, activities.DecideApprovalName, input(good))
	require.NoError(t, err)
	after, err = store.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_a"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalApproved, after.Status)
	require.JSONEq(t, string(good.Signature), string(after.Signature))
	s, err := decisionsig.Decode(after.Signature)
	require.NoError(t, err)
	want, err := reconcile.ApprovalStatement(after, "")
	require.NoError(t, err)
	_, err = tl.Verify(s, want)
	require.NoError(t, err, "the stored decision re-verifies from the record alone")
}

// Without a trust list nothing is verified: an unsigned decision lands, as before.
func TestDecideApprovalWithoutTrustListVerifiesNothing(t *testing.T) {
	store := memstore.New(nil)
	_, err := store.RequestApproval(context.Background(), &oncekeystore.RequestApprovalParams{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund",
		Fingerprint: "fp", Summary: "s", Token: "w1_tok", Timeout: time.Hour})
	require.NoError(t, err)
	acts, err := activities.New(store, oncekey.NewRegistry(), nil)
	require.NoError(t, err)
	_, err = callFrom(t, acts, caller{id: reconcile.ApprovalWorkflowID("ok1_a"), typ: reconcile.ApprovalWorkflowName}, activities.DecideApprovalName,
		activities.DecideApprovalInput{Tenant: "t1", OperationKey: "ok1_a", Tool: "Refund", Episode: 1, Token: "w1_tok",
			Status: oncekeystore.ApprovalDenied, DecidedBy: "bob", Reason: "no", Retention: time.Hour})
	require.NoError(t, err)
}

// RecordResolution called straight from a workflow under the reconciliation workflow's ID
// settles nothing without a trusted signature of exactly that resolution; a trusted one settles
// it and is kept with the record.
func TestRecordResolutionVerifiesTheSignature(t *testing.T) {
	store := memstore.New(nil)
	rec := unknownRecord(t, store, "ok1_r", "default-test-namespace")
	ada := testSigner(t)
	tl, err := decisionsig.NewTrustList(decisionsig.Entry{PublicKey: ada.Public(), Tenants: []string{"t1"}, Tools: []string{"*"}, Kinds: []decisionsig.Kind{decisionsig.Resolve}})
	require.NoError(t, err)
	acts, err := activities.NewWithOptions(store, activities.Options{Registry: oncekey.NewRegistry(), TrustList: tl})
	require.NoError(t, err)
	ref := activities.RecordRef{Tenant: "t1", OperationKey: "ok1_r", Tool: "CreateTicket"}
	r := reconcile.Resolution{Epoch: rec.Epoch, Outcome: reconcile.NotApplied, ResolvedBy: "ada", Note: "nothing downstream"}
	from := reconciliationOf("ok1_r")

	_, err = callFrom(t, acts, from, activities.RecordResolutionName, activities.RecordInput{RecordRef: ref, Tool: "CreateTicket", Resolution: r, SignatureRefusedType: true})
	requireSignatureRefused(t, err, decisionsig.ReasonUnsigned)
	signed, err := reconcile.SignResolution(ada, rec, r)
	require.NoError(t, err)
	forged := signed
	forged.Outcome, forged.Result = reconcile.Applied, json.RawMessage(`{"id":"T-1"}`)
	_, err = callFrom(t, acts, from, activities.RecordResolutionName, activities.RecordInput{RecordRef: ref, Tool: "CreateTicket", Resolution: forged, SignatureRefusedType: true})
	requireSignatureRefused(t, err, decisionsig.ReasonMismatch)
	got, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_r"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, got.Status, "refused resolutions settle nothing")

	_, err = callFrom(t, acts, from, activities.RecordResolutionName, activities.RecordInput{RecordRef: ref, Tool: "CreateTicket", Resolution: signed})
	require.NoError(t, err)
	got, err = store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_r"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusReleased, got.Status)
	kept, err := store.ResolutionSignature(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_r"})
	require.NoError(t, err)
	require.JSONEq(t, string(signed.Signature), string(kept))
}
