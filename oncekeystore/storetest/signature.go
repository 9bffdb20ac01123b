package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

// A signed statement as the stores keep it: opaque bytes, returned byte for byte (JSON with a
// NUL-free binary tail, as a signature's base64 never is, to catch a store that trims or
// re-encodes).
var signedStatement = []byte(`{"key_id":"ed25519:00","signature":"AAEC","statement":{"kind":"approve"}}` + "\xff\x00\x01")

// testApprovalSignatureKept: a decision's signed statement is stored with it, returned by
// DecideApproval, GetApproval and ListApprovals byte for byte, and cleared by a new episode; an
// unsigned decision keeps none.
func testApprovalSignatureKept(t *testing.T, s oncekeystore.ApprovalStore) {
	p := approvalParams()
	a := requestNew(t, s, p)
	require.Nil(t, a.Signature)
	d := decision(a, oncekeystore.ApprovalTimedOut)
	d.Signature = signedStatement
	got := do(t, s.DecideApproval, d)
	require.Equal(t, signedStatement, got.Signature)
	require.Equal(t, signedStatement, getApproval(t, s, p.Tenant, p.OperationKey).Signature)
	list := do(t, s.ListApprovals, &oncekeystore.ListApprovalsParams{Tenant: p.Tenant})
	for _, l := range list.Approvals {
		if l.OperationKey == p.OperationKey {
			require.Equal(t, signedStatement, l.Signature)
		}
	}

	next := requestNew(t, s, p)
	require.Equal(t, int64(2), next.Episode)
	require.Nil(t, next.Signature, "a new episode keeps no earlier decision's signature")
	require.Nil(t, decide(t, s, next, oncekeystore.ApprovalApproved).Signature)
	require.Nil(t, getApproval(t, s, p.Tenant, p.OperationKey).Signature)

	big := decision(requestNew(t, s, approvalParams()), oncekeystore.ApprovalApproved)
	big.Signature = make([]byte, oncekeystore.MaxSignatureBytes+1)
	_, err := s.DecideApproval(ctxT(t), big)
	var inv *oncekeystore.InvalidParamsError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "Signature", inv.Field)
}

// partial is a partial approval (status pending) of a with the signed statement sig.
func partial(a *oncekeystore.Approval, sig []byte) *oncekeystore.DecideApprovalParams {
	return &oncekeystore.DecideApprovalParams{Tenant: a.Tenant, OperationKey: a.OperationKey, Episode: a.Episode, Token: a.Token,
		Status: oncekeystore.ApprovalPending, Retention: time.Hour, Signature: sig}
}

// testApprovalPartialApprovals: a partial approval (DecideApproval with status pending) appends
// its signed statement to Cosignatures, byte for byte and in order, and leaves the approval
// pending and otherwise unchanged; it is fenced by episode and token as a decision is, refused
// without a signature or with a decision's fields, refused on a decided or overdue approval
// (ApprovalConflictError, nothing written); a decision keeps the cosignatures; a new episode
// clears them.
func testApprovalPartialApprovals(t *testing.T, s oncekeystore.ApprovalStore) {
	p := approvalParams()
	a := requestNew(t, s, p)
	require.Nil(t, a.Cosignatures)
	second := append([]byte("second "), signedStatement...)
	one := do(t, s.DecideApproval, partial(a, signedStatement))
	require.Equal(t, oncekeystore.ApprovalPending, one.Status)
	require.Equal(t, [][]byte{signedStatement}, one.Cosignatures)
	require.Nil(t, one.Signature)
	require.Empty(t, one.DecidedBy)
	require.True(t, one.DecidedAt.IsZero())
	two := do(t, s.DecideApproval, partial(a, second))
	require.Equal(t, [][]byte{signedStatement, second}, two.Cosignatures)
	got := getApproval(t, s, p.Tenant, p.OperationKey)
	require.Equal(t, oncekeystore.ApprovalPending, got.Status)
	require.Equal(t, [][]byte{signedStatement, second}, got.Cosignatures)
	list := do(t, s.ListApprovals, &oncekeystore.ListApprovalsParams{Tenant: p.Tenant})
	for _, l := range list.Approvals {
		if l.OperationKey == p.OperationKey {
			require.Equal(t, [][]byte{signedStatement, second}, l.Cosignatures)
		}
	}

	stale := partial(a, signedStatement)
	stale.Token = "w1_another"
	var staleErr *oncekeystore.StaleDecisionError
	require.ErrorAs(t, decideErr(t, s, stale), &staleErr)
	var inv *oncekeystore.InvalidParamsError
	require.ErrorAs(t, decideErr(t, s, partial(a, nil)), &inv)
	require.Equal(t, "Signature", inv.Field)
	withDecider := partial(a, signedStatement)
	withDecider.DecidedBy = "alice@example.com"
	require.ErrorAs(t, decideErr(t, s, withDecider), &inv)
	require.Len(t, getApproval(t, s, p.Tenant, p.OperationKey).Cosignatures, 2, "a refused partial approval writes nothing")

	d := decision(a, oncekeystore.ApprovalApproved)
	d.Signature = signedStatement
	decided := do(t, s.DecideApproval, d)
	require.Equal(t, oncekeystore.ApprovalApproved, decided.Status)
	require.Equal(t, [][]byte{signedStatement, second}, decided.Cosignatures, "a decision keeps the partial approvals")
	var conflict *oncekeystore.ApprovalConflictError
	require.ErrorAs(t, decideErr(t, s, partial(a, signedStatement)), &conflict)
	require.Equal(t, oncekeystore.ApprovalApproved, conflict.Approval.Status)
	require.Len(t, getApproval(t, s, p.Tenant, p.OperationKey).Cosignatures, 2)

	pt := approvalParams()
	first := requestNew(t, s, pt)
	do(t, s.DecideApproval, partial(first, signedStatement))
	require.Len(t, decide(t, s, first, oncekeystore.ApprovalTimedOut).Cosignatures, 1)
	next := requestNew(t, s, pt)
	require.Equal(t, int64(2), next.Episode)
	require.Nil(t, next.Cosignatures, "a new episode keeps no earlier partial approvals")

	po := approvalParams()
	asked, _ := requestOverdue(t, s, po)
	require.ErrorAs(t, decideErr(t, s, partial(asked, signedStatement)), &conflict)
	require.Equal(t, oncekeystore.ApprovalTimedOut, conflict.Approval.Status)
	require.Nil(t, getApproval(t, s, po.Tenant, po.OperationKey).Cosignatures, "nothing is written on an overdue approval")
}

