package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

// GrantApprovalStore is a store that keeps approvals and standing grants beside them.
type GrantApprovalStore interface {
	oncekeystore.ApprovalStore
	oncekeystore.GrantStore
}

// grantTests are the subtests of RunGrants.
var grantTests = []struct {
	name string
	fn   func(t *testing.T, s GrantApprovalStore)
}{
	{"CreateGetList", testGrantCreate},
	{"RevokeOnce", testGrantRevoke},
	{"Expires", testGrantExpires},
	{"ApproveByGrant", testGrantApprove},
	{"ApproveRefusedOutsideGrant", testGrantApproveRefused},
	{"ApproveFencedAsDecide", testGrantApproveFenced},
	{"SupersedeAsksAnew", testGrantSupersede},
	{"RevokeRacingApprove", testGrantRevokeRace},
	{"InvalidParams", testGrantInvalid},
	{"ListPagesAndEnded", testGrantListPages},
	{"ForgetEndsGrants", testGrantForget},
	{"PurgeEndedGrants", testGrantPurge},
	{"SignatureKept", testGrantSignatureKept},
	{"RevocationSignatureKept", testGrantRevocationSignatureKept},
}

// RunGrants runs the grant subtests of the conformance suite against stores made by newStore,
// which is called once per subtest and must return an empty store cleaned up with t.Cleanup.
// Run calls it for a store that implements oncekeystore.ApprovalStore and oncekeystore.GrantStore.
func RunGrants(t *testing.T, newStore func(t *testing.T) GrantApprovalStore) {
	t.Helper()
	for _, tc := range grantTests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// runGrantsIfImplemented runs RunGrants under the subtest "Grant" when the stores newStore makes
// keep grants, and skips it (saying so) otherwise.
func runGrantsIfImplemented(t *testing.T, newStore func(t *testing.T) oncekeystore.Store) {
	t.Run("Grant", func(t *testing.T) {
		t.Parallel()
		if _, ok := newStore(t).(GrantApprovalStore); !ok {
			t.Skip("the store does not implement oncekeystore.ApprovalStore and oncekeystore.GrantStore: no grant subtests")
		}
		RunGrants(t, func(t *testing.T) GrantApprovalStore { return newStore(t).(GrantApprovalStore) })
	})
}

// grantParams returns the params of a grant covering approvalParams' calls, for an hour; the
// tenant is unique to the test, so listings see only its grants.
func grantParams(t *testing.T) *oncekeystore.CreateGrantParams {
	return &oncekeystore.CreateGrantParams{Namespace: "ns-a", Tenant: "acme-" + newKey()[4:20], Tool: "refund",
		Rule: "amount <= 100", CreatedBy: "ada", Reason: "small refunds", Duration: time.Hour}
}

// grantedRequest asks, with a worker's token, for approval of a call g covers and returns the
// pending episode.
func grantedRequest(t *testing.T, s GrantApprovalStore, g *oncekeystore.Grant) (*oncekeystore.RequestApprovalParams, *oncekeystore.Approval) {
	p := approvalParams()
	p.Tenant, p.Token = g.Tenant, "w1_"+newKey()[4:20]
	return p, requestNew(t, s, p)
}

func approveBy(a *oncekeystore.Approval, g *oncekeystore.Grant) *oncekeystore.ApproveByGrantParams {
	return &oncekeystore.ApproveByGrantParams{Tenant: a.Tenant, OperationKey: a.OperationKey, Episode: a.Episode, Token: a.Token,
		GrantID: g.ID, WorkflowID: a.WorkflowID, Retention: time.Hour}
}

func testGrantCreate(t *testing.T, s GrantApprovalStore) {
	p := grantParams(t)
	g := do(t, s.CreateGrant, p)
	require.Regexp(t, `^g1_[0-9a-f]{32}$`, g.ID)
	require.Equal(t, oncekeystore.GrantActive, g.Status)
	require.Equal(t, p.Duration, g.ExpiresAt.Sub(g.CreatedAt), "it lasts Duration from its creation, on the store's clock")
	require.True(t, g.RevokedAt.IsZero())
	want := oncekeystore.Grant{ID: g.ID, Namespace: p.Namespace, Tenant: p.Tenant, Tool: p.Tool, Rule: p.Rule, CreatedBy: p.CreatedBy,
		Reason: p.Reason, CreatedAt: g.CreatedAt, ExpiresAt: g.ExpiresAt, Status: oncekeystore.GrantActive}
	requireSameFields(t, &want, g)
	requireSameFields(t, g, do(t, s.GetGrant, g.ID))

	q := *p
	q.Tool, q.WorkflowID, q.Rule = "delete_file", "wf-9", ""
	other := do(t, s.CreateGrant, &q)
	require.Equal(t, "wf-9", other.WorkflowID)

	require.Equal(t, []string{g.ID, other.ID}, grantIDs(listGrants(t, s, oncekeystore.ListGrantsParams{Tenant: p.Tenant})))
	require.Equal(t, []string{other.ID}, grantIDs(listGrants(t, s, oncekeystore.ListGrantsParams{Tenant: p.Tenant, Tool: "delete_file"})))
	require.Empty(t, listGrants(t, s, oncekeystore.ListGrantsParams{Tenant: p.Tenant, Namespace: "ns-b"}))
	first := do(t, s.ListGrants, &oncekeystore.ListGrantsParams{Tenant: p.Tenant, Limit: 1})
	require.Equal(t, []string{g.ID}, grantIDs(first.Grants))
	require.NotEmpty(t, first.Next)
	require.Empty(t, listGrants(t, s, oncekeystore.ListGrantsParams{Tenant: p.Tenant, Status: oncekeystore.GrantRevoked}))

	_, err := s.GetGrant(ctxT(t), oncekeystore.NewGrantID())
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
}

func testGrantRevoke(t *testing.T, s GrantApprovalStore) {
	g := do(t, s.CreateGrant, grantParams(t))
	r := do(t, s.RevokeGrant, &oncekeystore.RevokeGrantParams{ID: g.ID, RevokedBy: "grace"})
	require.Equal(t, oncekeystore.GrantRevoked, r.Status)
	require.Equal(t, "grace", r.RevokedBy)
	require.False(t, r.RevokedAt.Before(g.CreatedAt))
	again := do(t, s.RevokeGrant, &oncekeystore.RevokeGrantParams{ID: g.ID, RevokedBy: "someone else"})
	requireSameFields(t, r, again)
	requireSameFields(t, r, do(t, s.GetGrant, g.ID))
	got := listGrants(t, s, oncekeystore.ListGrantsParams{Tenant: g.Tenant, Status: oncekeystore.GrantRevoked})
	require.Len(t, got, 1)
	require.Empty(t, listGrants(t, s, oncekeystore.ListGrantsParams{Tenant: g.Tenant, Status: oncekeystore.GrantActive}))
	require.Empty(t, listGrants(t, s, oncekeystore.ListGrantsParams{Namespace: g.Namespace, Tenant: g.Tenant, Tool: g.Tool, Status: oncekeystore.GrantActive}),
		"the worker's lookup of the scope no longer finds it")

	_, err := s.RevokeGrant(ctxT(t), &oncekeystore.RevokeGrantParams{ID: oncekeystore.NewGrantID(), RevokedBy: "grace"})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
}

func testGrantExpires(t *testing.T, s GrantApprovalStore) {
	p := grantParams(t)
	p.Duration = shortLease
	g := do(t, s.CreateGrant, p)
	require.Eventually(t, func() bool { return do(t, s.GetGrant, g.ID).Status == oncekeystore.GrantExpired }, waitFor, pollEvery)
	r := do(t, s.RevokeGrant, &oncekeystore.RevokeGrantParams{ID: g.ID, RevokedBy: "grace"})
	require.Equal(t, oncekeystore.GrantExpired, r.Status, "an expired grant is returned unchanged")
	require.True(t, r.RevokedAt.IsZero())

	_, a := grantedRequest(t, s, g)
	_, err := s.ApproveByGrant(ctxT(t), approveBy(a, g))
	var na *oncekeystore.GrantNotActiveError
	require.ErrorAs(t, err, &na)
	require.Equal(t, "expired", na.Reason)
	requireSameApproval(t, a, getApproval(t, s, a.Tenant, a.OperationKey))
}

func testGrantApprove(t *testing.T, s GrantApprovalStore) {
	g := do(t, s.CreateGrant, grantParams(t))
	_, a := grantedRequest(t, s, g)
	got := do(t, s.ApproveByGrant, approveBy(a, g))
	want := oncekeystore.GrantApproval(*a, g, got.DecidedAt, time.Hour)
	requireSameApproval(t, &want, got)
	require.Equal(t, g.ID, got.GrantID)
	require.Equal(t, "ada", got.DecidedBy, "decided by who made the grant")
	require.Equal(t, oncekeystore.GrantReason(g.ID), got.Reason)
	require.Equal(t, time.Hour, got.ExpiresAt.Sub(got.DecidedAt))
	requireSameApproval(t, got, getApproval(t, s, a.Tenant, a.OperationKey))
	listed := listAllApprovals(t, s, oncekeystore.ListApprovalsParams{Tenant: a.Tenant})
	require.Len(t, listed, 1)
	require.Equal(t, g.ID, listed[0].GrantID)

	// A decision after it conflicts, as after a person's.
	_, err := s.DecideApproval(ctxT(t), decision(a, oncekeystore.ApprovalDenied))
	requireApprovalConflict(t, err)
}

func testGrantApproveRefused(t *testing.T, s GrantApprovalStore) {
	base := grantParams(t)
	for _, tc := range []struct {
		name   string
		change func(p *oncekeystore.CreateGrantParams)
		reason string
	}{
		{"another tool", func(p *oncekeystore.CreateGrantParams) { p.Tool = "delete_file" }, "another scope"},
		{"another namespace", func(p *oncekeystore.CreateGrantParams) { p.Namespace = "ns-b" }, "another scope"},
		{"another tenant", func(p *oncekeystore.CreateGrantParams) { p.Tenant += "-other" }, "another scope"},
		{"another workflow", func(p *oncekeystore.CreateGrantParams) { p.WorkflowID = "wf-2" }, "another scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := *base
			tc.change(&p)
			g := do(t, s.CreateGrant, &p)
			a := requestNew(t, s, func() *oncekeystore.RequestApprovalParams {
				r := approvalParams()
				r.Tenant, r.Token = base.Tenant, "w1_x"
				return r
			}())
			_, err := s.ApproveByGrant(ctxT(t), approveBy(a, g))
			var na *oncekeystore.GrantNotActiveError
			require.ErrorAs(t, err, &na)
			require.Equal(t, tc.reason, na.Reason)
			requireSameApproval(t, a, getApproval(t, s, a.Tenant, a.OperationKey))
		})
	}
	t.Run("revoked", func(t *testing.T) {
		g := do(t, s.CreateGrant, base)
		do(t, s.RevokeGrant, &oncekeystore.RevokeGrantParams{ID: g.ID, RevokedBy: "grace"})
		_, a := grantedRequest(t, s, g)
		_, err := s.ApproveByGrant(ctxT(t), approveBy(a, g))
		var na *oncekeystore.GrantNotActiveError
		require.ErrorAs(t, err, &na)
		require.Equal(t, "revoked", na.Reason)
		require.Equal(t, "grace", na.Grant.RevokedBy)
		requireSameApproval(t, a, getApproval(t, s, a.Tenant, a.OperationKey))
	})
	t.Run("unknown", func(t *testing.T) {
		g := do(t, s.CreateGrant, base)
		_, a := grantedRequest(t, s, g)
		g2 := *g
		g2.ID = oncekeystore.NewGrantID()
		_, err := s.ApproveByGrant(ctxT(t), approveBy(a, &g2))
		var na *oncekeystore.GrantNotActiveError
		require.ErrorAs(t, err, &na)
		require.Equal(t, "not found", na.Reason)
	})
}

