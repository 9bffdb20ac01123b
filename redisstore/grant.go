package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/redisstore/internal/lua"
)

var _ oncekey.GrantStore = (*Store)(nil)

// decodeGrants reads the reply {now, fields of lua.GrantFields per grant...} of GetGrants, each
// grant as it reads at now.
func decodeGrants(v []any) ([]*oncekey.Grant, error) {
	n := len(lua.GrantFields)
	if len(v) < 1 || (len(v)-1)%n != 0 {
		return nil, fmt.Errorf("grants reply of %d values", len(v))
	}
	now, err := strconv.ParseInt(str(v[0]), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("grants reply: server time %q: %w", str(v[0]), err)
	}
	var out []*oncekey.Grant
	for i := 1; i < len(v); i += n {
		f := v[i : i+n]
		d := fields{f: f, what: "grant"}
		g := &oncekey.Grant{ID: str(f[0]), Namespace: str(f[1]), Tenant: str(f[2]), Tool: str(f[3]), WorkflowID: str(f[4]), Rule: str(f[5]),
			CreatedBy: str(f[6]), Reason: str(f[7]), CreatedAt: d.at(8), ExpiresAt: d.at(9), RevokedAt: d.at(10), RevokedBy: str(f[11])}
		if d.bad != nil {
			return nil, d.bad
		}
		g.ReadAsOf(time.UnixMicro(now))
		out = append(out, g)
	}
	return out, nil
}

// getGrants reads the grants ids (none: all of them, oldest first).
func (s *Store) getGrants(ctx context.Context, op string, ids ...string) ([]*oncekey.Grant, error) {
	keys := lua.GrantKeys(s.prefix, "")
	args := []any{lua.GrantBase(s.prefix) + ":g:"}
	for _, id := range ids {
		args = append(args, id)
	}
	v, err := s.run(ctx, op, "", lua.GetGrants, keys[1:], args...)
	if err != nil {
		return nil, err
	}
	gs, err := decodeGrants(v)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return gs, nil
}

// CreateGrant implements oncekey.GrantStore in one script, on the server's clock.
func (s *Store) CreateGrant(ctx context.Context, p *oncekey.CreateGrantParams) (*oncekey.Grant, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	id := oncekey.NewGrantID()
	if _, err := s.run(ctx, "create grant", id, lua.CreateGrant, lua.GrantKeys(s.prefix, id),
		id, p.Namespace, p.Tenant, p.Tool, p.WorkflowID, p.Rule, p.CreatedBy, p.Reason, p.Duration.Microseconds()); err != nil {
		return nil, err
	}
	return s.GetGrant(ctx, id)
}

// GetGrant implements oncekey.GrantStore.
func (s *Store) GetGrant(ctx context.Context, id string) (*oncekey.Grant, error) {
	const op = "get grant"
	if id == "" {
		return nil, fmt.Errorf("redisstore: %s: %w", op, oncekey.ErrNotFound)
	}
	gs, err := s.getGrants(ctx, op, id)
	if err != nil {
		return nil, err
	}
	if len(gs) == 0 {
		return nil, fmt.Errorf("redisstore: %s %s: %w", op, id, oncekey.ErrNotFound)
	}
	return gs[0], nil
}

// ListGrants implements oncekey.GrantStore: every grant read in one script, filtered here.
func (s *Store) ListGrants(ctx context.Context, p *oncekey.ListGrantsParams) ([]*oncekey.Grant, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	gs, err := s.getGrants(ctx, "list grants")
	if err != nil {
		return nil, err
	}
	return p.Page(gs), nil
}