// RunSignatures runs the signature subtests of the conformance suite against stores made by
// newStore (see RunApprovals for what newStore must do). Run calls it for a store that
// implements oncekeystore.SignatureStore.
func RunSignatures(t *testing.T, newStore func(t *testing.T) oncekeystore.Store) {
	t.Helper()
	t.Run("ResolutionSignatureKept", func(t *testing.T) {
		t.Parallel()
		testResolutionSignature(t, newStore(t))
	})
}

// runSignaturesIfImplemented runs RunSignatures under the subtest "Signature" when the stores
// newStore makes implement oncekeystore.SignatureStore, and skips it (saying so) otherwise.
func runSignaturesIfImplemented(t *testing.T, newStore func(t *testing.T) oncekeystore.Store) {
	t.Run("Signature", func(t *testing.T) {
		t.Parallel()
		if _, ok := newStore(t).(oncekeystore.SignatureStore); !ok {
			t.Skip("the store does not implement oncekeystore.SignatureStore: no signature subtests")
		}
		RunSignatures(t, newStore)
	})
}

// testResolutionSignature: a signed resolution's statement is kept for its epoch, byte for byte;
// an unsigned one, a record settled otherwise and a record at a later epoch answer none; no
// record is ErrNotFound.
func testResolutionSignature(t *testing.T, s oncekeystore.Store) {
	ss := s.(oncekeystore.SignatureStore)
	ctx := ctxT(t)
	sigOf := func(p *oncekeystore.ClaimParams) []byte {
		t.Helper()
		b, err := ss.ResolutionSignature(ctx, &oncekeystore.GetParams{Tenant: p.Tenant, OperationKey: p.OperationKey})
		require.NoError(t, err)
		return b
	}

	p, m := unknownRecord(t, s)
	require.Nil(t, sigOf(p), "unknown: nothing resolved it")
	_, err := s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: m.Epoch,
		Status: oncekeystore.StatusReleased, ResolvedBy: "alice", Signature: signedStatement})
	require.NoError(t, err)
	require.Equal(t, signedStatement, sigOf(p))
	// The next claim takes the released record over: the signature was of the epoch before.
	res := claim(t, s, p)
	require.True(t, res.Acquired)
	require.Nil(t, sigOf(p), "a later epoch keeps no earlier resolution's signature")
	do(t, s.MarkUnknown, &oncekeystore.MarkUnknownParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: res.Record.Epoch})
	_, err = s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: res.Record.Epoch,
		Status: oncekeystore.StatusFailed, ResolvedBy: "bob"})
	require.NoError(t, err)
	require.Nil(t, sigOf(p), "an unsigned resolution")

	q := params(oncekeystore.Effectful)
	r := acquire(t, s, q)
	do(t, s.Complete, &oncekeystore.CompleteParams{Tenant: q.Tenant, OperationKey: q.OperationKey, Epoch: r.Epoch, Status: oncekeystore.StatusApplied})
	require.Nil(t, sigOf(q), "settled by its worker")

	_, err = ss.ResolutionSignature(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: newKey()})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)

	big, bm := unknownRecord(t, s)
	_, err = s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: big.Tenant, OperationKey: big.OperationKey, Epoch: bm.Epoch,
		Status: oncekeystore.StatusReleased, Signature: make([]byte, oncekeystore.MaxSignatureBytes+1)})
	var inv *oncekeystore.InvalidParamsError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "Signature", inv.Field)
}