func testGrantApproveFenced(t *testing.T, s GrantApprovalStore) {
	g := do(t, s.CreateGrant, grantParams(t))
	_, a := grantedRequest(t, s, g)
	p := approveBy(a, g)
	p.Token = "w1_another-request"
	_, err := s.ApproveByGrant(ctxT(t), p)
	var stale *oncekeystore.StaleDecisionError
	require.ErrorAs(t, err, &stale)
	p = approveBy(a, g)
	p.Episode++
	_, err = s.ApproveByGrant(ctxT(t), p)
	require.ErrorAs(t, err, &stale)

	decided := decide(t, s, a, oncekeystore.ApprovalDenied)
	_, err = s.ApproveByGrant(ctxT(t), approveBy(a, g))
	ce := requireApprovalConflict(t, err)
	require.Equal(t, oncekeystore.ApprovalDenied, ce.Approval.Status)
	requireSameApproval(t, decided, getApproval(t, s, a.Tenant, a.OperationKey))

	p = approveBy(a, g)
	p.OperationKey = newKey()
	_, err = s.ApproveByGrant(ctxT(t), p)
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
}

// An approval recorded under a grant is asked anew (a new pending episode, no grant) only by a
// worker's request that names that grant as superseded; a request naming another grant, or
// none, gets it unchanged.
func testGrantSupersede(t *testing.T, s GrantApprovalStore) {
	g := do(t, s.CreateGrant, grantParams(t))
	p, a := grantedRequest(t, s, g)
	approved := do(t, s.ApproveByGrant, approveBy(a, g))
	for _, other := range []string{"", oncekeystore.NewGrantID()} {
		q := *p
		q.Token, q.SupersedeGrant = "w1_later", other
		res := request(t, s, &q)
		require.False(t, res.Created)
		requireSameApproval(t, approved, res.Approval)
	}
	q := *p
	q.Token, q.SupersedeGrant = "w1_later", g.ID
	anew := requestNew(t, s, &q)
	require.Equal(t, a.Episode+1, anew.Episode)
	require.Empty(t, anew.GrantID)
	requirePendingFrom(t, &q, anew)
}

