package oncekeystore

import (
	"time"
)

// NearDeadlineShare is the share of a request's whole wait (Deadline - RequestedAt) that counts
// as nearing its deadline: the last quarter (6h of a 24h Timeout, 1h of 4h).
const NearDeadlineShare = 4

// NearDeadline reports whether a is pending and, at now, within the last quarter of its wait
// (NearDeadlineShare): a person should decide it soon, or it is timed out (or escalated, with
// ApprovalPolicy.Escalation). metrics.ApprovalsNearDeadline counts such requests; `oncekey
// approvals` and the inbox mark them.
func (a *Approval) NearDeadline(now time.Time) bool {
	if a.Status != ApprovalPending || !now.Before(a.Deadline) {
		return false
	}
	return a.Deadline.Sub(now) <= a.Deadline.Sub(a.RequestedAt)/NearDeadlineShare
}
