package memstore

import (
	"context"
	"time"

	"github.com/oncekey/oncekey/oncekeystore"
)

// viewApproval returns a copy of a for a caller, as it reads at now (an overdue one timed out).
func viewApproval(a *oncekeystore.Approval, now time.Time) *oncekeystore.Approval {
	c := *a
	c.Signature = cloneBytes(a.Signature)
	c.Cosignatures = nil
	for _, sig := range a.Cosignatures {
		c.Cosignatures = append(c.Cosignatures, cloneBytes(sig))
	}
	c.ReadAsOf(now)
	return &c
}

// approvalPastRetention reports whether a is decided and past its retention at now: the next
// request asks anew, and Purge deletes it.
func approvalPastRetention(a *oncekeystore.Approval, now time.Time) bool {
	return a.Status != oncekeystore.ApprovalPending && !now.Before(a.ExpiresAt)
}

// askedOtherwise reports whether a worker's request p asks a, of its fingerprint, anew: a is
// pending or approved, and was asked without a token (the earlier protocol) or with another
// summary than p's; or a is approved under the grant p supersedes.
func askedOtherwise(a *oncekeystore.Approval, p *oncekeystore.RequestApprovalParams) bool {
	return p.Token != "" && (a.Status == oncekeystore.ApprovalPending || a.Status == oncekeystore.ApprovalApproved) &&
		(a.Token == "" || a.Summary != p.Summary || supersedes(a, p))
}

// refusedOtherCall reports whether a worker's request p asks anew a, of another fingerprint: a
// was denied, timed out or replaced, so it authorises nothing and blocks no other call of the
// key.
func refusedOtherCall(a *oncekeystore.Approval, p *oncekeystore.RequestApprovalParams) bool {
	return p.Token != "" && (a.Status == oncekeystore.ApprovalDenied || a.Status == oncekeystore.ApprovalTimedOut || a.Status == oncekeystore.ApprovalReplaced)
}

// RequestApproval implements oncekeystore.ApprovalStore.
func (s *Store) RequestApproval(ctx context.Context, p *oncekeystore.RequestApprovalParams) (*oncekeystore.ApprovalResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return locked(ctx, s, "request approval", p.OperationKey, func(now time.Time) (*oncekeystore.ApprovalResult, error) {
		return s.requestApproval(p, now), nil
	})
}

// requestApproval is RequestApproval under the lock, at now.
func (s *Store) requestApproval(p *oncekeystore.RequestApprovalParams, now time.Time) *oncekeystore.ApprovalResult {
	k := pk{p.Tenant, p.OperationKey}
	a, ok := s.approvals[k]
	var v *oncekeystore.Approval // a as it reads now: an overdue one timed out
	if ok {
		v = viewApproval(a, now)
	}
	switch {
	case !ok:
		a = &oncekeystore.Approval{Tenant: p.Tenant, OperationKey: p.OperationKey}
		s.approvals[k] = a
	case p.RequestToken != 0 && s.approvalTokens[k] == p.RequestToken:
		// The repeat of the request that asked the current episode: as it is, and it asked.
		return &oncekeystore.ApprovalResult{Created: true, Approval: v}
	case v.Namespace != p.Namespace, v.Tool != p.Tool,
		v.Fingerprint != p.Fingerprint && !refusedOtherCall(v, p),
		v.Fingerprint == p.Fingerprint && v.Status != oncekeystore.ApprovalTimedOut && !approvalPastRetention(v, now) && !askedOtherwise(v, p):
		// Another operation's approval, one of another namespace or tool (never changed), or one
		// pending or decided within retention: as it is.
		return &oncekeystore.ApprovalResult{Approval: v}
	}
	// A new episode: the first, or the next after a timed-out one or one past retention.
	*a = oncekeystore.Approval{
		Tenant: p.Tenant, OperationKey: p.OperationKey, Namespace: p.Namespace, Tool: p.Tool,
		Fingerprint: p.Fingerprint, WorkflowID: p.WorkflowID, StepID: p.StepID, Summary: p.Summary,
		Status: oncekeystore.ApprovalPending, Episode: a.Episode + 1,
		RequestedAt: now, Deadline: now.Add(p.Timeout), Token: p.Token, EditOf: p.EditOf,
	}
	s.approvalTokens[k] = p.RequestToken
	return &oncekeystore.ApprovalResult{Created: true, Approval: viewApproval(a, now)}
}