// A revoke racing ApproveByGrant lands before it (the approval is refused and stays pending) or
// after it (the approval was decided no later than the revoke): never inside.
func testGrantRevokeRace(t *testing.T, s GrantApprovalStore) {
	for range 10 {
		g := do(t, s.CreateGrant, grantParams(t))
		_, a := grantedRequest(t, s, g)
		var (
			approved *oncekeystore.Approval
			revoked  *oncekeystore.Grant
			errs     []error
		)
		race(2, func(i int) (any, error) {
			if i == 0 {
				return s.ApproveByGrant(context.Background(), approveBy(a, g))
			}
			return s.RevokeGrant(context.Background(), &oncekeystore.RevokeGrantParams{ID: g.ID, RevokedBy: "grace"})
		}, func(v any, err error) {
			var na *oncekeystore.GrantNotActiveError
			switch v := v.(type) {
			case *oncekeystore.Approval:
				if v != nil {
					approved = v
				}
			case *oncekeystore.Grant:
				revoked = v
			}
			if err != nil && !errors.As(err, &na) {
				errs = append(errs, err)
			}
		})
		require.Empty(t, errs)
		require.NotNil(t, revoked)
		cur := getApproval(t, s, a.Tenant, a.OperationKey)
		if approved == nil {
			require.Equal(t, oncekeystore.ApprovalPending, cur.Status, "refused: nothing written")
			continue
		}
		require.False(t, approved.DecidedAt.After(revoked.RevokedAt), "approved at %s, after the revoke at %s", approved.DecidedAt, revoked.RevokedAt)
	}
}

