package inbox

import (
	"context"
	"html"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// Four eyes on the approval page: each signer of an approval that asked for two, in the order
// they signed, with the decider, when and whether it verifies; "1 of 2: waiting for another
// signer" after the first, "2 of 2 signers" after the second, and a signer whose key was
// revoked since shown NOT verified.
func TestApprovalPageShowsEverySigner(t *testing.T) {
	dir := t.TempDir()
	ada, adaEntry := writeKey(t, dir, "ada")
	bob, bobEntry := writeKey(t, dir, "bob")
	bobEntry.Revoked = true
	tl, err := decisionsig.NewTrustList(adaEntry, bobEntry)
	require.NoError(t, err)
	e := setup(t, func(o *Options) { o.TrustList = tl })
	ctx := context.Background()
	key := e.ask("acme", "IssueRefund", "refund 120.00 EUR")
	sign := func(s decisionsig.Signer, by string, st oncekeystore.ApprovalStatus) {
		ap, err := e.store.GetApproval(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
		require.NoError(t, err)
		d, err := reconcile.SignDecision(s, ap, reconcile.Decision{Decision: reconcile.Approve, DecidedBy: by})
		require.NoError(t, err)
		p := &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: key, Episode: 1, Token: ap.Token, Status: st,
			Retention: time.Hour, Signature: d.Signature}
		if st != oncekeystore.ApprovalPending {
			p.DecidedBy = by
		}
		_, err = e.store.DecideApproval(ctx, p)
		require.NoError(t, err)
	}
	dd := func(body, name string) string {
		m := regexp.MustCompile(`<dt>` + name + `</dt><dd class="v">([^<]*)</dd>`).FindStringSubmatch(body)
		require.NotNil(t, m, "no %s in\n%s", name, body)
		return html.UnescapeString(m[1])
	}

	sign(ada, "ada", oncekeystore.ApprovalPending)
	_, body := e.req("GET", approvalLink("acme", key), nil, nil)
	require.Equal(t, "1 of 2: waiting for another signer", dd(body, "Signers"))
	require.Regexp(t, `^`+regexp.QuoteMeta(ada.KeyID())+` \(ada\), verified; approved by ada at \S+Z$`, dd(body, "Signer 1"))
	require.NotContains(t, body, "<dt>Signer 2</dt>")

	sign(bob, "bob", oncekeystore.ApprovalApproved)
	_, body = e.req("GET", approvalLink("acme", key), nil, nil)
	require.Equal(t, "2 of 2 signers; 1 verifies against the trust list now", dd(body, "Signers"))
	require.Regexp(t, `^`+regexp.QuoteMeta(ada.KeyID())+` \(ada\), verified; approved by ada at `, dd(body, "Signer 1"))
	require.Regexp(t, `^`+regexp.QuoteMeta(bob.KeyID())+` \(bob\), NOT verified: .*the key is revoked; approved by bob at `, dd(body, "Signer 2"))
}
