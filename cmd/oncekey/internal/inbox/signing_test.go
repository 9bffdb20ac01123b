package inbox

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// writeKey writes a new private key to dir/name.pem and returns its signer and trust list entry
// (trusted for tenant acme, every tool and kind).
func writeKey(t *testing.T, dir, name string) (decisionsig.Signer, decisionsig.Entry) {
	t.Helper()
	priv, pub, _, err := decisionsig.GenerateKey()
	require.NoError(t, err)
	path := filepath.Join(dir, name+".pem")
	require.NoError(t, os.WriteFile(path, priv, 0o600))
	s, err := decisionsig.LoadSigner(path)
	require.NoError(t, err)
	p, err := decisionsig.ParsePublicKey(pub)
	require.NoError(t, err)
	return s, decisionsig.Entry{PublicKey: p, Name: name, Tenants: []string{"acme"}, Tools: []string{decisionsig.Any},
		Kinds: []decisionsig.Kind{decisionsig.Approve, decisionsig.Deny, decisionsig.Resolve}}
}

// The sign-keys file: NAME KEYFILE lines, relative to the file, each key loaded; a bad line, a
// name given twice or a key that does not load is refused naming the line.
func TestLoadSignKeys(t *testing.T) {
	dir := t.TempDir()
	ada, _ := writeKey(t, dir, "ada")
	path := filepath.Join(dir, "sign-keys")
	require.NoError(t, os.WriteFile(path, []byte("# people\n\nada ada.pem\nbob@example.com "+filepath.Join(dir, "ada.pem")+"\n"), 0o600))
	m, err := LoadSignKeys(path)
	require.NoError(t, err)
	require.Len(t, m, 2)
	require.Equal(t, ada.KeyID(), m["ada"].KeyID())
	require.Equal(t, ada.KeyID(), m["bob@example.com"].KeyID())

	for text, want := range map[string]string{
		"ada\n":                  "line 1: want NAME KEYFILE, got 1 fields",
		"ada ada.pem\nada a.pem": `line 2: "ada" is given twice`,
		"ada missing.pem":        "line 1: the key of ada",
		"# nobody":               "no keys",
	} {
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		_, err := LoadSignKeys(path)
		require.ErrorContains(t, err, want, text)
	}
}

