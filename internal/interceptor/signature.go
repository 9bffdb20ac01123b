package interceptor

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/metrics"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// Signed decisions at the gate (Options.TrustList): an approval that authorises a call lets it
// run only while the signed decision stored with it verifies against the trust list as it is
// now (a key revoked since, or no longer trusted for the call's tenant or tool, stops it) and
// is the statement of exactly that approval (reconcile.ApprovalStatement): its key, tenant,
// namespace, tool, episode, request token and fingerprint, decision, decider, reason and
// message. An approval recorded by a worker without the trust list, written to the store by
// hand, or decided under a standing grant carries none, and authorises nothing.

// signedApproval returns nil when the worker has no trust list or the decision stored with ap
// verifies; otherwise the call's refusal, logged and counted (metrics.DecisionsRefused). For a
// call scheduled as an edit, ap is the original's approval, replaced by the edit, whose signed
// statement (approve_edited) names the edited arguments' digest, checked when it was recorded.
// An approval decided under a standing grant is left to grantStands, which never lets it stand
// under a trust list: the worker then asks a person anew (the request supersedes the grant).
func (c *call) signedApproval(ctx context.Context, ap *oncekeystore.Approval) error {
	tl := c.root.opts.TrustList
	if n := c.policy.Approval.RequiredSigners(); n > 1 {
		return c.cosignedApproval(ctx, tl, ap, n)
	}
	if tl == nil || ap.GrantID != "" {
		return nil
	}
	signed, err := decisionsig.Decode(ap.Signature)
	if err == nil {
		var digest string
		if signed != nil {
			digest = signed.Statement.ArgumentsDigest
		}
		var want decisionsig.Statement
		if want, err = reconcile.ApprovalStatement(ap, digest); err != nil {
			err = &decisionsig.Error{Reason: decisionsig.ReasonUnsigned, Detail: err.Error()}
		} else {
			_, err = tl.Verify(signed, want)
		}
	}
	if err == nil {
		return nil
	}
	var se *decisionsig.Error
	if !errors.As(err, &se) {
		se = &decisionsig.Error{Reason: decisionsig.ReasonBadSignature, Detail: err.Error()}
	}
	activity.GetLogger(ctx).Warn("oncekey: an approved call did not run: its approval's signature does not verify against the trust list. "+
		"Nothing ran; see the approval with `oncekey show`, and have a trusted key decide its next request",
		"tool", c.tool, "key_prefix", keyPrefix(c.key), "reason", string(se.Reason), "key_id", se.KeyID, "error", se.Error())
	metrics.Tagged(c.metricsHandler(ctx), c.tool, c.op.Tenant, c.root.opts.MetricsTenantTag).
		WithTags(map[string]string{metrics.TagReason: string(se.Reason)}).Counter(metrics.DecisionsRefused).Inc(1)
	c.outcome = oncekey.OutcomeRejected
	d := c.details(reasonNotApproved, false)
	return c.refusal(fmt.Sprintf("oncekey: %s did not run: the approval of %s is not signed by a key the worker trusts for it (%s); nothing ran. "+
		"See it with `%s`", c.tool, ap.OperationKey, se.Reason, shell.Show(ap.OperationKey).Flag("--tenant", c.op.Tenant)), oncekey.ErrTypeApproval, d)
}

// cosignedApproval is signedApproval for a policy that asks for n > 1 signers
// (oncekey.ApprovalPolicy.Signers): nil only when the approval's stored signatures, its partial
// approvals and its decision, re-verified against the trust list as it is now, name n different
// trusted signers (reconcile.ApprovalSigners); otherwise the call's refusal, logged and counted
// (metrics.DecisionsRefused, reason too_few_signers). An approval decided under a standing grant,
// or with edited arguments, counts no signer here. Without a trust list the call fails as a
// configuration error.
func (c *call) cosignedApproval(ctx context.Context, tl *decisionsig.TrustList, ap *oncekeystore.Approval, n int) error {
	if tl == nil {
		return c.configError(&oncekey.SignersNeedTrustListError{Tool: c.tool, Signers: n})
	}
	got := reconcile.ApprovalSigners(tl, ap)
	if got >= n {
		return nil
	}
	activity.GetLogger(ctx).Warn("oncekey: an approved call did not run: its approval is not signed by enough different trusted signers. "+
		"Nothing ran; see the approval with `oncekey show`, and have the signers the policy asks for decide its next request",
		"tool", c.tool, "key_prefix", keyPrefix(c.key), "signers", got, "signers_required", n)
	metrics.Tagged(c.metricsHandler(ctx), c.tool, c.op.Tenant, c.root.opts.MetricsTenantTag).
		WithTags(map[string]string{metrics.TagReason: reasonTooFewSigners}).Counter(metrics.DecisionsRefused).Inc(1)
	c.outcome = oncekey.OutcomeRejected
	d := c.details(reasonNotApproved, false)
	return c.refusal(fmt.Sprintf("oncekey: %s did not run: the approval of %s has %d of the %d different signers the worker trusts that its policy asks for; nothing ran. "+
		"See it with `%s`", c.tool, ap.OperationKey, got, n, shell.Show(ap.OperationKey).Flag("--tenant", c.op.Tenant)), oncekey.ErrTypeApproval, d)
}

