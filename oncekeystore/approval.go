package oncekeystore

import (
	"context"
	"time"
)

// MaxApprovalSummaryBytes is the most of ApprovalPolicy.Summary's text that is stored and shown;
// a longer summary is cut at a UTF-8 boundary and ends with "…".
const MaxApprovalSummaryBytes = 500

// ApprovalStatus is the state of an approval request.
type ApprovalStatus string

const (
	// ApprovalPending: asked, no decision yet.
	ApprovalPending ApprovalStatus = "pending"
	// ApprovalApproved: a person approved; the call may run (Policy.Authorize still decides).
	ApprovalApproved ApprovalStatus = "approved"
	// ApprovalDenied: a person denied; the call and its repeats within retention are rejected.
	ApprovalDenied ApprovalStatus = "denied"
	// ApprovalTimedOut: nobody decided within ApprovalPolicy.Timeout; the waiting call was
	// rejected, and the next call of the operation asks again (a new episode).
	ApprovalTimedOut ApprovalStatus = "timed_out"
)

// Valid reports whether s is one of the ApprovalStatus constants.
func (s ApprovalStatus) Valid() bool {
	switch s {
	case ApprovalPending, ApprovalApproved, ApprovalDenied, ApprovalTimedOut, ApprovalReplaced:
		return true
	}
	return false
}

// Decided reports whether s is a decision (approved, denied, timed out or replaced).
func (s ApprovalStatus) Decided() bool { return s.Valid() && s != ApprovalPending }

// Approval is the durable record of the approval of one operation key. Arguments are never
// stored; Summary is what the policy chose to show.
type Approval struct {
	Tenant       string
	OperationKey string
	// Namespace is the Temporal namespace of the workflow that asked. oncekey's approval
	// activities refuse to act on an approval for a workflow of another namespace.
	Namespace   string
	Tool        string
	Fingerprint string
	WorkflowID  string
	StepID      string
	Summary     string
	Status      ApprovalStatus
	// Episode numbers the requests of the key: 1 for the first, one more for each request asked
	// anew after a timed-out one. A decision names the episode it was made for
	// (DecideApprovalParams.Episode), so a decision delivered twice cannot land on a later request.
	Episode int64
	// RequestedAt is when this episode was asked (store clock); Deadline is when it times out.
	RequestedAt time.Time
	Deadline    time.Time
	// DecidedAt, DecidedBy and Reason say when, by whom (self-asserted unless the decision path
	// records the caller's identity) and why; zero while pending.
	DecidedAt time.Time
	DecidedBy string
	Reason    string
	// ExpiresAt is the end of retention, counted from the decision: after it the approval is
	// deleted by Purge and the next call asks anew. Zero while pending (a pending approval
	// never expires unseen: its Deadline decides it first).
	ExpiresAt time.Time
	// Token is the request token the worker minted for the request that asked this episode
	// (RequestApprovalParams.Token); a decision must carry it (DecideApprovalParams.Token). ""
	// for an approval asked under the earlier protocol, by the approval workflow from its input:
	// the interceptor never runs a call on such an approval, and asks anew.
	Token string
	// ModelMessage is what the person who decided said to the model (DecideApprovalParams.
	// ModelMessage): plain text, at most MaxModelMessageBytes, carried into the ToolResult the
	// model reads. Reason, which may hold operator detail, never reaches the model.
	ModelMessage string
	// ChangesRequested: the denial asks the model for other arguments (the call may be proposed
	// again with them) rather than to stop.
	ChangesRequested bool
	// EditOf is, on the approval of a call a person approved with edited arguments, the
	// operation key of the call it replaced; "" otherwise.
	EditOf string
	// EditedAs is, on a replaced approval (ApprovalReplaced), the operation key of the edit that
	// runs instead (EditKey); "" otherwise.
	EditedAs string
	// GrantID names the standing grant that approved this episode (GrantStore.ApproveByGrant);
	// DecidedBy is then who made the grant. "" for a person's decision.
	GrantID string
	// Signature is the signed statement of the decision (DecideApprovalParams.Signature), opaque
	// to the store (decisionsig.Signed's JSON); nil for a decision that was not signed and while
	// pending. A new episode clears it.
	Signature []byte
	// Cosignatures are the signed statements of the approvals recorded while the request waited
	// for more signers (ApprovalPolicy.Signers; DecideApprovalParams with Status ApprovalPending),
	// oldest first, opaque to the store; they stay with the approval once it is decided. The
	// worker counts the distinct trusted signers among them and Signature. A new episode clears
	// them.
	Cosignatures [][]byte
}

// ApprovalTimeoutDecider is Approval.DecidedBy of a request nobody decided before its Deadline
// (the approval workflow records its timeouts as decided by it too: workflows.TimeoutDecider).
const ApprovalTimeoutDecider = "oncekey (approval timeout)"