// With Signers set, a person the inbox holds no key for decides nothing: the approval and the
// record pages refuse the form, saying how to get a key, and nothing is sent or written. A
// stored decision's signer is shown, verified against the trust list, and not verified once its
// key is revoked.
func TestSigningInbox(t *testing.T) {
	dir := t.TempDir()
	ada, entry := writeKey(t, dir, "ada")
	tl, err := decisionsig.NewTrustList(entry)
	require.NoError(t, err)
	e := setup(t, func(o *Options) { o.Signers = map[string]decisionsig.Signer{"ada": ada}; o.TrustList = tl })
	key := e.ask("acme", "IssueRefund", "refund 120.00 EUR")
	cookie, tok := e.session("/", nil)
	res, body := e.req("POST", "/decide", url.Values{"tenant": {"acme"}, "key": {key}, "episode": {"1"}, "decision": {"approve"},
		"csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, body)
	require.Contains(t, body, "Refused: you have no signing key here")
	require.Contains(t, body, "holds none for ines. Nothing was sent.")
	require.Contains(t, body, "oncekey keys gen --out ines.pem --name ines")
	ap, err := e.store.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalPending, ap.Status, "nothing was written")

	rk, epoch := e.seed("acme", "Book", oncekeystore.StatusUnknown, nil, "timeout")
	res, body = e.req("POST", "/resolve", url.Values{"tenant": {"acme"}, "key": {rk}, "epoch": {strconv.FormatInt(epoch, 10)},
		"outcome": {"not_applied"}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, body)
	require.Contains(t, body, "holds none for ines. Nothing was sent.")

	// A resolution signed with ada's key, recorded as a worker records it: the record page names it.
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: rk})
	require.NoError(t, err)
	res2, err := reconcile.SignResolution(ada, rec, reconcile.Resolution{Outcome: reconcile.NotApplied, ResolvedBy: "ada (oncekey-serve)", Note: "never sent"})
	require.NoError(t, err)
	_, err = e.store.Resolve(context.Background(), &oncekeystore.ResolveParams{Tenant: "acme", OperationKey: rk, Epoch: epoch,
		Status: oncekeystore.StatusReleased, ResolvedBy: res2.ResolvedBy, Note: res2.Note, Signature: res2.Signature})
	require.NoError(t, err)
	_, body = e.req("GET", recordLink("acme", rk, false), nil, nil)
	require.Contains(t, body, "<dt>Resolution signed by</dt><dd class=\"v\">"+ada.KeyID()+" (ada), verified</dd>")

	// ada's signed approval, recorded as a worker records it: the page names her key, verified.
	d, err := reconcile.SignDecision(ada, ap, reconcile.Decision{Decision: reconcile.Approve, DecidedBy: "ada (oncekey-serve)", Reason: "checked"})
	require.NoError(t, err)
	_, err = e.store.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: key, Episode: 1,
		Token: ap.Token, Status: oncekeystore.ApprovalApproved, DecidedBy: d.DecidedBy, Reason: d.Reason, Retention: time.Hour, Signature: d.Signature})
	require.NoError(t, err)
	_, body = e.req("GET", approvalLink("acme", key), nil, nil)
	require.Contains(t, body, "<dt>Signed by</dt><dd class=\"v\">"+ada.KeyID()+" (ada), verified</dd>")

	// Revoking a standing grant: refused without a key; signed with ada's, kept with the grant.
	grant, err := e.store.CreateGrant(context.Background(), &oncekeystore.CreateGrantParams{Namespace: "default", Tenant: "acme", Tool: "IssueRefund",
		CreatedBy: "ada", Duration: time.Hour})
	require.NoError(t, err)
	res, body = e.req("POST", "/grants/revoke", url.Values{"grant": {grant.ID}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, body)
	require.Contains(t, body, "holds none for ines. Nothing was revoked.")
	grant, err = e.store.GetGrant(context.Background(), grant.ID)
	require.NoError(t, err)
	require.Equal(t, oncekeystore.GrantActive, grant.Status, "nothing was revoked")
	e.srv.opts.Signers["ines"] = ada
	res, body = e.req("POST", "/grants/revoke", url.Values{"grant": {grant.ID}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	grant, err = e.store.GetGrant(context.Background(), grant.ID)
	require.NoError(t, err)
	require.Equal(t, oncekeystore.GrantRevoked, grant.Status)
	entry.Kinds = append(entry.Kinds, decisionsig.GrantRevoke)
	revokeTrust, err := decisionsig.NewTrustList(entry)
	require.NoError(t, err)
	signed, _, err := reconcile.AuditRevocation(revokeTrust, grant)
	require.NoError(t, err, "the revocation is signed by the signed-in person's key, as ines (oncekey-serve)")
	require.Equal(t, ada.KeyID(), signed.KeyID)
	require.Equal(t, "ines (oncekey-serve)", signed.Statement.DecidedBy)
	e.srv.opts.TrustList = revokeTrust
	_, body = e.req("GET", "/grants?show=ended", nil, nil)
	require.Contains(t, body, `<td class="signed">made: unsigned; revoked: `+ada.KeyID()+" (ada), verified</td>")
	e.srv.opts.TrustList = tl

	entry.Revoked = true
	revoked, err := decisionsig.NewTrustList(entry)
	require.NoError(t, err)
	opts := e.srv.opts
	opts.TrustList = revoked
	e.srv, err = New(opts)
	require.NoError(t, err)
	_, body = e.req("GET", approvalLink("acme", key), nil, nil)
	require.Contains(t, body, ada.KeyID()+" (ada), NOT verified: decisionsig: decision refused (untrusted)")
	require.Contains(t, body, "the key is revoked")
}

// Four eyes through the inbox: ines's signed approval is recorded and the page says the call
// waits for another signer, with nothing run downstream; a second signer's approval runs it once.
func TestSigningInboxFourEyes(t *testing.T) {
	dir := t.TempDir()
	ada, adaEntry := writeKey(t, dir, "ada")
	bob, bobEntry := writeKey(t, dir, "bob")
	tl, err := decisionsig.NewTrustList(adaEntry, bobEntry)
	require.NoError(t, err)
	l := setupLiveSigned(t, nil, tl, map[string]decisionsig.Signer{"ines": ada}, 2)
	key, episode, run := l.waitingApproval(t)
	cookie, tok := l.session("/", nil)
	res, body := l.req("POST", "/decide", url.Values{"tenant": {"acme"}, "key": {key}, "episode": {strconv.FormatInt(episode, 10)},
		"decision": {"approve"}, "reason": {"checked"}, "csrf": {tok}}, withCookie(cookie))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, "Accepted: approval recorded, waiting for another signer")
	require.Contains(t, body, "recorded; waiting for another signer (1 of 2)")
	require.NotContains(t, body, "continues")
	require.Zero(t, l.down.count(), "one signer's approval runs nothing")
	ap, err := l.store.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalPending, ap.Status)
	require.Len(t, ap.Cosignatures, 1)

	d, err := reconcile.SignDecision(bob, ap, reconcile.Decision{Decision: reconcile.Approve, Tenant: "acme", DecidedBy: "bob", Reason: "agreed"})
	require.NoError(t, err)
	out, err := reconcile.Decide(context.Background(), l.c, key, d)
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
	wait(t, run)
	require.Equal(t, 1, l.down.count())
}