// RevokeGrant implements oncekey.GrantStore: it sets the grant's revoke marker in every bucket
// (one pipeline; a marker outlives the grant's expiry by a day), then writes the revoke on the
// grant itself. ApproveByGrant checks the marker of its bucket in the script that decides, so
// once RevokeGrant returns no approval is recorded under the grant.
func (s *Store) RevokeGrant(ctx context.Context, p *oncekey.RevokeGrantParams) (*oncekey.Grant, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "revoke grant"
	g, err := s.GetGrant(ctx, p.ID)
	if err != nil || g.Status != oncekey.GrantActive {
		return g, err
	}
	ttl := (time.Until(g.ExpiresAt) + 24*time.Hour).Milliseconds()
	calls := make([]call, len(s.bases))
	for i, b := range s.bases {
		calls[i] = call{lua.MarkRevoked, []string{lua.GrantMark(b, p.ID)}, []any{ttl}}
	}
	if _, err := s.runAll(ctx, op, calls); err != nil {
		return nil, err
	}
	if _, err := s.run(ctx, op, p.ID, lua.RevokeGrant, lua.GrantKeys(s.prefix, p.ID)[:1], p.RevokedBy); err != nil {
		return nil, err
	}
	return s.GetGrant(ctx, p.ID)
}

// ApproveByGrant implements oncekey.GrantStore: the grant is read (its scope and expiry never
// change), and one script in the approval's bucket checks the revoke marker, the expiry on the
// server's clock and the approval, and decides.
func (s *Store) ApproveByGrant(ctx context.Context, p *oncekey.ApproveByGrantParams) (*oncekey.Approval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "approve by grant"
	g, err := s.GetGrant(ctx, p.GrantID)
	var gr *oncekey.Grant
	switch {
	case err == nil:
		gr = g
	case !errors.Is(err, oncekey.ErrNotFound):
		return nil, err
	}
	wrapNA := func(e *oncekey.GrantNotActiveError) error {
		return fmt.Errorf("redisstore: %s %s: %w", op, p.OperationKey, e)
	}
	if gr == nil || (gr.WorkflowID != "" && gr.WorkflowID != p.WorkflowID) {
		ap, err := s.GetApproval(ctx, &oncekey.GetParams{Tenant: p.Tenant, OperationKey: p.OperationKey})
		if err != nil {
			return nil, err
		}
		return nil, wrapNA(oncekey.NotActive(p.GrantID, gr, ap.Namespace, ap.Tenant, ap.Tool, p.WorkflowID))
	}
	keys := s.layout.ApprovalKeys(p.Tenant, p.OperationKey)
	mark := lua.GrantMark(s.layout.Bucket(p.Tenant, p.OperationKey), p.GrantID)
	v, err := s.run(ctx, op, p.OperationKey, lua.ApproveByGrant, []string{keys[0], keys[3], mark},
		p.Tenant, p.OperationKey, p.Episode, p.Token, gr.ID, gr.CreatedBy, oncekey.GrantReason(gr.ID), p.Retention.Microseconds(),
		gr.ExpiresAt.UnixMicro(), gr.Namespace, gr.Tenant, gr.Tool)
	if err != nil {
		return nil, err
	}
	a, err := readApproval(op, p.OperationKey, v)
	if err != nil {
		return nil, err
	}
	switch str(v[0]) {
	case "R":
		g, err := s.GetGrant(ctx, p.GrantID)
		if err != nil {
			return nil, err
		}
		if g.Status == oncekey.GrantActive {
			g.Status = oncekey.GrantRevoked // the revoke is under way: its marker is set
		}
		return nil, wrapNA(&oncekey.GrantNotActiveError{GrantID: p.GrantID, Grant: g, Reason: "revoked"})
	case "X":
		gr.Status = oncekey.GrantExpired
		return nil, wrapNA(&oncekey.GrantNotActiveError{GrantID: p.GrantID, Grant: gr, Reason: "expired"})
	case "O":
		return nil, wrapNA(&oncekey.GrantNotActiveError{GrantID: p.GrantID, Grant: gr, Reason: "another scope"})
	}
	if err := refusedDecision(op, p.OperationKey, str(v[0]), p.Episode, a); err != nil {
		return nil, err
	}
	return a, nil
}