func testGrantInvalid(t *testing.T, s GrantApprovalStore) {
	for _, tc := range []struct {
		field  string
		change func(p *oncekeystore.CreateGrantParams)
	}{
		{"Tenant", func(p *oncekeystore.CreateGrantParams) { p.Tenant = "" }},
		{"Namespace", func(p *oncekeystore.CreateGrantParams) { p.Namespace = " " }},
		{"Tool", func(p *oncekeystore.CreateGrantParams) { p.Tool = "" }},
		{"CreatedBy", func(p *oncekeystore.CreateGrantParams) { p.CreatedBy = "" }},
		{"Rule", func(p *oncekeystore.CreateGrantParams) { p.Rule = "amount <= " }},
		{"Rule", func(p *oncekeystore.CreateGrantParams) { p.Rule = `currency < "EUR"` }},
		{"Duration", func(p *oncekeystore.CreateGrantParams) { p.Duration = 0 }},
		{"Duration", func(p *oncekeystore.CreateGrantParams) { p.Duration = oncekeystore.MaxGrantDuration + time.Second }},
	} {
		p := grantParams(t)
		tc.change(p)
		_, err := s.CreateGrant(ctxT(t), p)
		requireInvalid(t, err, tc.field)
	}
	_, err := s.RevokeGrant(ctxT(t), &oncekeystore.RevokeGrantParams{ID: "g1_x"})
	requireInvalid(t, err, "RevokedBy")
	_, err = s.ListGrants(ctxT(t), &oncekeystore.ListGrantsParams{Status: "live"})
	requireInvalid(t, err, "Status")
	_, err = s.ListGrants(ctxT(t), &oncekeystore.ListGrantsParams{Cursor: "not a cursor"})
	requireInvalid(t, err, "Cursor")
	p := grantParams(t)
	p.Retention = -time.Second
	_, err = s.CreateGrant(ctxT(t), p)
	requireInvalid(t, err, "Retention")
	_, err = s.ApproveByGrant(ctxT(t), &oncekeystore.ApproveByGrantParams{Tenant: "acme", OperationKey: newKey(), Episode: 1, Retention: time.Hour})
	requireInvalid(t, err, "GrantID")
}

