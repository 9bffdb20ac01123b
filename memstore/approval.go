package memstore

import (
	"context"
	"time"

	"github.com/oncekey/oncekey"
)

// viewApproval returns a copy of a for a caller, as it reads at now (an overdue one timed out).
func viewApproval(a *oncekey.Approval, now time.Time) *oncekey.Approval {
	c := *a
	c.ReadAsOf(now)
	return &c
}

// approvalPastRetention reports whether a is decided and past its retention at now: the next
// request asks anew, and Purge deletes it.
func approvalPastRetention(a *oncekey.Approval, now time.Time) bool {
	return a.Status != oncekey.ApprovalPending && !now.Before(a.ExpiresAt)
}

// askedOtherwise reports whether a worker's request p asks a, of its fingerprint, anew: a is
// pending or approved, and was asked without a token (the earlier protocol) or with another
// summary than p's; or a is approved under the grant p supersedes.
func askedOtherwise(a *oncekey.Approval, p *oncekey.RequestApprovalParams) bool {
	return p.Token != "" && (a.Status == oncekey.ApprovalPending || a.Status == oncekey.ApprovalApproved) &&
		(a.Token == "" || a.Summary != p.Summary || supersedes(a, p))
}

// refusedOtherCall reports whether a worker's request p asks anew a, of another fingerprint: a
// was denied, timed out or replaced, so it authorises nothing and blocks no other call of the
// key.
func refusedOtherCall(a *oncekey.Approval, p *oncekey.RequestApprovalParams) bool {
	return p.Token != "" && (a.Status == oncekey.ApprovalDenied || a.Status == oncekey.ApprovalTimedOut || a.Status == oncekey.ApprovalReplaced)
}

// RequestApproval implements oncekey.ApprovalStore.
func (s *Store) RequestApproval(ctx context.Context, p *oncekey.RequestApprovalParams) (*oncekey.ApprovalResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return locked(ctx, s, "request approval", p.OperationKey, func(now time.Time) (*oncekey.ApprovalResult, error) {
		return s.requestApproval(p, now), nil
	})
}

// requestApproval is RequestApproval under the lock, at now.
func (s *Store) requestApproval(p *oncekey.RequestApprovalParams, now time.Time) *oncekey.ApprovalResult {
	k := pk{p.Tenant, p.OperationKey}
	a, ok := s.approvals[k]
	var v *oncekey.Approval // a as it reads now: an overdue one timed out
	if ok {
		v = viewApproval(a, now)
	}
	switch {
	case !ok:
		a = &oncekey.Approval{Tenant: p.Tenant, OperationKey: p.OperationKey}
		s.approvals[k] = a
	case p.RequestToken != 0 && s.approvalTokens[k] == p.RequestToken:
		// The repeat of the request that asked the current episode: as it is, and it asked.
		return &oncekey.ApprovalResult{Created: true, Approval: v}
	case v.Namespace != p.Namespace, v.Tool != p.Tool,
		v.Fingerprint != p.Fingerprint && !refusedOtherCall(v, p),
		v.Fingerprint == p.Fingerprint && v.Status != oncekey.ApprovalTimedOut && !approvalPastRetention(v, now) && !askedOtherwise(v, p):
		// Another operation's approval, one of another namespace or tool (never changed), or one
		// pending or decided within retention: as it is.
		return &oncekey.ApprovalResult{Approval: v}
	}
	// A new episode: the first, or the next after a timed-out one or one past retention.
	*a = oncekey.Approval{
		Tenant: p.Tenant, OperationKey: p.OperationKey, Namespace: p.Namespace, Tool: p.Tool,
		Fingerprint: p.Fingerprint, WorkflowID: p.WorkflowID, StepID: p.StepID, Summary: p.Summary,
		Status: oncekey.ApprovalPending, Episode: a.Episode + 1,
		RequestedAt: now, Deadline: now.Add(p.Timeout), Token: p.Token, EditOf: p.EditOf,
	}
	s.approvalTokens[k] = p.RequestToken
	return &oncekey.ApprovalResult{Created: true, Approval: viewApproval(a, now)}
}

// DecideApproval implements oncekey.ApprovalStore.
func (s *Store) DecideApproval(ctx context.Context, p *oncekey.DecideApprovalParams) (*oncekey.Approval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "decide approval"
	return existing(ctx, s, s.approvals, op, p.Tenant, p.OperationKey, func(a *oncekey.Approval, now time.Time) (*oncekey.Approval, error) {
		switch {
		case a.Episode != p.Episode, a.Token != p.Token:
			return nil, wrap(op, p.OperationKey, &oncekey.StaleDecisionError{
				OperationKey: p.OperationKey, Epoch: p.Episode, Current: a.Episode, Status: oncekey.Status(viewApproval(a, now).Status)})
		case a.Overdue(now) && p.Status != oncekey.ApprovalTimedOut:
			// A person's decision after the deadline: the request timed out at it, and that is
			// what is written (with the decision's retention) and answered.
			a.ReadAsOf(now)
			a.ExpiresAt = now.Add(p.Retention)
			return nil, wrap(op, p.OperationKey, &oncekey.ApprovalConflictError{Approval: viewApproval(a, now)})
		case a.Status != oncekey.ApprovalPending:
			return nil, wrap(op, p.OperationKey, &oncekey.ApprovalConflictError{Approval: viewApproval(a, now)})
		}
		a.Status = p.Status
		a.DecidedAt = now
		a.DecidedBy = p.DecidedBy
		a.Reason = p.Reason
		a.ExpiresAt = now.Add(p.Retention)
		a.ModelMessage, a.ChangesRequested, a.EditedAs = p.ModelMessage, p.ChangesRequested, p.EditedAs
		return viewApproval(a, now), nil
	})
}

// ListApprovals implements oncekey.ApprovalStore. Approvals come in (RequestedAt, Tenant,
// OperationKey) order; an approval asked anew while a caller pages moves to the end.
func (s *Store) ListApprovals(ctx context.Context, p *oncekey.ListApprovalsParams) (*oncekey.ListApprovalsResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	as, next, err := list(ctx, s, "list approvals", s.approvals, p.After, viewApproval, func(a *oncekey.Approval) bool {
		return matches([]string{string(p.Status), p.Tenant, p.Tool, p.WorkflowID}, string(a.Status), a.Tenant, a.Tool, a.WorkflowID)
	}, lessApproval, p.PageSize(), oncekey.NextApprovalCursor)
	if err != nil {
		return nil, err
	}
	return &oncekey.ListApprovalsResult{Approvals: as, Next: next}, nil
}

// lessApproval orders approvals as ListApprovals returns them: (RequestedAt, Tenant,
// OperationKey).
func lessApproval(a, b *oncekey.Approval) bool {
	return oncekey.ApprovalCursor{RequestedAt: a.RequestedAt, Tenant: a.Tenant, OperationKey: a.OperationKey}.Before(b)
}

// GetApproval implements oncekey.ApprovalStore.
func (s *Store) GetApproval(ctx context.Context, p *oncekey.GetParams) (*oncekey.Approval, error) {
	return get(ctx, s, s.approvals, "get approval", p, viewApproval)
}

// purgeApprovals deletes at most n decided approvals past their retention and returns how many.
func (s *Store) purgeApprovals(n int) int {
	return sweep(s, s.approvals, n, func(k pk, a *oncekey.Approval, now time.Time) bool {
		if !approvalPastRetention(a, now) {
			return false
		}
		delete(s.approvals, k)
		delete(s.approvalTokens, k)
		return true
	})
}
