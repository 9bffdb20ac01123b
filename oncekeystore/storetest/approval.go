package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

// approvalTests are the subtests of RunApprovals.
var approvalTests = []struct {
	name string
	fn   func(t *testing.T, s oncekeystore.ApprovalStore)
}{
	{"Create", testApprovalCreate},
	{"SharedPending", testApprovalSharedPending},
	{"ConcurrentRequestsOneCreates", testApprovalConcurrentRequests},
	{"Decide", testApprovalDecide},
	{"DecidedTwiceConflicts", testApprovalConflict},
	{"ConcurrentDecisionsOneLands", testApprovalConcurrentDecisions},
	{"StaleEpisodeRefused", testApprovalStaleEpisode},
	{"TimedOutAsksAnew", testApprovalTimedOut},
	{"FingerprintDiffersUnchanged", testApprovalFingerprint},
	{"NamespaceOrToolDiffersUnchanged", testApprovalNamespaceTool},
	{"RequestTokenRepeatCreated", testApprovalRequestToken},
	{"RequestTokenRepeatAfterDecision", testApprovalRequestTokenDecided},
	{"PastRetentionAsksAnew", testApprovalRetention},
	{"WorkerTokenFencesDecisions", testApprovalWorkerToken},
	{"WorkerRequestAsksAnewWhatItDidNotAsk", testApprovalWorkerAsksAnew},
	{"ListFilters", testApprovalListFilters},
	{"ListPagination", testApprovalListPagination},
	{"ListInvalid", testApprovalListInvalid},
	{"TenantsAreSeparate", testApprovalTenants},
	{"Purge", testApprovalPurge},
	{"Forget", testApprovalForget},
	{"TextFieldsExact", testApprovalTextFields},
	{"InvalidParams", testApprovalInvalidParams},
	{"ContextCanceled", testApprovalContextCanceled},
	{"OverdueReadsTimedOut", testApprovalOverdueReadsTimedOut},
	{"OverdueAsksAnew", testApprovalOverdueAsksAnew},
	{"OverdueDecisionDoesNotLand", testApprovalOverdueDecision},
	{"EditAndMessageKept", testApprovalEditAndMessage},
	{"SignatureKept", testApprovalSignatureKept},
	{"PartialApprovals", testApprovalPartialApprovals},
}

