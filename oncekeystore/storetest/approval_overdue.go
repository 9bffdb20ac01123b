package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

// The approval subtests of a request whose deadline passed while it was pending, with no
// approval workflow to record the timeout (a call scheduled around the interceptor made it): the
// store reads it as timed out at its deadline, everywhere.

// requestOverdue asks a worker's request for approval of p's key with a short timeout and waits,
// on the store's clock, until it reads as timed out; it returns the pending episode as asked and
// the approval as it reads then.
func requestOverdue(t *testing.T, s oncekeystore.ApprovalStore, p *oncekeystore.RequestApprovalParams) (asked, overdue *oncekeystore.Approval) {
	t.Helper()
	p.Timeout = shortLease
	asked = requestNew(t, s, p)
	require.Eventually(t, func() bool {
		overdue = getApproval(t, s, p.Tenant, p.OperationKey)
		return overdue.Status != oncekeystore.ApprovalPending
	}, waitFor, pollEvery, "the request never read as timed out after its deadline")
	return asked, overdue
}

// requireOverdueOf asserts a is the pending episode asked, as it reads past its deadline: timed
// out at the deadline by oncekeystore.ApprovalTimeoutDecider, nothing else changed, no retention yet.
func requireOverdueOf(t *testing.T, asked, a *oncekeystore.Approval) {
	t.Helper()
	want := *asked
	want.Status, want.DecidedAt, want.DecidedBy, want.Reason = oncekeystore.ApprovalTimedOut, asked.Deadline,
		oncekeystore.ApprovalTimeoutDecider, oncekeystore.ApprovalOverdueReason
	requireSameApproval(t, &want, a)
}

// A pending approval past its deadline reads as timed out, through GetApproval and
// ListApprovals (whose status filter takes it as timed out, not pending), with its episode,
// token and fields otherwise as asked; one decided before its deadline stays as decided.
func testApprovalOverdueReadsTimedOut(t *testing.T, s oncekeystore.ApprovalStore) {
	p := approvalParams()
	p.Token = "worker-1"
	asked, overdue := requestOverdue(t, s, p)
	requireOverdueOf(t, asked, overdue)
	require.False(t, overdue.Overdue(time.Now().Add(time.Hour)), "it reads as decided")

	live := approvalParams()
	live.Token = "worker-2"
	waiting := requestNew(t, s, live)
	approved := approvalParams()
	approved.Token, approved.Timeout = "worker-3", shortLease
	decided := decide(t, s, requestNew(t, s, approved), oncekeystore.ApprovalApproved)
	require.Eventually(t, func() bool { return time.Now().After(decided.Deadline.Add(shortLease)) }, waitFor, pollEvery)
	requireSameApproval(t, decided, getApproval(t, s, approved.Tenant, approved.OperationKey))

	for _, tc := range []struct {
		status oncekeystore.ApprovalStatus
		want   []*oncekeystore.Approval
	}{
		{"", []*oncekeystore.Approval{overdue, waiting, decided}},
		{oncekeystore.ApprovalPending, []*oncekeystore.Approval{waiting}},
		{oncekeystore.ApprovalTimedOut, []*oncekeystore.Approval{overdue}},
		{oncekeystore.ApprovalApproved, []*oncekeystore.Approval{decided}},
	} {
		got := listAllApprovals(t, s, oncekeystore.ListApprovalsParams{Status: tc.status})
		require.Equal(t, approvalKeys(tc.want), approvalKeys(got), "status %q", tc.status)
		for i := range got {
			requireSameApproval(t, tc.want[i], got[i])
		}
	}
}

