package systemtest_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// Signed decisions on a dev server and Postgres, as an attacker with write access to the
// namespace and no trusted key: every decision they can send authorises nothing and records
// nothing, and the downstream sees no effect; the same flows signed by a trusted key work.

// signer is a fresh ed25519 key a person holds.
func newSigner(t *testing.T) *decisionsig.Ed25519Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	s, err := decisionsig.NewEd25519Signer(priv)
	require.NoError(t, err)
	return s
}

// trustEntry is one key of a trust list file.
type trustEntry struct {
	s       *decisionsig.Ed25519Signer
	tenants []string
	revoked bool
}

// writeTrust (re)writes the trust list file at path, renaming a new file over it as an operator
// would, every key trusted for every tool and kind, for its tenants ("default" when none).
func writeTrust(t *testing.T, path string, entries ...trustEntry) {
	t.Helper()
	var keys []map[string]any
	for _, e := range entries {
		tenants := e.tenants
		if tenants == nil {
			tenants = []string{"default"}
		}
		keys = append(keys, map[string]any{"public_key": base64.StdEncoding.EncodeToString(e.s.Public()), "tenants": tenants,
			"tools": []string{"*"}, "kinds": []decisionsig.Kind{decisionsig.Approve, decisionsig.ApproveEdited, decisionsig.Deny,
				decisionsig.RequestChanges, decisionsig.Resolve, decisionsig.GrantCreate}, "revoked": e.revoked})
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".new", b, 0o600))
	require.NoError(t, os.Rename(path+".new", path))
}

// setupSigned is setupE2E with a trust list read from a file of entries, whose path it returns.
func setupSigned(t *testing.T, l *ledger, p oncekey.Policy, entries ...trustEntry) (*e2e, string, *decisionsig.TrustList) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trust.json")
	writeTrust(t, path, entries...)
	tl, err := decisionsig.LoadTrustList(path)
	require.NoError(t, err)
	e := setupE2EWith(t, l, p, func(o *worker.Options) { o.TrustList = tl })
	return e, path, tl
}

// pendingOf waits until the approval of workflow id's call is pending and its approval workflow
// waits for a decision, and returns it.
func (e *e2e) pendingOf(t *testing.T, id string) *oncekeystore.Approval {
	t.Helper()
	var a *oncekeystore.Approval
	require.Eventually(t, func() bool {
		res, err := e.approvals(t).ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending, WorkflowID: id})
		if err != nil || len(res.Approvals) != 1 {
			return false
		}
		a = res.Approvals[0]
		rep, err := reconcile.QueryApproval(context.Background(), e.c, a.OperationKey)
		return err == nil && rep.State == reconcile.ApprovalStateWaiting
	}, 30*time.Second, 100*time.Millisecond, "no approval of %s came to wait for a person", id)
	return a
}

// decideSigned signs d for a with s and sends it.
func (e *e2e) decideSigned(t *testing.T, s decisionsig.Signer, a *oncekeystore.Approval, d reconcile.Decision) (*reconcile.ApprovalOutput, error) {
	t.Helper()
	signed, err := reconcile.SignDecision(s, a, d)
	require.NoError(t, err)
	return reconcile.Decide(context.Background(), e.c, a.OperationKey, signed)
}

// requireRefused checks that err is the approval workflow refusing a decision for reason (the
// decisionsig reason), and that the approval is still pending.
func (e *e2e) requireRefused(t *testing.T, err error, a *oncekeystore.Approval, reason decisionsig.Reason) {
	t.Helper()
	var refused *reconcile.DecisionRefusedError
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, "decision refused ("+string(reason)+")")
	require.True(t, refused.Signature, "refused for its signature (oncekey.SignatureRefused), as the update's refusal says")
	require.ErrorIs(t, err, decisionsig.ErrRefused)
	require.Equal(t, oncekeystore.ApprovalPending, e.approval(t, a.OperationKey).Status, "a refused decision records nothing")
}