// RunApprovals runs the approval subtests of the conformance suite against stores made by
// newStore, which is called once per subtest and must return an empty store cleaned up with
// t.Cleanup. Run calls it for a store that implements oncekeystore.ApprovalStore; call it yourself
// only to run the approval subtests alone. Subtests run in parallel, on the store's clock at
// real speed, like Run's.
func RunApprovals(t *testing.T, newStore func(t *testing.T) oncekeystore.ApprovalStore) {
	t.Helper()
	for _, tc := range approvalTests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// runApprovalsIfImplemented runs RunApprovals under the subtest "Approval" when the stores
// newStore makes implement oncekeystore.ApprovalStore, and skips it (saying so) otherwise.
func runApprovalsIfImplemented(t *testing.T, newStore func(t *testing.T) oncekeystore.Store) {
	t.Run("Approval", func(t *testing.T) {
		t.Parallel()
		if _, ok := newStore(t).(oncekeystore.ApprovalStore); !ok {
			t.Skip("the store does not implement oncekeystore.ApprovalStore: no approval subtests")
		}
		RunApprovals(t, func(t *testing.T) oncekeystore.ApprovalStore {
			return newStore(t).(oncekeystore.ApprovalStore)
		})
	})
}

// ---- helpers -------------------------------------------------------------------------------

// approvalParams returns request params for a fresh key in tenant "acme".
func approvalParams() *oncekeystore.RequestApprovalParams {
	return &oncekeystore.RequestApprovalParams{
		Tenant: "acme", OperationKey: newKey(), Namespace: "ns-a", Tool: "refund",
		Fingerprint: strings.Repeat("ab", 32), WorkflowID: "wf-1", StepID: "refund_order",
		Summary: "refund 120.00 EUR on order 42", Timeout: time.Hour,
	}
}

func request(t *testing.T, s oncekeystore.ApprovalStore, p *oncekeystore.RequestApprovalParams) *oncekeystore.ApprovalResult {
	t.Helper()
	res := do(t, s.RequestApproval, p)
	require.NotNil(t, res.Approval)
	return res
}

// requestNew asks for approval of p's key and requires a new pending episode.
func requestNew(t *testing.T, s oncekeystore.ApprovalStore, p *oncekeystore.RequestApprovalParams) *oncekeystore.Approval {
	t.Helper()
	res := request(t, s, p)
	require.True(t, res.Created, "request of %s did not create a pending episode: %+v", p.OperationKey, res.Approval)
	require.Equal(t, oncekeystore.ApprovalPending, res.Approval.Status)
	return res.Approval
}

func decision(a *oncekeystore.Approval, st oncekeystore.ApprovalStatus) *oncekeystore.DecideApprovalParams {
	return &oncekeystore.DecideApprovalParams{Tenant: a.Tenant, OperationKey: a.OperationKey, Episode: a.Episode, Token: a.Token,
		Status: st, DecidedBy: "alice@example.com", Reason: "checked the order", Retention: time.Hour}
}

func decide(t *testing.T, s oncekeystore.ApprovalStore, a *oncekeystore.Approval, st oncekeystore.ApprovalStatus) *oncekeystore.Approval {
	t.Helper()
	return do(t, s.DecideApproval, decision(a, st))
}

func getApproval(t *testing.T, s oncekeystore.ApprovalStore, tenant, key string) *oncekeystore.Approval {
	t.Helper()
	return do(t, s.GetApproval, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
}

func requireNoApproval(t *testing.T, s oncekeystore.ApprovalStore, tenant, key string) {
	t.Helper()
	_, err := s.GetApproval(ctxT(t), &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
}

// requireSameApproval asserts two reads of an approval are equal in every field.
func requireSameApproval(t *testing.T, want, got *oncekeystore.Approval) {
	t.Helper()
	requireSameFields(t, want, got)
}

// requirePendingFrom asserts a is a fresh pending episode asked with p.
func requirePendingFrom(t *testing.T, p *oncekeystore.RequestApprovalParams, a *oncekeystore.Approval) {
	t.Helper()
	require.Equal(t, p.Tenant, a.Tenant)
	require.Equal(t, p.OperationKey, a.OperationKey)
	require.Equal(t, p.Namespace, a.Namespace)
	require.Equal(t, p.Tool, a.Tool)
	require.Equal(t, p.Fingerprint, a.Fingerprint)
	require.Equal(t, p.WorkflowID, a.WorkflowID)
	require.Equal(t, p.StepID, a.StepID)
	require.Equal(t, p.Summary, a.Summary)
	require.Equal(t, p.Token, a.Token)
	require.Equal(t, oncekeystore.ApprovalPending, a.Status)
	require.False(t, a.RequestedAt.IsZero())
	require.Equal(t, p.Timeout, a.Deadline.Sub(a.RequestedAt), "the deadline is the timeout from the request, on the store's clock")
	require.True(t, a.DecidedAt.IsZero(), "DecidedAt while pending: %s", a.DecidedAt)
	require.True(t, a.ExpiresAt.IsZero(), "ExpiresAt while pending: %s", a.ExpiresAt)
	require.Empty(t, a.DecidedBy)
	require.Empty(t, a.Reason)
}

func requireApprovalConflict(t *testing.T, err error) *oncekeystore.ApprovalConflictError {
	t.Helper()
	var ce *oncekeystore.ApprovalConflictError
	require.ErrorAs(t, err, &ce)
	require.NotNil(t, ce.Approval)
	return ce
}

// ---- request and decide --------------------------------------------------------------------

func testApprovalCreate(t *testing.T, s oncekeystore.ApprovalStore) {
	p := approvalParams()
	p.Timeout = 90*time.Minute + 1234567*time.Microsecond
	res := request(t, s, p)
	require.True(t, res.Created)
	a := res.Approval
	requirePendingFrom(t, p, a)
	require.Equal(t, int64(1), a.Episode)
	requireSameApproval(t, a, getApproval(t, s, p.Tenant, p.OperationKey))
	requireNoApproval(t, s, p.Tenant, newKey())
}

// A repeat or a re-proposal of the call while its approval is pending shares it: nothing
// changes, whoever asks (another workflow, another summary, another timeout).
func testApprovalSharedPending(t *testing.T, s oncekeystore.ApprovalStore) {
	p := approvalParams()
	a := requestNew(t, s, p)
	q := *p
	q.WorkflowID, q.StepID, q.Summary, q.Namespace, q.Timeout = "wf-2", "again", "another summary", "ns-b", time.Minute
	for _, r := range []*oncekeystore.RequestApprovalParams{p, &q} {
		res := request(t, s, r)
		require.False(t, res.Created)
		requireSameApproval(t, a, res.Approval)
	}
	requireSameApproval(t, a, getApproval(t, s, p.Tenant, p.OperationKey))
}

func testApprovalConcurrentRequests(t *testing.T, s oncekeystore.ApprovalStore) {
	p := approvalParams()
	raceOne(t, 16, func(int) (*oncekeystore.ApprovalResult, error) {
		q := *p
		return s.RequestApproval(context.Background(), &q)
	}, func(res *oncekeystore.ApprovalResult) bool { return res.Created }, func(res *oncekeystore.ApprovalResult) error {
		if res.Approval.Episode != 1 || res.Approval.Status != oncekeystore.ApprovalPending {
			return fmt.Errorf("unexpected approval %+v", res.Approval)
		}
		return nil
	})
}

func testApprovalDecide(t *testing.T, s oncekeystore.ApprovalStore) {
	for _, st := range []oncekeystore.ApprovalStatus{oncekeystore.ApprovalApproved, oncekeystore.ApprovalDenied} {
		p := approvalParams()
		a := requestNew(t, s, p)
		d := decision(a, st)
		d.Retention = 36*time.Hour + 250*time.Millisecond
		out, err := s.DecideApproval(ctxT(t), d)
		require.NoError(t, err)
		require.Equal(t, st, out.Status)
		require.Equal(t, a.Episode, out.Episode)
		require.Equal(t, "alice@example.com", out.DecidedBy)
		require.Equal(t, "checked the order", out.Reason)
		require.False(t, out.DecidedAt.Before(a.RequestedAt), "decided %s before requested %s", out.DecidedAt, a.RequestedAt)
		require.Equal(t, d.Retention, out.ExpiresAt.Sub(out.DecidedAt), "retention counts from the decision")
		require.True(t, a.RequestedAt.Equal(out.RequestedAt))
		require.True(t, a.Deadline.Equal(out.Deadline))
		require.Equal(t, p.Summary, out.Summary)
		requireSameApproval(t, out, getApproval(t, s, p.Tenant, p.OperationKey))

		// A repeat of the call sees the decision and asks nothing.
		res := request(t, s, p)
		require.False(t, res.Created, "a repeat of a %s call does not ask again", st)
		requireSameApproval(t, out, res.Approval)
	}
}

// A decided approval is not decided again: ApprovalConflictError carries it as it is, and
// nothing changes.
func testApprovalConflict(t *testing.T, s oncekeystore.ApprovalStore) {
	for _, first := range []oncekeystore.ApprovalStatus{oncekeystore.ApprovalApproved, oncekeystore.ApprovalDenied, oncekeystore.ApprovalTimedOut} {
		a := requestNew(t, s, approvalParams())
		done := decide(t, s, a, first)
		for _, st := range []oncekeystore.ApprovalStatus{oncekeystore.ApprovalApproved, oncekeystore.ApprovalDenied, oncekeystore.ApprovalTimedOut} {
			d := decision(a, st)
			d.DecidedBy, d.Reason = "mallory", "late"
			_, err := s.DecideApproval(ctxT(t), d)
			ce := requireApprovalConflict(t, err)
			requireSameApproval(t, done, ce.Approval)
			require.Contains(t, err.Error(), "already "+string(first))
		}
		requireSameApproval(t, done, getApproval(t, s, a.Tenant, a.OperationKey))
	}
}

func testApprovalConcurrentDecisions(t *testing.T, s oncekeystore.ApprovalStore) {
	a := requestNew(t, s, approvalParams())
	var (
		landed    []*oncekeystore.Approval
		conflicts int
		errs      []error
	)
	race(12, func(i int) (*oncekeystore.Approval, error) {
		d := decision(a, []oncekeystore.ApprovalStatus{oncekeystore.ApprovalApproved, oncekeystore.ApprovalDenied, oncekeystore.ApprovalTimedOut}[i%3])
		d.DecidedBy = fmt.Sprintf("decider-%d", i)
		return s.DecideApproval(context.Background(), d)
	}, func(out *oncekeystore.Approval, err error) {
		var ce *oncekeystore.ApprovalConflictError
		switch {
		case err == nil:
			landed = append(landed, out)
		case errors.As(err, &ce):
			conflicts++
		default:
			errs = append(errs, err)
		}
	})
	require.Empty(t, errs)
	require.Len(t, landed, 1, "exactly one of 12 concurrent decisions lands")
	require.Equal(t, 11, conflicts)
	requireSameApproval(t, landed[0], getApproval(t, s, a.Tenant, a.OperationKey))
}

// A decision names the episode it was made for: delivered again after the approval was asked
// anew, it is refused with *oncekeystore.StaleDecisionError and changes nothing.
func testApprovalStaleEpisode(t *testing.T, s oncekeystore.ApprovalStore) {
	p := approvalParams()
	first := requestNew(t, s, p)
	late := decision(first, oncekeystore.ApprovalApproved)
	decide(t, s, first, oncekeystore.ApprovalTimedOut)
	second := requestNew(t, s, p)
	require.Equal(t, int64(2), second.Episode)

	for _, ep := range []int64{1, 3} {
		d := *late
		d.Episode = ep
		_, err := s.DecideApproval(ctxT(t), &d)
		var stale *oncekeystore.StaleDecisionError
		require.ErrorAs(t, err, &stale, "a decision for episode %d", ep)
		require.Equal(t, ep, stale.Epoch)
		require.Equal(t, int64(2), stale.Current)
		require.Equal(t, p.OperationKey, stale.OperationKey)
		requireSameApproval(t, second, getApproval(t, s, p.Tenant, p.OperationKey))
	}
	out := decide(t, s, second, oncekeystore.ApprovalApproved)
	require.Equal(t, int64(2), out.Episode)
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
}

// A worker's request stores its token with the episode it asks, and a decision must name it: a
// decision for the episode with another token, or none, is a *oncekeystore.StaleDecisionError and
// changes nothing.
func testApprovalWorkerToken(t *testing.T, s oncekeystore.ApprovalStore) {
	p := approvalParams()
	p.Token = "worker-token-1"
	a := requestNew(t, s, p)
	requirePendingFrom(t, p, a)
	for _, tok := range []string{"", "worker-token-2", "WORKER-TOKEN-1"} {
		d := decision(a, oncekeystore.ApprovalApproved)
		d.Token = tok
		_, err := s.DecideApproval(ctxT(t), d)
		var stale *oncekeystore.StaleDecisionError
		require.ErrorAs(t, err, &stale, "a decision with token %q", tok)
		require.Equal(t, a.Episode, stale.Current)
		requireSameApproval(t, a, getApproval(t, s, p.Tenant, p.OperationKey))
	}
	out := decide(t, s, a, oncekeystore.ApprovalApproved)
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
	require.Equal(t, p.Token, out.Token)
}

// A worker's request (with a token) asks anew a pending or approved approval of its fingerprint
// that no worker asked (no token: the earlier protocol) or that showed another summary, and a
// denied or timed-out approval of another fingerprint; the same summary under another worker
// token, a denial of its fingerprint, a pending or approved approval of another, and a request
// without a token change nothing.
func testApprovalWorkerAsksAnew(t *testing.T, s oncekeystore.ApprovalStore) {
	for _, st := range []oncekeystore.ApprovalStatus{oncekeystore.ApprovalPending, oncekeystore.ApprovalApproved} {
		t.Run(string(st), func(t *testing.T) {
			old := approvalParams() // the earlier protocol: no token
			a := requestNew(t, s, old)
			if st == oncekeystore.ApprovalApproved {
				a = decide(t, s, a, st)
			}
			w := *old
			w.Token, w.Summary = "worker-1", "refund 99999.00 EUR on order 42"
			res := request(t, s, &w)
			require.True(t, res.Created, "a worker's request asks anew what no worker asked")
			requirePendingFrom(t, &w, res.Approval)
			require.Equal(t, a.Episode+1, res.Approval.Episode)

			again := w
			again.Token = "worker-2"
			res2 := request(t, s, &again)
			require.False(t, res2.Created, "the same summary, asked by a worker: as it is")
			requireSameApproval(t, res.Approval, res2.Approval)
			res3 := request(t, s, old)
			require.False(t, res3.Created, "a request without a token never asks anew a worker's")
			requireSameApproval(t, res.Approval, res3.Approval)

			if st == oncekeystore.ApprovalApproved {
				decide(t, s, res.Approval, oncekeystore.ApprovalApproved)
			}
			other := w
			other.Token, other.Summary = "worker-3", "refund 1.00 EUR on order 42"
			res4 := request(t, s, &other)
			require.True(t, res4.Created, "another summary is asked anew")
			requirePendingFrom(t, &other, res4.Approval)
			require.Equal(t, a.Episode+2, res4.Approval.Episode)
		})
	}
	for _, st := range []oncekeystore.ApprovalStatus{oncekeystore.ApprovalPending, oncekeystore.ApprovalApproved, oncekeystore.ApprovalDenied, oncekeystore.ApprovalTimedOut} {
		t.Run("other fingerprint "+string(st), func(t *testing.T) {
			first := approvalParams()
			first.Token = "worker-1"
			a := requestNew(t, s, first)
			if st != oncekeystore.ApprovalPending {
				a = decide(t, s, a, st)
			}
			other := *first
			other.Token, other.Fingerprint, other.Summary = "worker-2", strings.Repeat("cd", 32), "refund 1.00 EUR on order 43"
			noToken := other
			noToken.Token = ""
			res := request(t, s, &noToken)
			require.False(t, res.Created, "a request without a token never asks anew another fingerprint's approval")
			requireSameApproval(t, a, res.Approval)
			res = request(t, s, &other)
			if st == oncekeystore.ApprovalPending || st == oncekeystore.ApprovalApproved {
				require.False(t, res.Created, "a pending or approved approval of another fingerprint stands")
				requireSameApproval(t, a, res.Approval)
				return
			}
			require.True(t, res.Created, "a refused call of other arguments blocks no other call of the key")
			requirePendingFrom(t, &other, res.Approval)
			require.Equal(t, a.Episode+1, res.Approval.Episode)
		})
	}
	t.Run("denied", func(t *testing.T) {
		old := approvalParams()
		a := decide(t, s, requestNew(t, s, old), oncekeystore.ApprovalDenied)
		w := *old
		w.Token, w.Summary = "worker-1", "another summary"
		res := request(t, s, &w)
		require.False(t, res.Created, "a denial stands")
		requireSameApproval(t, a, res.Approval)
	})
}

// A timed-out approval is asked anew by the next request: a new pending episode, with the new
// request's fields and timeout and no trace of the old decision.
func testApprovalTimedOut(t *testing.T, s oncekeystore.ApprovalStore) {
	p := approvalParams()
	first := requestNew(t, s, p)
	to := decision(first, oncekeystore.ApprovalTimedOut)
	to.DecidedBy, to.Reason = "oncekey (approval timeout)", ""
	timedOut, err := s.DecideApproval(ctxT(t), to)
	require.NoError(t, err)
	require.Equal(t, oncekeystore.ApprovalTimedOut, timedOut.Status)
	require.Equal(t, "oncekey (approval timeout)", timedOut.DecidedBy)

	q := *p
	q.WorkflowID, q.StepID, q.Summary, q.Timeout = "wf-2", "again", "refund 120.00 EUR on order 42 (asked again)", 2*time.Hour
	res := request(t, s, &q)
	require.True(t, res.Created, "a timed-out approval is asked anew")
	second := res.Approval
	requirePendingFrom(t, &q, second)
	require.Equal(t, int64(2), second.Episode)
	require.False(t, second.RequestedAt.Before(timedOut.DecidedAt))
	requireSameApproval(t, second, getApproval(t, s, p.Tenant, p.OperationKey))

	// Pending again: shared as any pending approval.
	res = request(t, s, p)
	require.False(t, res.Created)
	requireSameApproval(t, second, res.Approval)
}

// An approval of another fingerprint is another call under the same key: RequestApproval returns
// it unchanged, whatever its state, and the caller refuses the call as a mismatch.
func testApprovalFingerprint(t *testing.T, s oncekeystore.ApprovalStore) {
	for _, st := range []oncekeystore.ApprovalStatus{oncekeystore.ApprovalPending, oncekeystore.ApprovalApproved, oncekeystore.ApprovalDenied, oncekeystore.ApprovalTimedOut} {
		p := approvalParams()
		a := requestNew(t, s, p)
		if st != oncekeystore.ApprovalPending {
			a = decide(t, s, a, st)
		}
		q := *p
		q.Fingerprint = strings.Repeat("cd", 32)
		res := request(t, s, &q)
		require.False(t, res.Created, "a request of another fingerprint changes nothing (%s)", st)
		requireSameApproval(t, a, res.Approval)
		require.Equal(t, p.Fingerprint, res.Approval.Fingerprint)
		requireSameApproval(t, a, getApproval(t, s, p.Tenant, p.OperationKey))
	}
}

// An approval's namespace and tool are never changed by a request: one of another namespace or
// tool is returned unchanged, whatever its state (a timed-out one or one past retention too, which
// a request of its own namespace and tool asks anew), and the caller refuses the call.
func testApprovalNamespaceTool(t *testing.T, s oncekeystore.ApprovalStore) {
	for _, st := range []oncekeystore.ApprovalStatus{oncekeystore.ApprovalPending, oncekeystore.ApprovalApproved, oncekeystore.ApprovalTimedOut} {
		p := approvalParams()
		a := requestNew(t, s, p)
		if st != oncekeystore.ApprovalPending {
			d := decision(a, st)
			d.Retention = 100 * time.Millisecond
			var err error
			a, err = s.DecideApproval(ctxT(t), d)
			require.NoError(t, err)
		}
		otherNS, otherTool := *p, *p
		otherNS.Namespace, otherNS.WorkflowID, otherNS.Summary = "ns-b", "wf-b", "asked from another namespace"
		otherTool.Tool, otherTool.Summary = "wire", "asked for another tool"
		// Past retention a request of the approval's own namespace and tool would ask anew; the
		// others still change nothing.
		past := time.Now().Add(200 * time.Millisecond)
		for _, q := range []*oncekeystore.RequestApprovalParams{&otherNS, &otherTool} {
			res := request(t, s, q)
			require.False(t, res.Created, "a request of namespace %q, tool %q asked the %s approval of %q, %q anew",
				q.Namespace, q.Tool, st, p.Namespace, p.Tool)
			requireSameApproval(t, a, res.Approval)
		}
		if st == oncekeystore.ApprovalApproved {
			require.Eventually(t, func() bool { return time.Now().After(past) }, waitFor, pollEvery)
			for _, q := range []*oncekeystore.RequestApprovalParams{&otherNS, &otherTool} {
				res := request(t, s, q)
				require.False(t, res.Created, "past retention, a request of namespace %q, tool %q asked anew", q.Namespace, q.Tool)
				requireSameApproval(t, a, res.Approval)
			}
		}
		requireSameApproval(t, a, getApproval(t, s, p.Tenant, p.OperationKey))
		if st != oncekeystore.ApprovalPending {
			// The approval's own namespace and tool ask anew (after retention for the approved one).
			var res *oncekeystore.ApprovalResult
			require.Eventually(t, func() bool { res = request(t, s, p); return res.Created }, waitFor, pollEvery)
			requirePendingFrom(t, p, res.Approval)
			require.Equal(t, int64(2), res.Approval.Episode)
		}
	}
}

// A request whose answer was lost is repeated with its RequestToken: the repeat reports that it
// asked (Created) and changes nothing; a request with another token, or none, did not ask.
func testApprovalRequestToken(t *testing.T, s oncekeystore.ApprovalStore) {
	p := approvalParams()
	p.RequestToken = 0x5eed0001
	a := requestNew(t, s, p)
	for range 2 {
		res := request(t, s, p)
		require.True(t, res.Created, "the repeat of the request that asked says it asked")
		requireSameApproval(t, a, res.Approval)
	}
	for _, tok := range []int64{0x5eed0002, 0, -0x5eed0001} {
		q := *p
		q.RequestToken = tok
		res := request(t, s, &q)
		require.False(t, res.Created, "a request with token %#x did not ask", tok)
		requireSameApproval(t, a, res.Approval)
	}
	// Another summary or timeout in the repeat changes nothing either: it is the same request.
	q := *p
	q.Summary, q.Timeout = "another summary", time.Minute
	res := request(t, s, &q)
	require.True(t, res.Created)
	requireSameApproval(t, a, res.Approval)
	requireSameApproval(t, a, getApproval(t, s, p.Tenant, p.OperationKey))

	// Requests without a token never match each other.
	n := approvalParams()
	requestNew(t, s, n)
	require.False(t, request(t, s, n).Created, "without a token a repeat is another request")
}

// A repeat of the request that asked an episode reports it asked after a decision too, and
// changes nothing: a timed-out episode is not asked anew by its own repeat. A request with another
// token asks the timed-out approval anew, and from then on the first token's repeat did not ask.
func testApprovalRequestTokenDecided(t *testing.T, s oncekeystore.ApprovalStore) {
	for _, st := range []oncekeystore.ApprovalStatus{oncekeystore.ApprovalApproved, oncekeystore.ApprovalDenied, oncekeystore.ApprovalTimedOut} {
		p := approvalParams()
		p.RequestToken = 0x70ca1
		done := decide(t, s, requestNew(t, s, p), st)
		res := request(t, s, p)
		require.True(t, res.Created, "the repeat of the request that asked the %s episode", st)
		requireSameApproval(t, done, res.Approval)
		requireSameApproval(t, done, getApproval(t, s, p.Tenant, p.OperationKey))
		if st != oncekeystore.ApprovalTimedOut {
			continue
		}
		q := *p
		q.RequestToken = 0x70ca2
		second := requestNew(t, s, &q)
		require.Equal(t, int64(2), second.Episode)
		res = request(t, s, p)
		require.False(t, res.Created, "the first request's token did not ask episode 2")
		requireSameApproval(t, second, res.Approval)
		res = request(t, s, &q)
		require.True(t, res.Created)
		requireSameApproval(t, second, res.Approval)
	}
}

// A decided approval past its retention is asked anew, at the next episode, by a request with
// its fingerprint; a request with another fingerprint still changes nothing.
func testApprovalRetention(t *testing.T, s oncekeystore.ApprovalStore) {
	for _, st := range []oncekeystore.ApprovalStatus{oncekeystore.ApprovalApproved, oncekeystore.ApprovalDenied} {
		p := approvalParams()
		d := decision(requestNew(t, s, p), st)
		d.Retention = 300 * time.Millisecond
		done, err := s.DecideApproval(ctxT(t), d)
		require.NoError(t, err)
		require.Equal(t, 300*time.Millisecond, done.ExpiresAt.Sub(done.DecidedAt))

		other := *p
		other.Fingerprint = strings.Repeat("cd", 32)
		var res *oncekeystore.ApprovalResult
		require.Eventually(t, func() bool {
			res = request(t, s, &other)
			require.False(t, res.Created, "another fingerprint never asks anew")
			requireSameApproval(t, done, res.Approval)
			res = request(t, s, p)
			if !res.Created {
				requireSameApproval(t, done, res.Approval)
			}
			return res.Created
		}, waitFor, pollEvery, "the %s approval was never asked anew after its retention", st)
		requirePendingFrom(t, p, res.Approval)
		require.Equal(t, int64(2), res.Approval.Episode)
		require.False(t, res.Approval.RequestedAt.Before(done.ExpiresAt), "asked anew at %s, before the end of retention %s",
			res.Approval.RequestedAt, done.ExpiresAt)
	}
}

// ---- list ----------------------------------------------------------------------------------

func approvalKeys(as []*oncekeystore.Approval) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Tenant + "/" + a.OperationKey
	}
	return out
}

func listAllApprovals(t *testing.T, s oncekeystore.ApprovalStore, p oncekeystore.ListApprovalsParams) []*oncekeystore.Approval {
	t.Helper()
	return slices.Concat(pages(t, s.ListApprovals, p, approvalCursor, approvalPage)...)
}

// requireRequestOrder asserts as is in ListApprovals' order: (RequestedAt, Tenant, OperationKey).
func requireRequestOrder(t *testing.T, as []*oncekeystore.Approval) {
	t.Helper()
	for i := 1; i < len(as); i++ {
		a, b := as[i-1], as[i]
		require.True(t, a.RequestedAt.Before(b.RequestedAt) || (a.RequestedAt.Equal(b.RequestedAt) &&
			(a.Tenant < b.Tenant || (a.Tenant == b.Tenant && a.OperationKey < b.OperationKey))),
			"oldest request first: %s/%s at %s before %s/%s at %s", a.Tenant, a.OperationKey, a.RequestedAt, b.Tenant, b.OperationKey, b.RequestedAt)
	}
}

func testApprovalListFilters(t *testing.T, s oncekeystore.ApprovalStore) {
	statuses := []oncekeystore.ApprovalStatus{oncekeystore.ApprovalPending, oncekeystore.ApprovalApproved, oncekeystore.ApprovalPending,
		oncekeystore.ApprovalPending, oncekeystore.ApprovalDenied, oncekeystore.ApprovalTimedOut, oncekeystore.ApprovalDenied}
	requireListFilters(t, func(i int, tenant, tool, wf string) (string, string) {
		p := approvalParams()
		p.Tenant, p.Tool, p.WorkflowID = tenant, tool, wf
		a := requestNew(t, s, p)
		if statuses[i] != oncekeystore.ApprovalPending {
			decide(t, s, a, statuses[i])
		}
		return tenant + "/" + p.OperationKey, string(statuses[i])
	}, func(lp filter) []string {
		got := listAllApprovals(t, s, oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalStatus(lp.status), Tenant: lp.tenant, Tool: lp.tool, WorkflowID: lp.wf})
		requireRequestOrder(t, got)
		for _, a := range got {
			requireSameApproval(t, getApproval(t, s, a.Tenant, a.OperationKey), a)
		}
		return approvalKeys(got)
	})
}

