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

// A signed revocation names the grant it revokes: it audits as signed by its key on the grant
// it was made for, and is a mismatch on another grant (its ID) or under another revoker; a key
// not trusted for grant_revoke is untrusted; an unsigned revocation has nothing to audit.
func TestSignedRevocation(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	signer, err := decisionsig.NewEd25519Signer(priv)
	require.NoError(t, err)
	entry := decisionsig.Entry{PublicKey: pub, Name: "ada", Tenants: []string{"acme"}, Tools: []string{"IssueRefund"},
		Kinds: []decisionsig.Kind{decisionsig.GrantRevoke}}
	tl, err := decisionsig.NewTrustList(entry)
	require.NoError(t, err)
	g := &oncekeystore.Grant{ID: "g1_a", Namespace: "default", Tenant: "acme", Tool: "IssueRefund", CreatedBy: "ada",
		CreatedAt: time.Unix(0, 0), ExpiresAt: time.Unix(3600, 0)}

	_, err = reconcile.SignRevocation(signer, g, oncekeystore.RevokeGrantParams{ID: "g1_b", RevokedBy: "ada"})
	require.Error(t, err, "the grant read must be the one revoked")
	p, err := reconcile.SignRevocation(signer, g, oncekeystore.RevokeGrantParams{ID: g.ID, RevokedBy: "ada"})
	require.NoError(t, err)
	require.NoError(t, p.Validate())

	revoked := *g
	revoked.RevokedBy, revoked.RevocationSignature = "ada", p.Signature
	s, e, err := reconcile.AuditRevocation(tl, &revoked)
	require.NoError(t, err)
	require.Equal(t, signer.KeyID(), s.KeyID)
	require.Equal(t, "ada", e.Name)
	require.Equal(t, decisionsig.GrantRevoke, s.Statement.Kind)

	other := revoked
	other.ID = "g1_b"
	_, _, err = reconcile.AuditRevocation(tl, &other)
	var se *decisionsig.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, decisionsig.ReasonMismatch, se.Reason)
	require.Equal(t, "grant_id", se.Field)

	by := revoked
	by.RevokedBy = "mallory"
	_, _, err = reconcile.AuditRevocation(tl, &by)
	require.ErrorIs(t, err, decisionsig.ErrMismatch)

	entry.Kinds = []decisionsig.Kind{decisionsig.GrantCreate}
	createOnly, err := decisionsig.NewTrustList(entry)
	require.NoError(t, err)
	_, _, err = reconcile.AuditRevocation(createOnly, &revoked)
	require.ErrorIs(t, err, decisionsig.ErrUntrusted)

	unsigned := *g
	unsigned.RevokedBy = "ada"
	s, _, err = reconcile.AuditRevocation(tl, &unsigned)
	require.NoError(t, err)
	require.Nil(t, s)
}
