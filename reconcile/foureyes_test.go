package reconcile_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// AuditApprovalSigners names each signer of a four-eyes approval in the order they signed, each
// audited from the record alone: a signer already counted (the same key, or the same decider)
// counts once; a key revoked since does not verify; a partial approval of another request is a
// mismatch; without a trust list each is only decoded; a one-signer approval has none.
func TestAuditApprovalSigners(t *testing.T) {
	t.Parallel()
	signer := func(name string) (*decisionsig.Ed25519Signer, decisionsig.Entry) {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		s, err := decisionsig.NewEd25519Signer(priv)
		require.NoError(t, err)
		return s, decisionsig.Entry{PublicKey: pub, Name: name, Tenants: []string{"acme"}, Tools: []string{"Refund"},
			Kinds: []decisionsig.Kind{decisionsig.Approve, decisionsig.Deny}}
	}
	ada, adaE := signer("ada")
	bob, bobE := signer("bob")
	tl, err := decisionsig.NewTrustList(adaE, bobE)
	require.NoError(t, err)
	ap := &oncekeystore.Approval{Tenant: "acme", OperationKey: "ok1_a", Namespace: "default", Tool: "Refund", Fingerprint: "fp",
		Status: oncekeystore.ApprovalPending, Episode: 1, Token: "w1_tok", RequestedAt: time.Unix(0, 0)}
	sig := func(s decisionsig.Signer, by string, kind reconcile.DecisionKind, on *oncekeystore.Approval) []byte {
		d, err := reconcile.SignDecision(s, on, reconcile.Decision{Decision: kind, DecidedBy: by, Reason: "r"})
		require.NoError(t, err)
		return d.Signature
	}

	require.Nil(t, reconcile.AuditApprovalSigners(tl, ap), "no partial approvals: one signer")

	ap.Cosignatures = [][]byte{sig(ada, "ada", reconcile.Approve, ap), sig(bob, "ADA", reconcile.Approve, ap)}
	a := reconcile.AuditApprovalSigners(tl, ap)
	require.Len(t, a.Signers, 2)
	require.True(t, a.Signers[0].Verified)
	require.Equal(t, "ada", a.Signers[0].Entry.Name)
	require.True(t, a.Signers[1].Repeat, "another key under a decider already counted counts once")
	require.Equal(t, "1 of 2: waiting for another signer", a.Text(true))

	ap.Cosignatures = ap.Cosignatures[:1]
	approved := *ap
	approved.Status, approved.DecidedBy, approved.Reason = oncekeystore.ApprovalApproved, "bob", "r"
	approved.Signature = sig(bob, "bob", reconcile.Approve, ap)
	a = reconcile.AuditApprovalSigners(tl, &approved)
	require.Len(t, a.Signers, 2)
	require.False(t, a.Signers[0].Decision)
	require.True(t, a.Signers[1].Decision)
	require.Equal(t, "bob", a.Signers[1].Signed.Statement.DecidedBy)
	require.Equal(t, "2 of 2 signers", a.Text(true))

	bobE.Revoked = true
	revoked, err := decisionsig.NewTrustList(adaE, bobE)
	require.NoError(t, err)
	a = reconcile.AuditApprovalSigners(revoked, &approved)
	require.False(t, a.Signers[1].Verified)
	require.ErrorIs(t, a.Signers[1].Err, decisionsig.ErrUntrusted)
	require.Equal(t, "2 of 2 signers; 1 verifies against the trust list now", a.Text(true))

	a = reconcile.AuditApprovalSigners(nil, &approved)
	require.False(t, a.Signers[0].Verified)
	require.NoError(t, a.Signers[0].Err)
	require.Equal(t, ada.KeyID(), a.Signers[0].Signed.KeyID)
	require.Equal(t, "2 of 2 signers", a.Text(false))

	other := *ap
	other.Token = "w1_other"
	replayed := approved
	replayed.Cosignatures = [][]byte{sig(ada, "ada", reconcile.Approve, &other)}
	a = reconcile.AuditApprovalSigners(tl, &replayed)
	require.ErrorIs(t, a.Signers[0].Err, decisionsig.ErrMismatch, "a partial approval of another request")

	denied := *ap
	denied.Status, denied.DecidedBy, denied.Reason = oncekeystore.ApprovalDenied, "bob", "r"
	denied.Signature = sig(bob, "bob", reconcile.Deny, ap)
	a = reconcile.AuditApprovalSigners(tl, &denied)
	require.Len(t, a.Signers, 2)
	require.True(t, a.Signers[1].Verified)
	require.Equal(t, decisionsig.Deny, a.Signers[1].Signed.Statement.Kind)
	require.Empty(t, a.Text(true), "a denial is no count of signers")
}