func testApprovalListPagination(t *testing.T, s oncekeystore.ApprovalStore) {
	var made []*oncekeystore.Approval
	for range 23 {
		made = append(made, requestNew(t, s, approvalParams()))
	}
	got := requirePaged(t, pages(t, s.ListApprovals, oncekeystore.ListApprovalsParams{Limit: 5}, approvalCursor, approvalPage), 5, 5)
	require.ElementsMatch(t, approvalKeys(made), approvalKeys(got), "each approval exactly once")
	require.Len(t, got, 23)
	requireRequestOrder(t, got)

	// An approval asked anew while a caller pages moves to the end; no other is skipped or
	// repeated.
	lp := oncekeystore.ListApprovalsParams{Limit: 4}
	res, err := s.ListApprovals(ctxT(t), &lp)
	require.NoError(t, err)
	seen := approvalKeys(res.Approvals)
	moved := got[10]
	decide(t, s, moved, oncekeystore.ApprovalTimedOut)
	again := requestNew(t, s, &oncekeystore.RequestApprovalParams{Tenant: moved.Tenant, OperationKey: moved.OperationKey,
		Namespace: moved.Namespace, Tool: moved.Tool, Fingerprint: moved.Fingerprint, Timeout: time.Hour})
	require.Equal(t, int64(2), again.Episode)
	lp.Cursor = res.Next
	rest := listAllApprovals(t, s, lp)
	seen = append(seen, approvalKeys(rest)...)
	require.Len(t, seen, 23)
	require.ElementsMatch(t, approvalKeys(got), seen)
	require.Equal(t, moved.Tenant+"/"+moved.OperationKey, seen[len(seen)-1], "asked anew: listed last")

	// The default page size is 100.
	for range 80 {
		requestNew(t, s, approvalParams())
	}
	requireDefaultPages(t, s.ListApprovals, approvalCursor, approvalPage, 103)
}