// ApprovalOverdueReason is Approval.Reason of a request a store reads as timed out because its
// Deadline passed while it was pending (Approval.Overdue).
const ApprovalOverdueReason = "nobody decided before the deadline"

// Overdue reports whether a is pending and its Deadline has passed at now (the store's clock).
// Stores read an overdue approval as timed out at its Deadline (ReadAsOf), whether or not an
// approval workflow recorded the timeout: a request nobody waits on (made by a call scheduled
// around the interceptor) never holds its key past its deadline.
func (a *Approval) Overdue(now time.Time) bool {
	return a.Status == ApprovalPending && !now.Before(a.Deadline)
}

// ReadAsOf sets a, when it is overdue at now, to how every ApprovalStore method returns it:
// Status ApprovalTimedOut, DecidedAt its Deadline, DecidedBy ApprovalTimeoutDecider, Reason
// ApprovalOverdueReason (ExpiresAt stays zero until a decision is written for it). A store
// that keeps no clock-judged state of its own calls it on each approval it returns.
func (a *Approval) ReadAsOf(now time.Time) {
	if a.Overdue(now) {
		a.Status, a.DecidedAt, a.DecidedBy, a.Reason = ApprovalTimedOut, a.Deadline, ApprovalTimeoutDecider, ApprovalOverdueReason
	}
}

// ApprovalStore is implemented by stores that keep approvals (pgstore, memstore, redisstore). A
// worker whose Registry has a Policy.Approval needs a Store that implements it; the plugin
// refuses to start otherwise. Implementations must pass storetest.RunApprovals (storetest.Run
// runs it for them).
type ApprovalStore interface {
	// RequestApproval asks for approval of p.OperationKey. With no approval for the key (or one
	// past its retention) it creates a pending one at episode 1 (or the next episode), Deadline =
	// now + p.Timeout on the store's clock, and returns it with Created true. A pending, approved
	// or denied approval is returned unchanged (Created false); a timed-out one becomes a new
	// pending episode (Created true). A request with a p.Token also asks anew (a new pending
	// episode with its token and summary, Created true) a pending or approved approval of its
	// fingerprint that has no Token (asked under the earlier protocol) or another Summary (the
	// person saw other words than the worker derives now), and a denied or timed-out approval of
	// another fingerprint (a refused call of other arguments blocks no other call of the key); a
	// denial of its own fingerprint stands. A repeat of the request that asked the current episode
	// (the same non-zero p.RequestToken) returns the approval unchanged with Created true,
	// whatever was decided since. Otherwise it never changes an approval whose Fingerprint
	// differs from p.Fingerprint: it returns it unchanged, and the caller refuses the call as a
	// fingerprint mismatch. Nor does it ever change an approval's Namespace or Tool: one whose
	// Namespace or Tool differs from p's is returned unchanged (Created false), timed out or past
	// retention too, and the caller refuses the call as another namespace's or tool's approval
	// (oncekey's activities fail it with a non-retryable activities.ErrTypeForeignRecord error).
	// A pending approval past its Deadline (Approval.Overdue) is timed out for all of this, and
	// is returned as it reads (Approval.ReadAsOf), as by every method of the interface.
	RequestApproval(ctx context.Context, p *RequestApprovalParams) (*ApprovalResult, error)
	// DecideApproval records a decision on the pending approval at p.Episode asked by the
	// request p.Token names. An approval that is not pending gets an *ApprovalConflictError
	// carrying the approval as it is; another episode or another Token gets *StaleDecisionError.
	// No approval: ErrNotFound. A decision other than ApprovalTimedOut on an overdue approval
	// (Approval.Overdue) does not land: the store writes the timeout it reads as (ReadAsOf, with
	// ExpiresAt now + p.Retention) and returns *ApprovalConflictError carrying it.
	DecideApproval(ctx context.Context, p *DecideApprovalParams) (*Approval, error)
	// GetApproval returns the approval of (tenant, key) or ErrNotFound.
	GetApproval(ctx context.Context, p *GetParams) (*Approval, error)
	// ListApprovals pages approvals, oldest request first, filtered by the params' non-zero
	// fields; the status filter compares the status as it reads (an overdue approval is timed
	// out, not pending).
	ListApprovals(ctx context.Context, p *ListApprovalsParams) (*ListApprovalsResult, error)
}