// listGrants returns every grant ListGrants lists for p, page after page (p.Limit a page),
// checking each page is full but the last.
func listGrants(t *testing.T, s oncekeystore.GrantStore, p oncekeystore.ListGrantsParams) []*oncekeystore.Grant {
	t.Helper()
	var all []*oncekeystore.Grant
	for {
		res := do(t, s.ListGrants, &p)
		all = append(all, res.Grants...)
		if res.Next == "" {
			return all
		}
		require.Len(t, res.Grants, p.PageSize(), "a page before the last is full")
		p.Cursor = res.Next
	}
}

func grantIDs(gs []*oncekeystore.Grant) (out []string) {
	for _, g := range gs {
		out = append(out, g.ID)
	}
	return out
}

// ListGrants filters by status in the store and pages with a cursor: the one active grant
// made after many ended ones is on the first page of the active ones, the ended ones (revoked
// and expired) are listed apart, and paging through every grant gives each once, oldest first.
func testGrantListPages(t *testing.T, s GrantApprovalStore) {
	base := grantParams(t)
	var ended []string
	for i := range 7 {
		p := *base
		if i%2 == 0 {
			p.Duration = time.Microsecond
		}
		g := do(t, s.CreateGrant, &p)
		if i%2 == 1 {
			do(t, s.RevokeGrant, &oncekeystore.RevokeGrantParams{ID: g.ID, RevokedBy: "grace"})
		}
		ended = append(ended, g.ID)
	}
	active := do(t, s.CreateGrant, base)
	other := *base
	other.Tenant += "-other"
	do(t, s.CreateGrant, &other)

	scope := oncekeystore.ListGrantsParams{Namespace: base.Namespace, Tenant: base.Tenant, Tool: base.Tool, Status: oncekeystore.GrantActive, Limit: 1}
	res := do(t, s.ListGrants, &scope)
	require.Equal(t, []string{active.ID}, grantIDs(res.Grants), "the active grant, whatever ended before it")
	require.Empty(t, res.Next)
	for _, p := range []oncekeystore.ListGrantsParams{
		{Tenant: base.Tenant, Status: oncekeystore.GrantActive, Limit: 1},
		{Namespace: base.Namespace, Tenant: base.Tenant, Status: oncekeystore.GrantActive, Limit: 1},
	} {
		require.Equal(t, []string{active.ID}, grantIDs(listGrants(t, s, p)))
	}

	require.Equal(t, ended, grantIDs(listGrants(t, s, oncekeystore.ListGrantsParams{Tenant: base.Tenant, Status: oncekeystore.GrantEnded, Limit: 2})))
	for _, g := range listGrants(t, s, oncekeystore.ListGrantsParams{Tenant: base.Tenant, Status: oncekeystore.GrantExpired, Limit: 3}) {
		require.Equal(t, oncekeystore.GrantExpired, g.Status)
	}
	require.Len(t, listGrants(t, s, oncekeystore.ListGrantsParams{Tenant: base.Tenant, Status: oncekeystore.GrantRevoked, Limit: 2}), 3)
	all := listGrants(t, s, oncekeystore.ListGrantsParams{Namespace: base.Namespace, Tenant: base.Tenant, Limit: 3})
	require.Equal(t, append(append([]string(nil), ended...), active.ID), grantIDs(all))
}