// A pending approval past its deadline is asked anew, as a timed-out one: by a request of its
// fingerprint (with a worker's token or without) and by a worker's request of another
// fingerprint, so a request nobody waits on holds its key no longer than its timeout. A request
// without a token of another fingerprint, or one of another namespace or tool, changes nothing
// and gets it as it reads; the repeat of the request that asked it learns that it asked.
func testApprovalOverdueAsksAnew(t *testing.T, s oncekeystore.ApprovalStore) {
	t.Run("own fingerprint", func(t *testing.T) {
		for _, token := range []string{"worker-2", ""} {
			p := approvalParams()
			p.Token, p.RequestToken = "worker-1", 0x0d0e1
			asked, overdue := requestOverdue(t, s, p)
			res := request(t, s, p)
			require.True(t, res.Created, "the repeat of the request that asked the episode")
			requireOverdueOf(t, asked, res.Approval)

			again := *p
			again.Token, again.RequestToken, again.Timeout = token, 0, time.Hour
			res = request(t, s, &again)
			require.True(t, res.Created, "an overdue approval is asked anew (token %q)", token)
			requirePendingFrom(t, &again, res.Approval)
			require.Equal(t, overdue.Episode+1, res.Approval.Episode)
			require.False(t, res.Approval.RequestedAt.Before(overdue.Deadline))
		}
	})
	t.Run("other fingerprint", func(t *testing.T) {
		p := approvalParams()
		p.Token = "attacker-worker"
		asked, _ := requestOverdue(t, s, p)

		legit := *p
		legit.Token, legit.Fingerprint, legit.Summary, legit.Timeout = "", strings.Repeat("cd", 32), "refund 1.00 EUR on order 43", time.Hour
		otherNS, otherTool := legit, legit
		otherNS.Token, otherNS.Namespace = "worker-ns", "ns-b"
		otherTool.Token, otherTool.Tool = "worker-tool", "wire"
		for _, q := range []*oncekeystore.RequestApprovalParams{&legit, &otherNS, &otherTool} {
			res := request(t, s, q)
			require.False(t, res.Created, "namespace %q, tool %q, token %q asked anew", q.Namespace, q.Tool, q.Token)
			requireOverdueOf(t, asked, res.Approval)
		}

		legit.Token = "worker-2"
		res := request(t, s, &legit)
		require.True(t, res.Created, "a request of other arguments that nobody waits on holds the key no longer than its timeout")
		requirePendingFrom(t, &legit, res.Approval)
		require.Equal(t, asked.Episode+1, res.Approval.Episode)
		requireSameApproval(t, res.Approval, getApproval(t, s, p.Tenant, p.OperationKey))
	})
}

// A person's decision that arrives after the deadline of the pending episode it names does not
// land: the store writes the timeout the approval reads as (decided at the deadline by
// oncekeystore.ApprovalTimeoutDecider, kept for the decision's retention) and answers
// *oncekeystore.ApprovalConflictError with it; a decision sent again gets the same. A timeout
// decision (the approval workflow's) is written as given; a decision for another episode or
// request is stale, as before the deadline.
func testApprovalOverdueDecision(t *testing.T, s oncekeystore.ApprovalStore) {
	for _, st := range []oncekeystore.ApprovalStatus{oncekeystore.ApprovalApproved, oncekeystore.ApprovalDenied} {
		p := approvalParams()
		p.Token = "worker-1"
		asked, _ := requestOverdue(t, s, p)

		stale := decision(asked, st)
		stale.Token = "another-request"
		_, err := s.DecideApproval(ctxT(t), stale)
		var se *oncekeystore.StaleDecisionError
		require.ErrorAs(t, err, &se, "%s for another request", st)

		d := decision(asked, st)
		_, err = s.DecideApproval(ctxT(t), d)
		ce := requireApprovalConflict(t, err)
		want := *ce.Approval
		want.ExpiresAt = time.Time{}
		requireOverdueOf(t, asked, &want)
		require.False(t, ce.Approval.ExpiresAt.Before(asked.Deadline.Add(d.Retention)),
			"kept for the decision's retention from when it was written (%s), not from the deadline", ce.Approval.ExpiresAt)
		requireSameApproval(t, ce.Approval, getApproval(t, s, p.Tenant, p.OperationKey))

		_, err = s.DecideApproval(ctxT(t), d)
		again := requireApprovalConflict(t, err)
		requireSameApproval(t, ce.Approval, again.Approval)
	}

	p := approvalParams()
	p.Token = "worker-1"
	asked, _ := requestOverdue(t, s, p)
	d := decision(asked, oncekeystore.ApprovalTimedOut)
	d.DecidedBy, d.Reason = oncekeystore.ApprovalTimeoutDecider, "nobody decided within 300ms"
	out, err := s.DecideApproval(ctxT(t), d)
	require.NoError(t, err, "the approval workflow's timeout is written as given")
	require.Equal(t, oncekeystore.ApprovalTimedOut, out.Status)
	require.Equal(t, d.Reason, out.Reason)
	require.False(t, out.DecidedAt.Before(asked.Deadline))
	require.Equal(t, d.Retention, out.ExpiresAt.Sub(out.DecidedAt))
	requireSameApproval(t, out, getApproval(t, s, p.Tenant, p.OperationKey))
}
