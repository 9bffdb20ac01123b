package interceptor

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"

	"github.com/oncekey/oncekey/oncekeystore"
)

// Standing grants on the worker. A call that needs approval and is covered by an active grant
// (oncekeystore.GrantStore) is approved by the worker itself: it writes its request as for any
// call, then decides it under the grant (GrantStore.ApproveByGrant, which checks the grant again
// in the same step as it writes the decision), and runs the call without waiting. Whether a grant
// covers the call is decided here only, from the operation the worker derived: the call's
// namespace, tenant, tool and workflow, and its arguments document (what the body receives)
// against the grant's rule, which must also fit the tool's input type in this worker's Registry.
// Nothing the workflow sends names a grant. An approval recorded under a grant authorises the
// call only while that grant is active: the worker reads the grant again before the claim and
// under it, right before the effect; revoked or expired, the call is asked anew.

// grantStore returns the worker's store as a GrantStore, or nil when it keeps no grants.
func (c *call) grantStore() oncekeystore.GrantStore {
	gs, _ := c.root.opts.Store.(oncekeystore.GrantStore)
	return gs
}

// covers reports whether g, as read, covers this call: active, its scope names the call's
// namespace, tenant, tool and workflow, signed by a trusted key when the worker has a trust list
// (signedGrant), and its rule fits the tool's input type and matches the call's arguments.
func (c *call) covers(ctx context.Context, g *oncekeystore.Grant) bool {
	if g == nil || g.Status != oncekeystore.GrantActive || !g.Scope(c.op.Namespace, c.op.Tenant, c.tool, c.op.WorkflowID) {
		return false
	}
	if !c.signedGrant(ctx, g) {
		return false
	}
	if err := c.root.opts.Registry.CheckGrantRule(c.tool, g.Rule); err != nil {
		activity.GetLogger(ctx).Warn("oncekey: a standing grant's rule does not fit the tool; it covers nothing",
			"tool", c.tool, "grant", g.ID, "error", err.Error())
		return false
	}
	rule, err := oncekeystore.ParseGrantRule(g.Rule)
	return err == nil && rule.Match(c.args)
}

// grantStands reports whether an approval that authorises the call still does as far as grants
// go: decided by a person (no GrantID), or under a grant that still covers the call.
func (c *call) grantStands(ctx context.Context, ap *oncekeystore.Approval) (bool, error) {
	if ap.GrantID == "" {
		return true, nil
	}
	gs := c.grantStore()
	if gs == nil {
		return false, nil
	}
	g, err := gs.GetGrant(ctx, ap.GrantID)
	switch {
	case errors.Is(err, oncekeystore.ErrNotFound):
		return false, nil
	case err != nil:
		return false, c.storeFailed("get grant", err)
	case g.Status == oncekeystore.GrantRevoked:
		c.signedRevocation(ctx, g)
		return false, nil
	}
	return c.covers(ctx, g), nil
}

// coveringGrant returns the oldest active grant that covers the call, or nil. It reads the
// active grants of the call's scope (namespace, tenant, tool) only, page after page.
func (c *call) coveringGrant(ctx context.Context, gs oncekeystore.GrantStore) (*oncekeystore.Grant, error) {
	p := &oncekeystore.ListGrantsParams{Namespace: c.op.Namespace, Tenant: c.op.Tenant, Tool: c.tool, Status: oncekeystore.GrantActive, Limit: oncekeystore.MaxListLimit}
	for {
		res, err := gs.ListGrants(ctx, p)
		if err != nil {
			return nil, c.storeFailed("list grants", err)
		}
		for _, g := range res.Grants {
			if c.covers(ctx, g) {
				return g, nil
			}
		}
		if res.Next == "" {
			return nil, nil
		}
		p.Cursor = res.Next
	}
}

// approveByGrant decides ap, the pending request this attempt just wrote (its token), under a
// grant that covers the call, and returns the approval as decided; ap unchanged when no grant
// covers the call or the grant stopped covering it meanwhile (revoked in between: a person
// decides then).
func (c *call) approveByGrant(ctx context.Context, ap *oncekeystore.Approval) (*oncekeystore.Approval, error) {
	gs := c.grantStore()
	if gs == nil || c.policy.Approval.RequiredSigners() > 1 {
		// A grant is one person's decision: it approves no request that needs more signers.
		return ap, nil
	}
	g, err := c.coveringGrant(ctx, gs)
	if err != nil || g == nil {
		return ap, err
	}
	got, err := gs.ApproveByGrant(ctx, &oncekeystore.ApproveByGrantParams{Tenant: ap.Tenant, OperationKey: ap.OperationKey, Episode: ap.Episode,
		Token: ap.Token, GrantID: g.ID, WorkflowID: c.op.WorkflowID, Retention: c.policy.Retention})
	var (
		na       *oncekeystore.GrantNotActiveError
		conflict *oncekeystore.ApprovalConflictError
		stale    *oncekeystore.StaleDecisionError
	)
	switch {
	case errors.As(err, &conflict), errors.As(err, &stale):
		// Decided or asked anew meanwhile (by a person, or another attempt): the gate's refusal
		// says what stands, and the workflow side waits for the request that does.
		return ap, nil
	case errors.As(err, &na):
		activity.GetLogger(ctx).Info("oncekey: the standing grant stopped covering the call before it was approved; a person decides",
			"tool", c.tool, "key_prefix", keyPrefix(c.key), "grant", g.ID, "reason", na.Reason)
		return ap, nil
	case err != nil:
		return nil, c.storeFailed("approve by grant", err)
	}
	activity.GetLogger(ctx).Info("oncekey: approved under a standing grant", "tool", c.tool, "key_prefix", keyPrefix(c.key),
		"grant", g.ID, "granted_by", g.CreatedBy)
	return got, nil
}
