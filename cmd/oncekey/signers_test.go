package main

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// cosign records the approval of key's pending request signed by s for decider, as the worker
// does for a request whose policy asks for more signers (pending: a partial approval) or for its
// last signer (approved).
func cosign(t *testing.T, st oncekeystore.ApprovalStore, tenant, key, keyFile, decider string, status oncekeystore.ApprovalStatus) {
	t.Helper()
	ctx := context.Background()
	ap, err := st.GetApproval(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
	require.NoError(t, err)
	s, err := decisionsig.LoadSigner(keyFile)
	require.NoError(t, err)
	d, err := reconcile.SignDecision(s, ap, reconcile.Decision{Decision: reconcile.Approve, Tenant: tenant, DecidedBy: decider})
	require.NoError(t, err)
	p := &oncekeystore.DecideApprovalParams{Tenant: tenant, OperationKey: key, Episode: ap.Episode, Token: ap.Token,
		Status: status, Retention: time.Hour, Signature: d.Signature}
	if status != oncekeystore.ApprovalPending {
		p.DecidedBy = decider
	}
	_, err = st.DecideApproval(ctx, p)
	require.NoError(t, err)
}

// Four eyes, from the record alone: show and audit name each signer of an approval that asked
// for two, in the order they signed, with its decider, when and whether it verifies; after the
// first, "1 of 2: waiting for another signer"; after the second, "2 of 2 signers"; once the
// second signer's key is revoked, that signer does not verify and audit exits 1.
func TestShowAndAuditEverySigner(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url}
	dir := t.TempDir()
	adaKey, ada := genKey(t, dir, "ada")
	bobKey, bob := genKey(t, dir, "bob")
	trust := filepath.Join(dir, "trust.json")
	writeTrustFile(t, trust, "acme", ada, bob)
	adaID, bobID := regexp.QuoteMeta(ada["id"].(string)), regexp.QuoteMeta(bob["id"].(string))
	key := seedApproval(t, s, "acme", "IssueRefund", "wf-4e", "refund", "refund 120.00 EUR on order 42")

	cosign(t, s, "acme", key, adaKey, "ada", oncekeystore.ApprovalPending)
	r := cli(t, env, "show", key, "--tenant", "acme", "--trust", trust)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^approval signers\s+1 of 2: waiting for another signer$`, r.stdout)
	require.Regexp(t, `(?m)^approval signer 1\s+`+adaID+` \(ada\), verified; approved by ada at \S+Z$`, r.stdout)
	require.NotContains(t, r.stdout, "approval signer 2")
	r = cli(t, env, "show", key, "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^approval signer 1\s+`+adaID+`, not verified: give --trust FILE`, r.stdout, "without a trust list the key is named, unverified")

	cosign(t, s, "acme", key, bobKey, "bob", oncekeystore.ApprovalApproved)
	r = cli(t, env, "show", key, "--tenant", "acme", "--trust", trust)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^approval signers\s+2 of 2 signers$`, r.stdout)
	require.Regexp(t, `(?m)^approval signer 1\s+`+adaID+` \(ada\), verified; approved by ada at `, r.stdout)
	require.Regexp(t, `(?m)^approval signer 2\s+`+bobID+` \(bob\), verified; approved by bob at `, r.stdout)
	require.Regexp(t, `(?m)^approval signed by\s+`+bobID+` \(bob\), verified$`, r.stdout, "the decision's own line stays")

	r = cli(t, env, "show", key, "--tenant", "acme", "--trust", trust, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var sv struct {
		Approval *approvalView `json:"approval"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sv))
	require.NotNil(t, sv.Approval.Signers)
	require.Equal(t, "2 of 2 signers", sv.Approval.Signers.Text)
	require.Len(t, sv.Approval.Signers.Signers, 2)
	require.Equal(t, "ada", sv.Approval.Signers.Signers[0].DecidedBy)
	require.False(t, sv.Approval.Signers.Signers[0].Decision)
	require.Equal(t, "bob", sv.Approval.Signers.Signers[1].DecidedBy)
	require.True(t, sv.Approval.Signers.Signers[1].Decision)
	require.True(t, sv.Approval.Signers.Signers[1].Verified)
	require.False(t, sv.Approval.Signers.Signers[1].SignedAt.IsZero())

	r = cli(t, env, "audit", key, "--tenant", "acme", "--trust", trust)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "approval episode 1, signer 1: signed by "+ada["id"].(string)+" (ada), verified; approved by ada at ")
	require.Contains(t, r.stdout, "approval episode 1, signer 2: signed by "+bob["id"].(string)+" (bob), verified; approved by bob at ")
	require.Contains(t, r.stdout, "approval episode 1: 2 of 2 signers\n")

	bob["revoked"] = true
	writeTrustFile(t, trust, "acme", ada, bob)
	r = cli(t, env, "show", key, "--tenant", "acme", "--trust", trust)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^approval signers\s+2 of 2 signers; 1 verifies against the trust list now$`, r.stdout)
	require.Regexp(t, `(?m)^approval signer 1\s+`+adaID+` \(ada\), verified;`, r.stdout)
	require.Regexp(t, `(?m)^approval signer 2\s+`+bobID+` \(bob\), decisionsig: decision refused \(untrusted\), key \S+: the key is revoked; approved by bob at `, r.stdout)
	r = cli(t, env, "audit", key, "--tenant", "acme", "--trust", trust)
	require.Equal(t, exitFailed, r.code, r.stdout)
	require.Contains(t, r.stdout, "approval episode 1, signer 2: signed by "+bob["id"].(string)+" (bob), decisionsig: decision refused (untrusted)")
	require.Contains(t, r.stderr, "1 stored decision(s) of "+key+" are not signed by a trusted key as stored")
}

// The inbox over HTTP (oncekey serve --trust): the approval page of a four-eyes approval names
// both signers in the order they signed, "2 of 2 signers", and the signer whose key was revoked
// since as NOT verified.
func TestServeShowsEverySigner(t *testing.T) {
	needsServices(t)
	env := servicesEnv(t)
	url := env["DATABASE_URL"]
	s, _ := migratedAt(t, url)
	dir := t.TempDir()
	adaKey, ada := genKey(t, dir, "ada")
	bobKey, bob := genKey(t, dir, "bob")
	trust := filepath.Join(dir, "trust.json")
	writeTrustFile(t, trust, "acme", ada, bob)
	key := seedApproval(t, s, "acme", "IssueRefund", "wf-4e-serve", "refund", "refund 120.00 EUR on order 42")
	cosign(t, s, "acme", key, adaKey, "ada", oncekeystore.ApprovalPending)
	cosign(t, s, "acme", key, bobKey, "bob", oncekeystore.ApprovalApproved)
	bob["revoked"] = true
	writeTrustFile(t, trust, "acme", ada, bob)

	base := startServe(t, env, "--trust", trust)
	res, err := (&http.Client{Timeout: 30 * time.Second}).Get(base + "/approval?tenant=acme&key=" + key)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	body := html.UnescapeString(string(b))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, "<dt>Signers</dt><dd class=\"v\">2 of 2 signers; 1 verifies against the trust list now</dd>")
	require.Regexp(t, `<dt>Signer 1</dt><dd class="v">`+regexp.QuoteMeta(ada["id"].(string))+` \(ada\), verified; approved by ada at \S+Z</dd>`, body)
	require.Regexp(t, `<dt>Signer 2</dt><dd class="v">`+regexp.QuoteMeta(bob["id"].(string))+` \(bob\), NOT verified: [^<]*the key is revoked; approved by bob at \S+Z</dd>`, body)
}