// testGrantSignatureKept: a grant's signed statement is stored with it and returned by
// CreateGrant, GetGrant and ListGrants byte for byte; an unsigned grant keeps none.
func testGrantSignatureKept(t *testing.T, s GrantApprovalStore) {
	ctx := ctxT(t)
	p := grantParams(t)
	p.Signature = signedStatement
	g, err := s.CreateGrant(ctx, p)
	require.NoError(t, err)
	require.Equal(t, signedStatement, g.Signature)
	got, err := s.GetGrant(ctx, g.ID)
	require.NoError(t, err)
	require.Equal(t, signedStatement, got.Signature)
	list, err := s.ListGrants(ctx, &oncekeystore.ListGrantsParams{Namespace: p.Namespace, Tenant: p.Tenant, Tool: p.Tool, Status: oncekeystore.GrantActive})
	require.NoError(t, err)
	require.Len(t, list.Grants, 1)
	require.Equal(t, signedStatement, list.Grants[0].Signature)

	unsigned, err := s.CreateGrant(ctx, grantParams(t))
	require.NoError(t, err)
	require.Nil(t, unsigned.Signature)

	big := grantParams(t)
	big.Signature = make([]byte, oncekeystore.MaxSignatureBytes+1)
	_, err = s.CreateGrant(ctx, big)
	var inv *oncekeystore.InvalidParamsError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "Signature", inv.Field)
}

// testGrantRevocationSignatureKept: the signed statement of a grant's revocation is stored with
// it and returned by RevokeGrant, GetGrant and ListGrants byte for byte; a grant not revoked, or
// revoked unsigned, keeps none; a second revoke changes nothing, its signature included.
func testGrantRevocationSignatureKept(t *testing.T, s GrantApprovalStore) {
	ctx := ctxT(t)
	p := grantParams(t)
	g, err := s.CreateGrant(ctx, p)
	require.NoError(t, err)
	require.Nil(t, g.RevocationSignature, "an active grant")
	g, err = s.RevokeGrant(ctx, &oncekeystore.RevokeGrantParams{ID: g.ID, RevokedBy: "grace", Signature: signedStatement})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.GrantRevoked, g.Status)
	require.Equal(t, signedStatement, g.RevocationSignature)
	got, err := s.GetGrant(ctx, g.ID)
	require.NoError(t, err)
	require.Equal(t, signedStatement, got.RevocationSignature)
	list, err := s.ListGrants(ctx, &oncekeystore.ListGrantsParams{Namespace: p.Namespace, Tenant: p.Tenant, Tool: p.Tool, Status: oncekeystore.GrantRevoked})
	require.NoError(t, err)
	require.Len(t, list.Grants, 1)
	require.Equal(t, signedStatement, list.Grants[0].RevocationSignature)

	again, err := s.RevokeGrant(ctx, &oncekeystore.RevokeGrantParams{ID: g.ID, RevokedBy: "mallory", Signature: []byte(`{"other":1}`)})
	require.NoError(t, err)
	require.Equal(t, "grace", again.RevokedBy, "a revoked grant is returned as it is")
	require.Equal(t, signedStatement, again.RevocationSignature)

	unsigned, err := s.CreateGrant(ctx, grantParams(t))
	require.NoError(t, err)
	unsigned, err = s.RevokeGrant(ctx, &oncekeystore.RevokeGrantParams{ID: unsigned.ID, RevokedBy: "grace"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.GrantRevoked, unsigned.Status)
	require.Nil(t, unsigned.RevocationSignature)

	big, err := s.CreateGrant(ctx, grantParams(t))
	require.NoError(t, err)
	_, err = s.RevokeGrant(ctx, &oncekeystore.RevokeGrantParams{ID: big.ID, RevokedBy: "grace", Signature: make([]byte, oncekeystore.MaxSignatureBytes+1)})
	var inv *oncekeystore.InvalidParamsError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "Signature", inv.Field)
}