// RequestApprovalParams are the arguments of ApprovalStore.RequestApproval.
type RequestApprovalParams struct {
	Tenant, OperationKey string
	Namespace            string
	Tool                 string
	Fingerprint          string
	WorkflowID, StepID   string
	Summary              string
	// RequestToken identifies this request. The request that asks an episode records its token;
	// a RequestApproval repeated with the same non-zero token while the approval is at that
	// episode returns it unchanged with Created true, whether it is still pending or was decided
	// since (a timed-out one is not asked anew by its own repeat). That makes a request whose
	// answer was lost (an error after the store may have written) safe to repeat and still learn
	// that it asked. Callers pass a non-zero value that is the same for the repeats of one
	// request and new for each request they mean: oncekey's RequestApproval activity derives it
	// from its workflow ID, run ID and activity ID, the same across the activity's retries.
	// Defaults to 0: the store picks a random token, and a repeat of the call is another request.
	RequestToken int64
	// Token is the request's token, minted by the worker (the interceptor) for each request it
	// makes, and stored with the episode the request asks (Approval.Token). It fences decisions:
	// a DecideApproval must name it. The interceptor runs a call only on an approval with a
	// Token, which only a worker writes. "" is the earlier protocol's request (see
	// RequestApproval for what a request with a Token asks anew).
	Token string
	// Timeout is the time a new episode waits for a decision. Required.
	Timeout time.Duration
	// EditOf is the operation key of the call this request's call replaces (Approval.EditOf):
	// set only by oncekey's DecideApproval activity, for the approval of an edit. Defaults to "".
	EditOf string
	// SupersedeGrant, with a Token, names a grant the worker found revoked or expired: an
	// approved approval of p's fingerprint recorded under it (Approval.GrantID) is asked anew, as
	// a new pending episode. "" changes nothing.
	SupersedeGrant string
}

// ApprovalResult is what ApprovalStore.RequestApproval found or did.
type ApprovalResult struct {
	// Created: this request asked the approval's current episode, now or, for a repeat with
	// its RequestToken, the first time.
	Created bool
	// Approval is the approval after the request.
	Approval *Approval
}

// DecideApprovalParams are the arguments of ApprovalStore.DecideApproval.
type DecideApprovalParams struct {
	Tenant, OperationKey string
	// Episode is the approval's episode the decision was made for. Required.
	Episode int64
	// Token is the Token of the request the decision was made for (Approval.Token as read with
	// the episode); a decision for another request of the key is a *StaleDecisionError.
	Token string
	// Status is ApprovalApproved, ApprovalDenied, ApprovalTimedOut or ApprovalReplaced; or
	// ApprovalPending, which records a partial approval (one signer's, when the policy asks for
	// more: ApprovalPolicy.Signers): Signature, required then, is appended to
	// Approval.Cosignatures and nothing else changes (DecidedBy, Reason, ModelMessage,
	// ChangesRequested and EditedAs must be empty). It is fenced as a decision is; on an overdue
	// approval it writes nothing and is answered *ApprovalConflictError with the approval as it
	// reads (timed out).
	Status    ApprovalStatus
	DecidedBy string
	Reason    string
	// Retention is how long the decided approval is kept, from now. Required.
	Retention time.Duration
	// ModelMessage is recorded as Approval.ModelMessage (at most MaxModelMessageBytes of plain
	// text, ModelMessageProblem); ChangesRequested as Approval.ChangesRequested, with
	// ApprovalDenied only.
	ModelMessage     string
	ChangesRequested bool
	// EditedAs is the operation key of the edit that replaces the call: required with
	// ApprovalReplaced, and only with it.
	EditedAs string
	// Signature is stored as Approval.Signature: the decision's signed statement, opaque to the
	// store. Optional; not written when the store writes the timeout instead (a late decision).
	Signature []byte
}

// ListApprovalsParams are the arguments of ApprovalStore.ListApprovals. Zero fields do not filter.
type ListApprovalsParams struct {
	Status     ApprovalStatus
	Tenant     string
	Tool       string
	WorkflowID string
	// Cursor is ListApprovalsResult.Next of the previous page; "" starts at the beginning.
	Cursor string
	// Limit is the page size. Defaults to 100; at most 10,000.
	Limit int
}

// ListApprovalsResult is a page of approvals.
type ListApprovalsResult struct {
	Approvals []*Approval
	// Next is the cursor of the next page, "" after the last page.
	Next string
}

// ApprovalConflictError: a decision for an approval that is no longer pending. Approval is the
// approval as it is (who decided it, when, how). Nothing was written.
type ApprovalConflictError struct {
	Approval *Approval
}

func (e *ApprovalConflictError) Error() string {
	a := e.Approval
	if a == nil {
		return "oncekey: the approval is not pending"
	}
	s := "oncekey: the approval of " + a.OperationKey + " is already " + string(a.Status)
	if a.DecidedBy != "" {
		s += " by " + a.DecidedBy
	}
	if !a.DecidedAt.IsZero() {
		s += " at " + a.DecidedAt.UTC().Format(time.RFC3339)
	}
	return s + "; nothing was changed"
}