func testApprovalListInvalid(t *testing.T, s oncekeystore.ApprovalStore) {
	requireListInvalid(t, s.ListApprovals, func(p *oncekeystore.ListApprovalsParams) *int { return &p.Limit }, approvalCursor)
	for _, st := range []oncekeystore.ApprovalStatus{"all", "applied", "bogus"} {
		_, err := s.ListApprovals(ctxT(t), &oncekeystore.ListApprovalsParams{Status: st})
		requireInvalid(t, err, "Status")
	}
}

// ---- tenants, purge, forget ----------------------------------------------------------------

func testApprovalTenants(t *testing.T, s oncekeystore.ApprovalStore) {
	a := approvalParams()
	b := *a
	b.Tenant, b.Fingerprint = "globex", strings.Repeat("99", 32)
	ra := requestNew(t, s, a)
	rb := requestNew(t, s, &b)
	require.Equal(t, int64(1), rb.Episode, "the same key under another tenant is another approval")
	decide(t, s, ra, oncekeystore.ApprovalApproved)
	require.Equal(t, oncekeystore.ApprovalPending, getApproval(t, s, "globex", a.OperationKey).Status)
	require.Equal(t, b.Fingerprint, getApproval(t, s, "globex", a.OperationKey).Fingerprint)
	require.Equal(t, oncekeystore.ApprovalApproved, getApproval(t, s, "acme", a.OperationKey).Status)

	// A decision is tenant-scoped: under a tenant without the key, there is nothing to decide.
	d := decision(rb, oncekeystore.ApprovalDenied)
	d.Tenant = "umbrella"
	_, err := s.DecideApproval(ctxT(t), d)
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
	requireNoApproval(t, s, "umbrella", a.OperationKey)
	require.Equal(t, oncekeystore.ApprovalPending, getApproval(t, s, "globex", a.OperationKey).Status)
	lr := listAllApprovals(t, s, oncekeystore.ListApprovalsParams{Tenant: "globex"})
	require.Equal(t, []string{"globex/" + a.OperationKey}, approvalKeys(lr))
}

