package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/redisstore/internal/lua"
)

var _ oncekeystore.GrantStore = (*Store)(nil)

// decodeGrants reads the reply {now, reads, fields of lua.GrantFields per grant...} of the grant
// listing scripts, each grant as it reads at now, and counts the reads (grantReads).
func (s *Store) decodeGrants(v []any) ([]*oncekeystore.Grant, error) {
	n := len(lua.GrantFields)
	if len(v) < 2 || (len(v)-2)%n != 0 {
		return nil, fmt.Errorf("grants reply of %d values", len(v))
	}
	now, err := strconv.ParseInt(str(v[0]), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("grants reply: server time %q: %w", str(v[0]), err)
	}
	reads, _ := v[1].(int64)
	s.grantReads.Add(reads)
	var out []*oncekeystore.Grant
	for i := 2; i < len(v); i += n {
		f := v[i : i+n]
		d := fields{f: f, what: "grant"}
		g := &oncekeystore.Grant{ID: str(f[0]), Namespace: str(f[1]), Tenant: str(f[2]), Tool: str(f[3]), WorkflowID: str(f[4]), Rule: str(f[5]),
			CreatedBy: str(f[6]), Reason: str(f[7]), CreatedAt: d.at(8), ExpiresAt: d.at(9), RevokedAt: d.at(10), RevokedBy: str(f[11])}
		if sig := str(f[12]); sig != "" {
			g.Signature = []byte(sig)
		}
		if sig := str(f[13]); sig != "" {
			g.RevocationSignature = []byte(sig)
		}
		if d.bad != nil {
			return nil, d.bad
		}
		g.ReadAsOf(time.UnixMicro(now))
		out = append(out, g)
	}
	return out, nil
}

// grants runs a grant listing script and decodes its reply.
func (s *Store) grants(ctx context.Context, op string, script *redis.Script, keys []string, args ...any) ([]*oncekeystore.Grant, error) {
	v, err := s.run(ctx, op, "", script, keys, args...)
	if err != nil {
		return nil, err
	}
	gs, err := s.decodeGrants(v)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return gs, nil
}

// CreateGrant implements oncekeystore.GrantStore in one script, on the server's clock: the grant and
// its entries in every index.
func (s *Store) CreateGrant(ctx context.Context, p *oncekeystore.CreateGrantParams) (*oncekeystore.Grant, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	id := oncekeystore.NewGrantID()
	keys := []string{lua.GrantKey(s.prefix, id), lua.GrantIndex(s.prefix, "gall"), lua.GrantIndex(s.prefix, "gact"),
		lua.GrantIndex(s.prefix, "gs", p.Namespace, p.Tenant, p.Tool), lua.GrantIndex(s.prefix, "gn", p.Namespace),
		lua.GrantIndex(s.prefix, "gt", p.Tenant), lua.GrantIndex(s.prefix, "gpurge"), lua.GrantIndex(s.prefix, "ga", p.Namespace, p.Tenant)}
	if _, err := s.run(ctx, "create grant", id, lua.CreateGrant, keys,
		id, p.Namespace, p.Tenant, p.Tool, p.WorkflowID, p.Rule, p.CreatedBy, p.Reason, p.Duration.Microseconds(), p.KeepFor().Microseconds(), p.Signature); err != nil {
		return nil, err
	}
	return s.GetGrant(ctx, id)
}

// GetGrant implements oncekeystore.GrantStore.
func (s *Store) GetGrant(ctx context.Context, id string) (*oncekeystore.Grant, error) {
	const op = "get grant"
	if id == "" {
		return nil, fmt.Errorf("redisstore: %s: %w", op, oncekeystore.ErrNotFound)
	}
	// gall is not read: it names the grants' slot, so that a cluster runs the script there.
	gs, err := s.grants(ctx, op, lua.GetGrants, []string{lua.GrantIndex(s.prefix, "gall")}, lua.GrantBase(s.prefix)+":g:", id)
	if err != nil {
		return nil, err
	}
	if len(gs) == 0 {
		return nil, fmt.Errorf("redisstore: %s %s: %w", op, id, oncekeystore.ErrNotFound)
	}
	return gs[0], nil
}

