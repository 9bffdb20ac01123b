package memstore

import (
	"context"
	"time"

	"github.com/oncekey/oncekey/oncekeystore"
)

var _ oncekeystore.GrantStore = (*Store)(nil)

// supersedes reports whether the request p names the grant a was approved under as no longer
// live (oncekeystore.RequestApprovalParams.SupersedeGrant).
func supersedes(a *oncekeystore.Approval, p *oncekeystore.RequestApprovalParams) bool {
	return p.SupersedeGrant != "" && a.Status == oncekeystore.ApprovalApproved && a.GrantID == p.SupersedeGrant
}

// grant is a standing grant as the store keeps it: the grant and how long it is kept once it
// has ended (CreateGrantParams.Retention).
type grant struct {
	oncekeystore.Grant
	retention time.Duration
}

// purgeDue reports whether g ended (revoked, or expired) longer than its retention before now.
func (g *grant) purgeDue(now time.Time) bool {
	end := g.ExpiresAt
	if !g.RevokedAt.IsZero() {
		end = g.RevokedAt
	}
	return !now.Before(end.Add(g.retention))
}

// purgeGrants deletes at most n grants past their retention and returns how many.
func (s *Store) purgeGrants(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, done := s.clock(), 0
	for id, g := range s.grants {
		if done == n {
			break
		}
		if g.purgeDue(now) {
			delete(s.grants, id)
			done++
		}
	}
	return done
}

// forgetGrants deletes the tenant's grants, active ones included, and returns how many. The
// caller holds the lock.
func (s *Store) forgetGrants(tenant string) int64 {
	var n int64
	for id, g := range s.grants {
		if g.Tenant == tenant {
			delete(s.grants, id)
			n++
		}
	}
	return n
}

// viewGrant returns a copy of g for a caller, as it reads at now.
func viewGrant(g *grant, now time.Time) *oncekeystore.Grant {
	c := g.Grant
	c.Signature = cloneBytes(g.Signature)
	c.RevocationSignature = cloneBytes(g.RevocationSignature)
	c.ReadAsOf(now)
	return &c
}

// CreateGrant implements oncekeystore.GrantStore.
func (s *Store) CreateGrant(ctx context.Context, p *oncekeystore.CreateGrantParams) (*oncekeystore.Grant, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return locked(ctx, s, "create grant", "", func(now time.Time) (*oncekeystore.Grant, error) {
		if s.grants == nil {
			s.grants = make(map[string]*grant)
		}
		g := &grant{Grant: oncekeystore.Grant{ID: oncekeystore.NewGrantID(), Namespace: p.Namespace, Tenant: p.Tenant, Tool: p.Tool, WorkflowID: p.WorkflowID,
			Rule: p.Rule, CreatedBy: p.CreatedBy, Reason: p.Reason, CreatedAt: now, ExpiresAt: now.Add(p.Duration),
			Signature: cloneBytes(p.Signature)}, retention: p.KeepFor()}
		s.grants[g.ID] = g
		return viewGrant(g, now), nil
	})
}

// RevokeGrant implements oncekeystore.GrantStore.
func (s *Store) RevokeGrant(ctx context.Context, p *oncekeystore.RevokeGrantParams) (*oncekeystore.Grant, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "revoke grant"
	return locked(ctx, s, op, p.ID, func(now time.Time) (*oncekeystore.Grant, error) {
		g, ok := s.grants[p.ID]
		if !ok {
			return nil, wrap(op, p.ID, oncekeystore.ErrNotFound)
		}
		if viewGrant(g, now).Status == oncekeystore.GrantActive {
			g.RevokedAt, g.RevokedBy, g.RevocationSignature = now, p.RevokedBy, cloneBytes(p.Signature)
		}
		return viewGrant(g, now), nil
	})
}

// GetGrant implements oncekeystore.GrantStore.
func (s *Store) GetGrant(ctx context.Context, id string) (*oncekeystore.Grant, error) {
	const op = "get grant"
	return locked(ctx, s, op, id, func(now time.Time) (*oncekeystore.Grant, error) {
		g, ok := s.grants[id]
		if !ok {
			return nil, wrap(op, id, oncekeystore.ErrNotFound)
		}
		return viewGrant(g, now), nil
	})
}

// ListGrants implements oncekeystore.GrantStore.
func (s *Store) ListGrants(ctx context.Context, p *oncekeystore.ListGrantsParams) (*oncekeystore.ListGrantsResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return locked(ctx, s, "list grants", "", func(now time.Time) (*oncekeystore.ListGrantsResult, error) {
		all := make([]*oncekeystore.Grant, 0, len(s.grants))
		for _, g := range s.grants {
			all = append(all, viewGrant(g, now))
		}
		return p.Page(all), nil
	})
}

// ApproveByGrant implements oncekeystore.GrantStore: the grant is checked and the decision written
// under the store's lock, so a revoke lands before or after it.
func (s *Store) ApproveByGrant(ctx context.Context, p *oncekeystore.ApproveByGrantParams) (*oncekeystore.Approval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "approve by grant"
	return existing(ctx, s, s.approvals, op, p.Tenant, p.OperationKey, func(a *oncekeystore.Approval, now time.Time) (*oncekeystore.Approval, error) {
		var g *oncekeystore.Grant
		if raw, ok := s.grants[p.GrantID]; ok {
			g = viewGrant(raw, now)
		}
		if e := oncekeystore.NotActive(p.GrantID, g, a.Namespace, a.Tenant, a.Tool, p.WorkflowID); e != nil {
			return nil, wrap(op, p.OperationKey, e)
		}
		switch {
		case a.Episode != p.Episode, a.Token != p.Token:
			return nil, wrap(op, p.OperationKey, &oncekeystore.StaleDecisionError{
				OperationKey: p.OperationKey, Epoch: p.Episode, Current: a.Episode, Status: oncekeystore.Status(viewApproval(a, now).Status)})
		case a.Status != oncekeystore.ApprovalPending || a.Overdue(now):
			return nil, wrap(op, p.OperationKey, &oncekeystore.ApprovalConflictError{Approval: viewApproval(a, now)})
		}
		*a = oncekeystore.GrantApproval(*a, g, now, p.Retention)
		return viewApproval(a, now), nil
	})
}