// Purge deletes the decided approvals past their retention, in batches, and never a pending
// one, however old.
func testApprovalPurge(t *testing.T, s oncekeystore.ApprovalStore) {
	st := s.(oncekeystore.Store)
	var gone []*oncekeystore.Approval
	for i := range 7 {
		d := decision(requestNew(t, s, approvalParams()),
			[]oncekeystore.ApprovalStatus{oncekeystore.ApprovalApproved, oncekeystore.ApprovalDenied, oncekeystore.ApprovalTimedOut}[i%3])
		d.Retention = 200 * time.Millisecond
		a, err := s.DecideApproval(ctxT(t), d)
		require.NoError(t, err)
		gone = append(gone, a)
	}
	pp := approvalParams()
	pp.Timeout = 100 * time.Millisecond // past its deadline soon: it reads timed out, and no decision is written to purge
	pending := requestNew(t, s, pp)
	kept := decide(t, s, requestNew(t, s, approvalParams()), oncekeystore.ApprovalApproved)
	// A record beside them: the record steps of Purge leave it alone.
	rp := params(oncekeystore.Effectful)
	rec := acquire(t, st, rp)

	total := purgeUntil(t, st, 3, func(total oncekeystore.PurgeResult) bool { return total.ApprovalsDeleted >= 7 })
	require.Equal(t, int64(7), total.ApprovalsDeleted, "the decided approvals past retention, each once")
	require.Zero(t, total.Tombstoned, "no record was past retention")
	require.Zero(t, total.Deleted)
	for _, a := range gone {
		requireNoApproval(t, s, a.Tenant, a.OperationKey)
	}
	requireOverdueOf(t, pending, getApproval(t, s, pending.Tenant, pending.OperationKey))
	requireSameApproval(t, kept, getApproval(t, s, kept.Tenant, kept.OperationKey))
	requireSame(t, rec, get(t, st, rp.Tenant, rp.OperationKey))

	// Batches of at most BatchSize, each reported.
	for range 5 {
		d := decision(requestNew(t, s, approvalParams()), oncekeystore.ApprovalDenied)
		d.Retention = 100 * time.Millisecond
		_, err := s.DecideApproval(ctxT(t), d)
		require.NoError(t, err)
	}
	last := approvalParams()
	d := decision(requestNew(t, s, last), oncekeystore.ApprovalDenied)
	d.Retention = 100 * time.Millisecond
	lastDone, err := s.DecideApproval(ctxT(t), d)
	require.NoError(t, err)
	// Once the last one is past retention (a request of it asks anew), all six were: asking anew
	// turned it pending again, so five are left for Purge.
	require.Eventually(t, func() bool { return request(t, s, last).Created }, waitFor, pollEvery)
	require.NotEqual(t, lastDone.Episode, getApproval(t, s, last.Tenant, last.OperationKey).Episode)
	var progress []oncekeystore.PurgeResult
	res, err := st.Purge(ctxT(t), &oncekeystore.PurgeParams{BatchSize: 2, Progress: func(r oncekeystore.PurgeResult) { progress = append(progress, r) }})
	require.NoError(t, err)
	require.Equal(t, int64(5), res.ApprovalsDeleted)
	require.GreaterOrEqual(t, res.Batches, 3)
	require.Len(t, progress, res.Batches)
	prev := int64(0)
	for _, pr := range progress {
		require.LessOrEqual(t, pr.ApprovalsDeleted-prev, int64(2), "a batch deletes at most BatchSize approvals")
		prev = pr.ApprovalsDeleted
	}
	require.Equal(t, oncekeystore.ApprovalPending, getApproval(t, s, last.Tenant, last.OperationKey).Status)
}

