package oncekey

import "time"

// ApprovalEscalation says what happens to a request nobody decided within ApprovalPolicy.Timeout
// when it should not simply be timed out: it is escalated to To, with the reason recorded by the
// approval workflow (its query, its current details and its history), counted
// (metrics.ApprovalsEscalated), and waits Timeout more; still undecided then, it is timed out as
// any, and the reason it is recorded with names the escalation.
type ApprovalEscalation struct {
	// To names who the escalated request is for ("finance-leads"): shown by the approval
	// workflow's query and details and in the timeout's reason. Required.
	To string
	// Timeout is how much longer the escalated request waits for a decision. Required, positive.
	Timeout time.Duration
}

// RequestTimeout returns how long a request of a waits in all before it is timed out: Timeout
// (DefaultApprovalTimeout when zero), plus Escalation.Timeout with an escalation. The worker
// asks the store for this deadline.
func (a *ApprovalPolicy) RequestTimeout() time.Duration {
	t := a.Timeout
	if t <= 0 {
		t = DefaultApprovalTimeout
	}
	if e := a.Escalation; e != nil && e.Timeout > 0 {
		t += e.Timeout
	}
	return t
}