// ListGrants implements oncekeystore.GrantStore in one script over the narrowest index for p's
// filters. The active grants are read from an index of those not revoked, by expiry: the
// scope's own (gs) when p names namespace, tenant and tool (the worker's lookup), which holds
// that scope's grants only; the namespace and tenant's (ga) when p names those two; else every
// scope's (gact); the page is then cut here. Other
// statuses walk the grants by creation time from the cursor, those of the tenant (gt), else of
// the namespace (gn), else all (gall), until the page is full.
func (s *Store) ListGrants(ctx context.Context, p *oncekeystore.ListGrantsParams) (*oncekeystore.ListGrantsResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "list grants"
	base := lua.GrantBase(s.prefix) + ":g:"
	if p.Status == oncekeystore.GrantActive {
		index := lua.GrantIndex(s.prefix, "gact")
		switch {
		case p.Namespace != "" && p.Tenant != "" && p.Tool != "":
			index = lua.GrantIndex(s.prefix, "gs", p.Namespace, p.Tenant, p.Tool)
		case p.Namespace != "" && p.Tenant != "":
			index = lua.GrantIndex(s.prefix, "ga", p.Namespace, p.Tenant)
		}
		gs, err := s.grants(ctx, op, lua.ListActive, []string{index}, base, p.Namespace, p.Tenant, p.Tool)
		if err != nil {
			return nil, err
		}
		return p.Page(gs), nil
	}
	index := lua.GrantIndex(s.prefix, "gall")
	switch {
	case p.Tenant != "":
		index = lua.GrantIndex(s.prefix, "gt", p.Tenant)
	case p.Namespace != "":
		index = lua.GrantIndex(s.prefix, "gn", p.Namespace)
	}
	after, err := p.After()
	if err != nil {
		return nil, err
	}
	at, id := "", ""
	if after != nil {
		at, id = strconv.FormatInt(after.CreatedAt.UnixMicro(), 10), after.ID
	}
	gs, err := s.grants(ctx, op, lua.ListWalk, []string{index}, base, p.Namespace, p.Tenant, p.Tool, string(p.Status), at, id, p.PageSize()+1)
	if err != nil {
		return nil, err
	}
	return p.Page(gs), nil
}

// markRevoked sets the revoke marker of g in every bucket (one pipeline; a marker outlives the
// grant's expiry by a day): from then on ApproveByGrant refuses under it.
func (s *Store) markRevoked(ctx context.Context, op string, g *oncekeystore.Grant) error {
	ttl := (time.Until(g.ExpiresAt) + 24*time.Hour).Milliseconds()
	calls := make([]call, len(s.bases))
	for i, b := range s.bases {
		calls[i] = call{lua.MarkRevoked, []string{lua.GrantMark(b, g.ID)}, []any{ttl}}
	}
	_, err := s.runAll(ctx, op, calls)
	return err
}

// RevokeGrant implements oncekeystore.GrantStore: it sets the grant's revoke marker in every bucket
// (one pipeline; a marker outlives the grant's expiry by a day), then writes the revoke on the
// grant itself, taking it out of the indexes of active grants. ApproveByGrant checks the marker of its bucket in the script that decides, so
// once RevokeGrant returns no approval is recorded under the grant.
func (s *Store) RevokeGrant(ctx context.Context, p *oncekeystore.RevokeGrantParams) (*oncekeystore.Grant, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "revoke grant"
	g, err := s.GetGrant(ctx, p.ID)
	if err != nil || g.Status != oncekeystore.GrantActive {
		return g, err
	}
	if err := s.markRevoked(ctx, op, g); err != nil {
		return nil, err
	}
	keys := []string{lua.GrantKey(s.prefix, p.ID), lua.GrantIndex(s.prefix, "gact"), lua.GrantIndex(s.prefix, "gs", g.Namespace, g.Tenant, g.Tool),
		lua.GrantIndex(s.prefix, "gpurge"), lua.GrantIndex(s.prefix, "ga", g.Namespace, g.Tenant)}
	if _, err := s.run(ctx, op, p.ID, lua.RevokeGrant, keys, p.RevokedBy, p.Signature); err != nil {
		return nil, err
	}
	return s.GetGrant(ctx, p.ID)
}

// ApproveByGrant implements oncekeystore.GrantStore: the grant is read (its scope and expiry never
// change), and one script in the approval's bucket checks the revoke marker, the expiry on the
// server's clock and the approval, and decides.
func (s *Store) ApproveByGrant(ctx context.Context, p *oncekeystore.ApproveByGrantParams) (*oncekeystore.Approval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "approve by grant"
	g, err := s.GetGrant(ctx, p.GrantID)
	var gr *oncekeystore.Grant
	switch {
	case err == nil:
		gr = g
	case !errors.Is(err, oncekeystore.ErrNotFound):
		return nil, err
	}
	wrapNA := func(e *oncekeystore.GrantNotActiveError) error {
		return fmt.Errorf("redisstore: %s %s: %w", op, p.OperationKey, e)
	}
	if gr == nil || (gr.WorkflowID != "" && gr.WorkflowID != p.WorkflowID) {
		ap, err := s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: p.Tenant, OperationKey: p.OperationKey})
		if err != nil {
			return nil, err
		}
		return nil, wrapNA(oncekeystore.NotActive(p.GrantID, gr, ap.Namespace, ap.Tenant, ap.Tool, p.WorkflowID))
	}
	keys := s.layout.ApprovalKeys(p.Tenant, p.OperationKey)
	mark := lua.GrantMark(s.layout.Bucket(p.Tenant, p.OperationKey), p.GrantID)
	v, err := s.run(ctx, op, p.OperationKey, lua.ApproveByGrant, []string{keys[0], keys[3], mark},
		p.Tenant, p.OperationKey, p.Episode, p.Token, gr.ID, gr.CreatedBy, oncekeystore.GrantReason(gr.ID), p.Retention.Microseconds(),
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
		if g.Status == oncekeystore.GrantActive {
			g.Status = oncekeystore.GrantRevoked // the revoke is under way: its marker is set
		}
		return nil, wrapNA(&oncekeystore.GrantNotActiveError{GrantID: p.GrantID, Grant: g, Reason: "revoked"})
	case "X":
		gr.Status = oncekeystore.GrantExpired
		return nil, wrapNA(&oncekeystore.GrantNotActiveError{GrantID: p.GrantID, Grant: gr, Reason: "expired"})
	case "O":
		return nil, wrapNA(&oncekeystore.GrantNotActiveError{GrantID: p.GrantID, Grant: gr, Reason: "another scope"})
	}
	if err := refusedDecision(op, p.OperationKey, str(v[0]), p.Episode, a); err != nil {
		return nil, err
	}
	return a, nil
}