func testApprovalForget(t *testing.T, s oncekeystore.ApprovalStore) {
	st := s.(oncekeystore.Store)
	var keep []*oncekeystore.RequestApprovalParams
	for i := range 5 {
		p := approvalParams()
		a := requestNew(t, s, p)
		if i%2 == 0 {
			decide(t, s, a, oncekeystore.ApprovalApproved)
		}
		q := *p
		q.Tenant = "globex"
		requestNew(t, s, &q)
		keep = append(keep, &q)
	}
	rp := params(oncekeystore.Effectful)
	acquire(t, st, rp)
	res, err := st.Forget(ctxT(t), &oncekeystore.ForgetParams{Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Deleted, "the tenant's one record")
	require.Equal(t, int64(5), res.ApprovalsDeleted, "the tenant's five approvals")
	for _, q := range keep {
		requireNoApproval(t, s, "acme", q.OperationKey)
		require.Equal(t, oncekeystore.ApprovalPending, getApproval(t, s, "globex", q.OperationKey).Status)
	}
	requireForgotten(t, st, "acme")
}

// ---- exact storage and bad input -----------------------------------------------------------

func testApprovalTextFields(t *testing.T, s oncekeystore.ApprovalStore) {
	odd := `O'Brien "quoted" \back\slash\\ \x00 $1 %s _% ; DROP TABLE x; -- Ünïcødé 漢字 🙂 ` + "\t\n\r"
	long := strings.Repeat("é'\"\\%_ü漢字🙂", 10*1024/19+1)
	for _, v := range []string{odd, long} {
		p := approvalParams()
		p.Tenant = "tenant " + v
		p.OperationKey = newKey() + v
		p.Namespace, p.Tool, p.WorkflowID, p.StepID = "ns "+v, "tool "+v, "wf "+v, "step "+v
		p.Summary = "summary " + v
		if len(p.Summary) > oncekeystore.MaxApprovalSummaryBytes {
			p.Summary = odd
		}
		a := requestNew(t, s, p)
		requirePendingFrom(t, p, a)
		requireSameApproval(t, a, getApproval(t, s, p.Tenant, p.OperationKey))
		d := decision(a, oncekeystore.ApprovalDenied)
		d.DecidedBy, d.Reason = "by "+v, "reason "+v
		out, err := s.DecideApproval(ctxT(t), d)
		require.NoError(t, err)
		require.Equal(t, "by "+v, out.DecidedBy)
		require.Equal(t, "reason "+v, out.Reason)
		requireSameApproval(t, out, getApproval(t, s, p.Tenant, p.OperationKey))
		lr := listAllApprovals(t, s, oncekeystore.ListApprovalsParams{Tenant: p.Tenant, Tool: p.Tool, WorkflowID: p.WorkflowID})
		require.Equal(t, []string{p.Tenant + "/" + p.OperationKey}, approvalKeys(lr))
		requireSameApproval(t, out, lr[0])
	}
	// A summary of exactly MaxApprovalSummaryBytes is kept whole.
	p := approvalParams()
	p.Summary = strings.Repeat("漢", oncekeystore.MaxApprovalSummaryBytes/3) + strings.Repeat("x", oncekeystore.MaxApprovalSummaryBytes%3)
	require.Len(t, p.Summary, oncekeystore.MaxApprovalSummaryBytes)
	require.Equal(t, p.Summary, requestNew(t, s, p).Summary)
}

func testApprovalInvalidParams(t *testing.T, s oncekeystore.ApprovalStore) {
	ctx := ctxT(t)
	requireRefusedTexts(t, approvalParams,
		func(p *oncekeystore.RequestApprovalParams) error { _, err := s.RequestApproval(ctx, p); return err },
		func(p *oncekeystore.RequestApprovalParams) error {
			_, err := s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: p.Tenant, OperationKey: p.OperationKey})
			return err
		})
	for field, mut := range map[string]func(p *oncekeystore.RequestApprovalParams){
		"Summary": func(p *oncekeystore.RequestApprovalParams) {
			p.Summary = strings.Repeat("x", oncekeystore.MaxApprovalSummaryBytes+1)
		},
		"Timeout": func(p *oncekeystore.RequestApprovalParams) { p.Timeout = 0 },
	} {
		p := approvalParams()
		mut(p)
		_, err := s.RequestApproval(ctx, p)
		requireInvalid(t, err, field)
		if p.OperationKey != "" && strings.TrimSpace(p.Tenant) != "" {
			requireNoApproval(t, s, p.Tenant, p.OperationKey)
		}
	}
	a := requestNew(t, s, approvalParams())
	for field, mut := range map[string]func(d *oncekeystore.DecideApprovalParams){
		"Tenant":    func(d *oncekeystore.DecideApprovalParams) { d.Tenant = "" },
		"Episode":   func(d *oncekeystore.DecideApprovalParams) { d.Episode = 0 },
		"Status":    func(d *oncekeystore.DecideApprovalParams) { d.Status = oncekeystore.ApprovalPending },
		"DecidedBy": func(d *oncekeystore.DecideApprovalParams) { d.DecidedBy = "bad\x00" },
		"Retention": func(d *oncekeystore.DecideApprovalParams) { d.Retention = -time.Second },
	} {
		d := decision(a, oncekeystore.ApprovalApproved)
		mut(d)
		_, err := s.DecideApproval(ctx, d)
		requireInvalid(t, err, field)
	}
	for _, st := range []oncekeystore.ApprovalStatus{"", "applied", "bogus"} {
		_, err := s.DecideApproval(ctx, decision(a, st))
		requireInvalid(t, err, "Status")
	}
	requireSameApproval(t, a, getApproval(t, s, a.Tenant, a.OperationKey))

	missing := *a
	missing.OperationKey = newKey()
	_, err := s.DecideApproval(ctx, decision(&missing, oncekeystore.ApprovalApproved))
	require.ErrorIs(t, err, oncekeystore.ErrNotFound)
	requireNoApproval(t, s, a.Tenant, missing.OperationKey)
	_, err = s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: a.Tenant})
	requireInvalid(t, err, "OperationKey")
}

func testApprovalContextCanceled(t *testing.T, s oncekeystore.ApprovalStore) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := approvalParams()
	_, err := s.RequestApproval(ctx, p)
	require.Error(t, err)
	require.True(t, errors.Is(err, context.Canceled), "got %v", err)
	requireNoApproval(t, s, p.Tenant, p.OperationKey)
}