// DecideApproval implements oncekeystore.ApprovalStore.
func (s *Store) DecideApproval(ctx context.Context, p *oncekeystore.DecideApprovalParams) (*oncekeystore.Approval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "decide approval"
	return existing(ctx, s, s.approvals, op, p.Tenant, p.OperationKey, func(a *oncekeystore.Approval, now time.Time) (*oncekeystore.Approval, error) {
		switch {
		case a.Episode != p.Episode, a.Token != p.Token:
			return nil, wrap(op, p.OperationKey, &oncekeystore.StaleDecisionError{
				OperationKey: p.OperationKey, Epoch: p.Episode, Current: a.Episode, Status: oncekeystore.Status(viewApproval(a, now).Status)})
		case p.Status == oncekeystore.ApprovalPending && a.Status == oncekeystore.ApprovalPending && !a.Overdue(now):
			// A partial approval: one more signer's signed statement; the request keeps waiting.
			a.Cosignatures = append(a.Cosignatures, cloneBytes(p.Signature))
			return viewApproval(a, now), nil
		case p.Status == oncekeystore.ApprovalPending:
			return nil, wrap(op, p.OperationKey, &oncekeystore.ApprovalConflictError{Approval: viewApproval(a, now)})
		case a.Overdue(now) && p.Status != oncekeystore.ApprovalTimedOut:
			// A person's decision after the deadline: the request timed out at it, and that is
			// what is written (with the decision's retention) and answered.
			a.ReadAsOf(now)
			a.ExpiresAt = now.Add(p.Retention)
			return nil, wrap(op, p.OperationKey, &oncekeystore.ApprovalConflictError{Approval: viewApproval(a, now)})
		case a.Status != oncekeystore.ApprovalPending:
			return nil, wrap(op, p.OperationKey, &oncekeystore.ApprovalConflictError{Approval: viewApproval(a, now)})
		}
		a.Status = p.Status
		a.DecidedAt = now
		a.DecidedBy = p.DecidedBy
		a.Reason = p.Reason
		a.ExpiresAt = now.Add(p.Retention)
		a.ModelMessage, a.ChangesRequested, a.EditedAs = p.ModelMessage, p.ChangesRequested, p.EditedAs
		a.Signature = cloneBytes(p.Signature)
		return viewApproval(a, now), nil
	})
}

// ListApprovals implements oncekeystore.ApprovalStore. Approvals come in (RequestedAt, Tenant,
// OperationKey) order; an approval asked anew while a caller pages moves to the end.
func (s *Store) ListApprovals(ctx context.Context, p *oncekeystore.ListApprovalsParams) (*oncekeystore.ListApprovalsResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	as, next, err := list(ctx, s, "list approvals", s.approvals, p.After, viewApproval, func(a *oncekeystore.Approval) bool {
		return matches([]string{string(p.Status), p.Tenant, p.Tool, p.WorkflowID}, string(a.Status), a.Tenant, a.Tool, a.WorkflowID)
	}, lessApproval, p.PageSize(), oncekeystore.NextApprovalCursor)
	if err != nil {
		return nil, err
	}
	return &oncekeystore.ListApprovalsResult{Approvals: as, Next: next}, nil
}

// lessApproval orders approvals as ListApprovals returns them: (RequestedAt, Tenant,
// OperationKey).
func lessApproval(a, b *oncekeystore.Approval) bool {
	return oncekeystore.ApprovalCursor{RequestedAt: a.RequestedAt, Tenant: a.Tenant, OperationKey: a.OperationKey}.Before(b)
}

// GetApproval implements oncekeystore.ApprovalStore.
func (s *Store) GetApproval(ctx context.Context, p *oncekeystore.GetParams) (*oncekeystore.Approval, error) {
	return get(ctx, s, s.approvals, "get approval", p, viewApproval)
}

// purgeApprovals deletes at most n decided approvals past their retention and returns how many.
func (s *Store) purgeApprovals(n int) int {
	return sweep(s, s.approvals, n, func(k pk, a *oncekeystore.Approval, now time.Time) bool {
		if !approvalPastRetention(a, now) {
			return false
		}
		delete(s.approvals, k)
		delete(s.approvalTokens, k)
		return true
	})
}