// Forget deletes the tenant's grants, active ones included: none approves a call of the
// tenant any more (the worker's lookup finds none, and ApproveByGrant under one is refused),
// and their rule and reason are gone. Another tenant's grant stays.
func testGrantForget(t *testing.T, s GrantApprovalStore) {
	st, ok := s.(oncekeystore.Store)
	if !ok {
		t.Skip("the store does not implement oncekeystore.Store")
	}
	g := do(t, s.CreateGrant, grantParams(t))
	ended := grantParams(t)
	ended.Tenant = g.Tenant
	do(t, s.RevokeGrant, &oncekeystore.RevokeGrantParams{ID: do(t, s.CreateGrant, ended).ID, RevokedBy: "grace"})
	kept := grantParams(t)
	keptG := do(t, s.CreateGrant, kept)

	res, err := st.Forget(ctxT(t), &oncekeystore.ForgetParams{Tenant: g.Tenant})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.GrantsDeleted, "the tenant's active and revoked grants")

	_, err = s.GetGrant(ctxT(t), g.ID)
	require.ErrorIs(t, err, oncekeystore.ErrNotFound, "its rule and reason are gone")
	require.Empty(t, do(t, s.ListGrants, &oncekeystore.ListGrantsParams{Namespace: g.Namespace, Tenant: g.Tenant, Tool: g.Tool, Status: oncekeystore.GrantActive}).Grants,
		"the worker's lookup finds no grant: the call waits for a person")
	// A call after the forget asks, and stays pending: no grant decides it.
	_, a := grantedRequest(t, s, g)
	_, err = s.ApproveByGrant(ctxT(t), approveBy(a, g))
	var na *oncekeystore.GrantNotActiveError
	require.ErrorAs(t, err, &na)
	require.Equal(t, "not found", na.Reason)
	require.Equal(t, oncekeystore.ApprovalPending, getApproval(t, s, a.Tenant, a.OperationKey).Status)
	requireSameFields(t, keptG, do(t, s.GetGrant, keptG.ID))
}

// Purge deletes a grant once it ended (expired, or revoked) longer than its Retention ago,
// and keeps an active one and an ended one within its retention.
func testGrantPurge(t *testing.T, s GrantApprovalStore) {
	st, ok := s.(oncekeystore.Store)
	if !ok {
		t.Skip("the store does not implement oncekeystore.Store")
	}
	short := grantParams(t)
	short.Duration, short.Retention = shortLease, shortLease
	expired := do(t, s.CreateGrant, short)
	revokedP := *short
	revokedP.Duration = time.Hour
	revoked := do(t, s.CreateGrant, &revokedP)
	do(t, s.RevokeGrant, &oncekeystore.RevokeGrantParams{ID: revoked.ID, RevokedBy: "grace"})
	activeP := *short
	activeP.Duration = time.Hour
	active := do(t, s.CreateGrant, &activeP)
	keptP := grantParams(t)
	keptP.Duration = time.Microsecond
	kept := do(t, s.CreateGrant, keptP) // expired, but kept DefaultGrantRetention

	total := purgeUntil(t, st, 1, func(total oncekeystore.PurgeResult) bool { return total.GrantsDeleted >= 2 })
	require.Equal(t, int64(2), total.GrantsDeleted)
	for _, id := range []string{expired.ID, revoked.ID} {
		_, err := s.GetGrant(ctxT(t), id)
		require.ErrorIs(t, err, oncekeystore.ErrNotFound)
	}
	require.Equal(t, oncekeystore.GrantActive, do(t, s.GetGrant, active.ID).Status)
	require.Equal(t, oncekeystore.GrantExpired, do(t, s.GetGrant, kept.ID).Status)
	require.Equal(t, []string{active.ID}, grantIDs(listGrants(t, s, oncekeystore.ListGrantsParams{Tenant: short.Tenant})))
}