// An attacker's unsigned update and signal, and a trusted signature on a changed decision, are
// refused and run nothing; the same approval signed by a trusted key runs the call once, and the
// stored decision re-verifies from the record alone.
func TestE2ESignedApprovalOnlyByTrustedKey(t *testing.T) {
	l := newLedger()
	ada := newSigner(t)
	e, _, tl := setupSigned(t, l, approvalPolicy(0), trustEntry{s: ada})
	run := e.start(t, "signed-approve", req, 10*time.Second)
	a := e.pendingApproval(t)
	ctx := context.Background()

	// The forged update: no signature.
	_, err := reconcile.Decide(ctx, e.c, a.OperationKey, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada"})
	e.requireRefused(t, err, a, decisionsig.ReasonUnsigned)
	// The forged signal.
	require.NoError(t, e.c.SignalWorkflow(ctx, reconcile.ApprovalWorkflowID(a.OperationKey), "", reconcile.DecideSignalName,
		reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada", RequestID: "forged-signal"}))
	require.Eventually(t, func() bool {
		rep, err := reconcile.QueryApproval(ctx, e.c, a.OperationKey)
		return err == nil && rep.LastInvalidRequestID == "forged-signal" && strings.Contains(rep.LastInvalidSignal, "decision refused (unsigned)")
	}, 30*time.Second, 100*time.Millisecond)
	// A trusted key's signature on another decision than the one sent.
	signed, err := reconcile.SignDecision(ada, a, reconcile.Decision{Decision: reconcile.Deny, Tenant: "default", DecidedBy: "ada", Reason: "no"})
	require.NoError(t, err)
	signed.Decision = reconcile.Approve
	_, err = reconcile.Decide(ctx, e.c, a.OperationKey, signed)
	e.requireRefused(t, err, a, decisionsig.ReasonMismatch)
	// Signed by a key the list does not hold.
	_, err = e.decideSigned(t, newSigner(t), a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada"})
	e.requireRefused(t, err, a, decisionsig.ReasonUntrusted)
	requireRuns(t, l, 0, 0)

	out, err := e.decideSigned(t, ada, a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada", Reason: "checked"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	requireRuns(t, l, 1, 1)

	// The audit: the record alone re-verifies, signed by ada's key.
	stored := e.approval(t, a.OperationKey)
	s, err := decisionsig.Decode(stored.Signature)
	require.NoError(t, err)
	entry, err := tl.Audit(s)
	require.NoError(t, err)
	require.Equal(t, ada.KeyID(), entry.ID)
	want, err := reconcile.ApprovalStatement(stored, "")
	require.NoError(t, err)
	require.NoError(t, decisionsig.Mismatch(s, want))
}

// A trusted key's valid signature on one request, sent with a decision on another, authorises
// nothing: the statement names the key, episode and request token it was made for.
func TestE2ESignedApprovalReplayedOntoAnotherRequest(t *testing.T) {
	l := newLedger()
	ada := newSigner(t)
	e, _, _ := setupSigned(t, l, approvalPolicy(0), trustEntry{s: ada})
	first := e.start(t, "signed-replay-1", req, 10*time.Second)
	a1 := e.pendingOf(t, "signed-replay-1")
	second := e.start(t, "signed-replay-2", req, 10*time.Second)
	a2 := e.pendingOf(t, "signed-replay-2")
	require.NotEqual(t, a1.OperationKey, a2.OperationKey)

	approve := reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada"}
	signedFor1, err := reconcile.SignDecision(ada, a1, approve)
	require.NoError(t, err)
	_, err = reconcile.Decide(context.Background(), e.c, a2.OperationKey, signedFor1)
	e.requireRefused(t, err, a2, decisionsig.ReasonMismatch)
	requireRuns(t, l, 0, 0)

	// Each request, decided with its own signature, takes it.
	_, err = e.decideSigned(t, ada, a2, reconcile.Decision{Decision: reconcile.Deny, Tenant: "default", DecidedBy: "ada", Reason: "not this one"})
	require.NoError(t, err)
	require.Error(t, second.Get(testCtx(t), nil))
	_, err = reconcile.Decide(context.Background(), e.c, a1.OperationKey, signedFor1)
	require.NoError(t, err)
	require.NoError(t, first.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
}

// A key trusted for tenant acme cannot decide a call of tenant default.
func TestE2ESignedApprovalKeyOfAnotherTenant(t *testing.T) {
	l := newLedger()
	acmeKey, ada := newSigner(t), newSigner(t)
	e, _, _ := setupSigned(t, l, approvalPolicy(0), trustEntry{s: acmeKey, tenants: []string{"acme"}}, trustEntry{s: ada})
	run := e.start(t, "signed-tenant", req, 10*time.Second)
	a := e.pendingApproval(t)
	require.Equal(t, "default", a.Tenant)
	_, err := e.decideSigned(t, acmeKey, a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "acme-admin"})
	e.requireRefused(t, err, a, decisionsig.ReasonUntrusted)
	requireRuns(t, l, 0, 0)

	_, err = e.decideSigned(t, ada, a, reconcile.Decision{Decision: reconcile.Deny, Tenant: "default", DecidedBy: "ada", Reason: "no"})
	require.NoError(t, err)
	require.Error(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 0, 0)
}

// A key revoked in the trust list file stops deciding at once, with no restart: the workers
// re-read the file.
func TestE2ESignedApprovalRevokedKeyStopsWithoutRestart(t *testing.T) {
	l := newLedger()
	ada, bob := newSigner(t), newSigner(t)
	e, path, _ := setupSigned(t, l, approvalPolicy(0), trustEntry{s: ada}, trustEntry{s: bob})
	first := e.start(t, "signed-revoke-1", req, 10*time.Second)
	a1 := e.pendingOf(t, "signed-revoke-1")
	_, err := e.decideSigned(t, ada, a1, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada"})
	require.NoError(t, err)
	require.NoError(t, first.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)

	writeTrust(t, path, trustEntry{s: ada, revoked: true}, trustEntry{s: bob})
	second := e.start(t, "signed-revoke-2", req, 10*time.Second)
	a2 := e.pendingOf(t, "signed-revoke-2")
	_, err = e.decideSigned(t, ada, a2, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada"})
	e.requireRefused(t, err, a2, decisionsig.ReasonUntrusted)
	require.ErrorContains(t, err, "revoked")
	requireRuns(t, l, 1, 1)

	_, err = e.decideSigned(t, bob, a2, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "bob"})
	require.NoError(t, err)
	require.NoError(t, second.Get(testCtx(t), nil))
	requireRuns(t, l, 2, 2)
}

// An approval in the store that no trusted signature backs (written by a worker without the
// trust list, or by hand) or whose key was revoked since authorises nothing at the gate: the
// approval workflow finds it decided and releases the call, which the worker refuses.
func TestE2ESignedApprovalGateReverifiesTheStoredSignature(t *testing.T) {
	for _, c := range []struct {
		name   string
		signer func(ada *decisionsig.Ed25519Signer) decisionsig.Signer
		reason string
	}{
		{"unsigned", func(*decisionsig.Ed25519Signer) decisionsig.Signer { return nil }, "unsigned"},
		{"revoked since", func(ada *decisionsig.Ed25519Signer) decisionsig.Signer { return ada }, "untrusted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLedger()
			ada, bob := newSigner(t), newSigner(t)
			e, path, _ := setupSigned(t, l, approvalPolicy(0), trustEntry{s: ada}, trustEntry{s: bob})
			id := "signed-gate-" + strings.ReplaceAll(c.name, " ", "-")
			run := e.start(t, id, req, 10*time.Second)
			a := e.pendingOf(t, id)
			p := &oncekeystore.DecideApprovalParams{Tenant: a.Tenant, OperationKey: a.OperationKey, Episode: a.Episode, Token: a.Token,
				Status: oncekeystore.ApprovalApproved, DecidedBy: "ada", Retention: time.Hour}
			if s := c.signer(ada); s != nil {
				d, err := reconcile.SignDecision(s, a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "ada"})
				require.NoError(t, err)
				p.Signature = d.Signature
				writeTrust(t, path, trustEntry{s: ada, revoked: true}, trustEntry{s: bob})
			}
			_, err := e.approvals(t).DecideApproval(context.Background(), p)
			require.NoError(t, err)
			// Bob's signed decision finds the approval decided, and the workflow releases the call.
			out, err := e.decideSigned(t, bob, a, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default", DecidedBy: "bob"})
			if err == nil {
				require.Equal(t, "ada", out.DecidedBy)
			}
			err = run.Get(testCtx(t), nil)
			require.Error(t, err)
			require.Contains(t, detail(err), fmt.Sprintf("is not signed by a key the worker trusts for it (%s)", c.reason))
			requireRuns(t, l, 0, 0)
		})
	}
}

// An unknown outcome: an unsigned resolution, and one signed by an untrusted key, are refused
// and settle nothing; one signed by a trusted key settles it, and its statement is kept with
// the record.
func TestE2ESignedResolution(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	ada := newSigner(t)
	e, _, tl := setupSigned(t, l, oncekey.Policy{Effect: oncekey.Effectful}, trustEntry{s: ada})
	run := e.start(t, "signed-resolve", req, 10*time.Second)
	key := e.waitingKey(t)
	ctx := context.Background()
	rec, err := e.store.Get(ctx, &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, err := json.Marshal(landed)
	require.NoError(t, err)
	r := reconcile.Resolution{Epoch: rec.Epoch, Outcome: reconcile.Applied, Result: body, EffectReference: landed.ID, ResolvedBy: "ada"}

	var refused *reconcile.RefusedError
	_, err = reconcile.ResolveOutput(ctx, e.c, "default", key, r)
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, "decision refused (unsigned)")
	forged, err := reconcile.SignResolution(newSigner(t), rec, r)
	require.NoError(t, err)
	_, err = reconcile.ResolveOutput(ctx, e.c, "default", key, forged)
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, "decision refused (untrusted)")
	otherResult, err := reconcile.SignResolution(ada, rec, r)
	require.NoError(t, err)
	otherResult.Outcome, otherResult.Result = reconcile.NotApplied, nil
	_, err = reconcile.ResolveOutput(ctx, e.c, "default", key, otherResult)
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, "decision refused (mismatch)")
	rec, err = e.store.Get(ctx, &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status, "refused resolutions settle nothing")

	signed, err := reconcile.SignResolution(ada, rec, r)
	require.NoError(t, err)
	out, err := reconcile.ResolveOutput(ctx, e.c, "default", key, signed)
	require.NoError(t, err)
	require.Equal(t, reconcile.Applied, out.Outcome)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	requireRuns(t, l, 1, 1)

	b, err := e.store.(oncekeystore.SignatureStore).ResolutionSignature(ctx, &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	s, err := decisionsig.Decode(b)
	require.NoError(t, err)
	entry, err := tl.Audit(s)
	require.NoError(t, err)
	require.Equal(t, ada.KeyID(), entry.ID)
}

// Standing grants under a trust list: one made unsigned (by anyone who can write the store's
// grants, or a namespace writer's forged grant) covers nothing and the call waits for a person;
// one signed by a trusted key approves the call at once; once that key is revoked, the grant
// covers no new call.
func TestE2ESignedGrant(t *testing.T) {
	l := newLedger()
	ada := newSigner(t)
	e, path, _ := setupSigned(t, l, approvalPolicy(0), trustEntry{s: ada})
	gs, ok := e.store.(oncekeystore.GrantStore)
	require.True(t, ok)
	ctx := context.Background()
	p := oncekeystore.CreateGrantParams{Namespace: "default", Tenant: "default", Tool: "CreateTicket", CreatedBy: "mallory", Reason: "forged", Duration: time.Hour}
	_, err := gs.CreateGrant(ctx, &p)
	require.NoError(t, err)
	run := e.start(t, "signed-grant-unsigned", req, 10*time.Second)
	a := e.pendingOf(t, "signed-grant-unsigned")
	require.Empty(t, a.GrantID)
	requireRuns(t, l, 0, 0)
	_, err = e.decideSigned(t, ada, a, reconcile.Decision{Decision: reconcile.Deny, Tenant: "default", DecidedBy: "ada", Reason: "no"})
	require.NoError(t, err)
	require.Error(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 0, 0)

	p.CreatedBy, p.Reason = "ada", "signed"
	signed, err := reconcile.SignGrant(ada, p)
	require.NoError(t, err)
	g, err := gs.CreateGrant(ctx, &signed)
	require.NoError(t, err)
	require.NoError(t, e.start(t, "signed-grant-1", req, 10*time.Second).Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
	ap := e.approval(t, e.onlyApprovalOf(t, "signed-grant-1").OperationKey)
	require.Equal(t, g.ID, ap.GrantID, "the signed grant approved the call")

	writeTrust(t, path, trustEntry{s: ada, revoked: true})
	run = e.start(t, "signed-grant-2", req, 10*time.Second)
	a = e.pendingOf(t, "signed-grant-2")
	require.Empty(t, a.GrantID, "a grant by a revoked key covers nothing")
	requireRuns(t, l, 1, 1)
	require.NoError(t, e.c.TerminateWorkflow(ctx, reconcile.ApprovalWorkflowID(a.OperationKey), "", "test over"))
	require.Error(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
}

// onlyApprovalOf returns the one approval of workflow id's calls.
func (e *e2e) onlyApprovalOf(t *testing.T, id string) *oncekeystore.Approval {
	t.Helper()
	res, err := e.approvals(t).ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{Status: "", WorkflowID: id})
	require.NoError(t, err)
	require.Len(t, res.Approvals, 1)
	return res.Approvals[0]
}

// Approved with edited arguments under a trust list: signed over other arguments than the ones
// sent it is refused; signed over these it replaces the call, and the edit runs once, the gate
// having verified the original's signed approve_edited statement.
func TestE2ESignedApprovalWithEditedArguments(t *testing.T) {
	l := newLedger()
	ada := newSigner(t)
	e, _, tl := setupSigned(t, l, approvalPolicy(0), trustEntry{s: ada})
	run := e.startAgent(t, "signed-edit", 1)
	a := e.pendingApproval(t)
	const args = `{"customer":"acme","subject":"printer smoking","request_id":"r-1"}`

	d := editDecision(args)
	signed, err := reconcile.SignDecision(ada, a, d)
	require.NoError(t, err)
	swapped := signed
	swapped.Arguments = json.RawMessage(`{"customer":"acme","subject":"refund everyone","request_id":"r-1"}`)
	_, err = reconcile.Decide(context.Background(), e.c, a.OperationKey, swapped)
	e.requireRefused(t, err, a, decisionsig.ReasonMismatch)
	requireRuns(t, l, 0, 0)

	out, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, signed)
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalReplaced, out.Status)
	var got []oncekey.ToolResult
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, oncekey.OutcomeApplied, got[0].Status, got[0].Text)
	requireRuns(t, l, 1, 1)
	require.Equal(t, "printer smoking", onlyTicket(t, l).Subject)

	orig := e.approval(t, a.OperationKey)
	s, err := decisionsig.Decode(orig.Signature)
	require.NoError(t, err)
	require.Equal(t, decisionsig.ApproveEdited, s.Statement.Kind)
	_, err = tl.Audit(s)
	require.NoError(t, err)
	want, err := reconcile.ApprovalStatement(orig, s.Statement.ArgumentsDigest)
	require.NoError(t, err)
	require.NoError(t, decisionsig.Mismatch(s, want))
}
