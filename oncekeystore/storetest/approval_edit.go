package storetest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

// testApprovalEditAndMessage: an approval keeps what the decision says to the model and whether
// it asks for changes; an edit's approval keeps the key it replaces (EditOf), and a replaced one
// the edit's key (EditedAs). A request asks anew, clearing them, only what it would ask anew
// anyway: a replaced approval of its fingerprint stands; one of another fingerprint is asked
// anew, as a denied one is.
func testApprovalEditAndMessage(t *testing.T, s oncekeystore.ApprovalStore) {
	// A denial that requests changes, with a message for the model.
	p := approvalParams()
	p.Token = "w1_tok"
	a := request(t, s, p).Approval
	d := decision(a, oncekeystore.ApprovalDenied)
	d.ModelMessage, d.ChangesRequested = "Use the order number, not the invoice number.", true
	got := do(t, s.DecideApproval, d)
	require.Equal(t, d.ModelMessage, got.ModelMessage)
	require.True(t, got.ChangesRequested)
	require.Equal(t, got, getApproval(t, s, a.Tenant, a.OperationKey))

	// An edit: the replaced approval names the edit, the edit's approval names the original.
	orig := approvalParams()
	orig.Token = "w1_orig"
	o := request(t, s, orig).Approval
	edit := approvalParams()
	edit.Token, edit.EditOf, edit.Fingerprint = "e1_w1_orig", o.OperationKey, strings.Repeat("cd", 32)
	e := request(t, s, edit).Approval
	require.Equal(t, o.OperationKey, e.EditOf)
	e = decide(t, s, e, oncekeystore.ApprovalApproved)
	require.Equal(t, o.OperationKey, e.EditOf, "kept when decided")
	r := decision(o, oncekeystore.ApprovalReplaced)
	r.EditedAs = e.OperationKey
	replaced := do(t, s.DecideApproval, r)
	require.Equal(t, oncekeystore.ApprovalReplaced, replaced.Status)
	require.Equal(t, e.OperationKey, replaced.EditedAs)
	require.True(t, replaced.Status.Decided())

	// The same call again: the replacement stands. Other arguments: asked anew, links cleared.
	again := request(t, s, orig)
	require.False(t, again.Created)
	require.Equal(t, oncekeystore.ApprovalReplaced, again.Approval.Status)
	other := *orig
	other.Fingerprint = strings.Repeat("ef", 32)
	anew := request(t, s, &other)
	require.True(t, anew.Created)
	require.Equal(t, oncekeystore.ApprovalPending, anew.Approval.Status)
	require.Equal(t, int64(2), anew.Approval.Episode)
	require.Empty(t, anew.Approval.EditedAs)
	require.Empty(t, anew.Approval.ModelMessage)

	// Replaced needs the edit's key, and only replaced takes one; a message is plain text.
	bad := decision(anew.Approval, oncekeystore.ApprovalReplaced)
	requireInvalid(t, decideErr(t, s, bad), "EditedAs")
	bad = decision(anew.Approval, oncekeystore.ApprovalApproved)
	bad.ModelMessage = "line one\x1b[31m"
	requireInvalid(t, decideErr(t, s, bad), "ModelMessage")
	bad = decision(anew.Approval, oncekeystore.ApprovalApproved)
	bad.ChangesRequested = true
	requireInvalid(t, decideErr(t, s, bad), "ChangesRequested")
}

// decideErr is the error of DecideApproval with p.
func decideErr(t *testing.T, s oncekeystore.ApprovalStore, p *oncekeystore.DecideApprovalParams) error {
	t.Helper()
	_, err := s.DecideApproval(ctxT(t), p)
	return err
}