// reindexGrants puts the grants an earlier version made, which it kept in gall only, into the
// indexes (lua.ReindexGrants), walking gall n at a time, and returns how many it put. Until
// then the worker's lookup does not find them (their calls wait for a person), Purge does not
// delete them and Forget does not find them: both run it first.
func (s *Store) reindexGrants(ctx context.Context, op string, n int) (int64, error) {
	var done int64
	for first := 0; ; first += n {
		v, err := s.run(ctx, op, "", lua.ReindexGrants, []string{lua.GrantIndex(s.prefix, "gall")}, lua.GrantBase(s.prefix), first, n)
		if err != nil {
			return done, err
		}
		if len(v) < 2 {
			return done, fmt.Errorf("redisstore: %s: reindex reply of %d values", op, len(v))
		}
		d, _ := v[0].(int64)
		looked, _ := v[1].(int64)
		done += d
		if looked < int64(n) {
			return done, nil
		}
	}
}

// purgeGrants deletes the grants that ended longer than their retention ago, n per script, and
// adds them to res.GrantsDeleted.
func (s *Store) purgeGrants(ctx context.Context, p *oncekeystore.PurgeParams, pace *oncekeystore.PurgePacer, res *oncekeystore.PurgeResult) error {
	n := p.Batch()
	if _, err := s.reindexGrants(ctx, "purge", n); err != nil {
		return err
	}
	for {
		start := time.Now()
		v, err := s.run(ctx, "purge", "", lua.PurgeGrants, []string{lua.GrantIndex(s.prefix, "gpurge")}, lua.GrantBase(s.prefix), n)
		if err != nil {
			return err
		}
		if len(v) < 2 {
			return fmt.Errorf("redisstore: purge: grants reply of %d values", len(v))
		}
		d, _ := v[0].(int64)
		if d > 0 {
			res.GrantsDeleted += d
			res.Batches++
			if p.Progress != nil {
				p.Progress(*res)
			}
		}
		if str(v[1]) == "1" {
			return nil
		}
		if err := pace.Pause(ctx, time.Since(start)); err != nil {
			return wrapErr("purge", "", err)
		}
	}
}

// forgetGrants ends and deletes every grant of the tenant: first the revoke marker of each
// active one in every bucket (so no approval is recorded under it once this returns, as for
// RevokeGrant), then the grants, forgetBatch per script. It returns how many it deleted.
func (s *Store) forgetGrants(ctx context.Context, tenant string) (int64, error) {
	if _, err := s.reindexGrants(ctx, "forget", forgetBatch); err != nil {
		return 0, err
	}
	// The tenant's grants by its own index (gt), whatever their status: the walk reads the
	// tenant's grants only.
	p := &oncekeystore.ListGrantsParams{Tenant: tenant, Limit: oncekeystore.MaxListLimit}
	for {
		res, err := s.ListGrants(ctx, p)
		if err != nil {
			return 0, err
		}
		for _, g := range res.Grants {
			if g.Status != oncekeystore.GrantActive {
				continue
			}
			if err := s.markRevoked(ctx, "forget", g); err != nil {
				return 0, err
			}
		}
		if res.Next == "" {
			break
		}
		p.Cursor = res.Next
	}
	var deleted int64
	for {
		v, err := s.run(ctx, "forget", "", lua.ForgetGrants, []string{lua.GrantIndex(s.prefix, "gt", tenant)}, lua.GrantBase(s.prefix), forgetBatch)
		if err != nil {
			return deleted, err
		}
		if len(v) < 2 {
			return deleted, fmt.Errorf("redisstore: forget: grants reply of %d values", len(v))
		}
		d, _ := v[0].(int64)
		deleted += d
		if str(v[1]) == "1" {
			return deleted, nil
		}
	}
}