// reasonTooFewSigners is the reason label of metrics.DecisionsRefused for an approval with fewer
// different trusted signers than its policy asks for.
const reasonTooFewSigners = "too_few_signers"

// signedGrant reports whether grant g may cover calls as far as signatures go: always without a
// trust list; with one, only when the signed statement of its making verifies against the list
// as it is now and is exactly g (reconcile.GrantStatement: scope, rule, duration, maker, reason).
// An unsigned grant, one by a key revoked since or not trusted for the call's tenant and tool
// covers nothing, logged and counted (metrics.DecisionsRefused); the call asks a person.
func (c *call) signedGrant(ctx context.Context, g *oncekeystore.Grant) bool {
	tl := c.root.opts.TrustList
	if tl == nil {
		return true
	}
	signed, err := decisionsig.Decode(g.Signature)
	if err == nil {
		_, err = tl.Verify(signed, reconcile.GrantStatement(g))
	}
	if err == nil {
		return true
	}
	var se *decisionsig.Error
	if !errors.As(err, &se) {
		se = &decisionsig.Error{Reason: decisionsig.ReasonBadSignature, Detail: err.Error()}
	}
	activity.GetLogger(ctx).Warn("oncekey: a standing grant covers nothing: it is not signed by a key the trust list trusts for it; the call asks a person. "+
		"Make the grant again with `oncekey grants add --sign-key FILE`, or revoke it",
		"tool", c.tool, "grant", g.ID, "reason", string(se.Reason), "key_id", se.KeyID, "error", se.Error())
	metrics.Tagged(c.metricsHandler(ctx), c.tool, c.op.Tenant, c.root.opts.MetricsTenantTag).
		WithTags(map[string]string{metrics.TagReason: string(se.Reason)}).Counter(metrics.DecisionsRefused).Inc(1)
	return false
}

// signedRevocation checks, under a trust list, the signature of the revocation of grant g (a
// revoked grant an approval was recorded under): a revocation that is unsigned, or not signed
// by a key trusted for grant_revoke on the grant's tenant and tool, or not the statement of
// exactly this revocation (reconcile.RevocationStatement: the grant's ID, scope and who
// revoked it), is refused as a decision: logged and counted (metrics.DecisionsRefused), so an
// operator learns that someone without a trusted key revoked it. The grant covers nothing all
// the same: taking authority away never waits for a signature.
func (c *call) signedRevocation(ctx context.Context, g *oncekeystore.Grant) {
	tl := c.root.opts.TrustList
	if tl == nil {
		return
	}
	signed, err := decisionsig.Decode(g.RevocationSignature)
	if err == nil {
		_, err = tl.Verify(signed, reconcile.RevocationStatement(g, g.RevokedBy))
	}
	if err == nil {
		return
	}
	var se *decisionsig.Error
	if !errors.As(err, &se) {
		se = &decisionsig.Error{Reason: decisionsig.ReasonBadSignature, Detail: err.Error()}
	}
	activity.GetLogger(ctx).Warn("oncekey: a standing grant was revoked without a signature the trust list trusts; it covers nothing all the same. "+
		"Revoke grants with `oncekey grants revoke --sign-key FILE`, and find out who revoked this one",
		"tool", c.tool, "grant", g.ID, "revoked_by", g.RevokedBy, "reason", string(se.Reason), "key_id", se.KeyID, "error", se.Error())
	metrics.Tagged(c.metricsHandler(ctx), c.tool, c.op.Tenant, c.root.opts.MetricsTenantTag).
		WithTags(map[string]string{metrics.TagReason: string(se.Reason)}).Counter(metrics.DecisionsRefused).Inc(1)
}
