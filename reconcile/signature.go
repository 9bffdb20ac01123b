package reconcile

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/oncekeystore"
)

// Signed decisions: a Decision or a Resolution may carry a decisionsig.Signed statement of
// exactly what it decides, which workers with a trust list (okworker.Options.TrustList) verify
// before they record it and, for an approval, again before they run the call. The statements are
// built here only, for the signer (SignDecision, SignResolution) and the verifier
// (DecisionStatement, ResolutionStatement, ApprovalStatement) alike.

// decisionKind is the decisionsig.Kind of a decision of kind k, with edited arguments or not.
func decisionKind(k DecisionKind, edited bool) (decisionsig.Kind, error) {
	switch {
	case k == Approve && edited:
		return decisionsig.ApproveEdited, nil
	case k == Approve:
		return decisionsig.Approve, nil
	case k == Deny:
		return decisionsig.Deny, nil
	case k == RequestChanges:
		return decisionsig.RequestChanges, nil
	}
	return "", fmt.Errorf("reconcile: %q is not a decision that can be signed", k)
}

// DecisionStatement returns the statement a signature on d must make for the approval ap, as
// the store holds its pending request: ap's namespace, tenant, operation key, tool, episode,
// request token and fingerprint, and d's kind (approve_edited with Arguments), the digest of its
// edited arguments, DecidedBy, Reason and Message. SignedAt is left zero. An error for a d whose
// kind cannot be signed or whose arguments are not JSON.
func DecisionStatement(ap *oncekeystore.Approval, d Decision) (decisionsig.Statement, error) {
	kind, err := decisionKind(d.Decision, len(d.Arguments) > 0)
	if err != nil {
		return decisionsig.Statement{}, err
	}
	digest, err := decisionsig.Digest(d.Arguments)
	if err != nil {
		return decisionsig.Statement{}, fmt.Errorf("reconcile: edited arguments: %w", err)
	}
	return decisionsig.Statement{Kind: kind, Namespace: ap.Namespace, Tenant: ap.Tenant, OperationKey: ap.OperationKey, Tool: ap.Tool,
		Episode: ap.Episode, RequestToken: ap.Token, Fingerprint: ap.Fingerprint, ArgumentsDigest: digest,
		DecidedBy: d.DecidedBy, Reason: d.Reason, Message: d.Message}, nil
}

// ApprovalStatement returns the statement the signed decision stored with ap (Approval.Signature)
// must make: DecisionStatement of the decision ap records (approved, replaced: approve_edited,
// denied, denied with changes requested). For a replaced approval the arguments' digest is not
// stored: argsDigest gives it (the signed statement's own, whose edit the worker checked when it
// recorded the decision). An error for an approval no person's decision made (pending, timed
// out, or decided under a standing grant).
func ApprovalStatement(ap *oncekeystore.Approval, argsDigest string) (decisionsig.Statement, error) {
	var d Decision
	switch {
	case ap.GrantID != "":
		return decisionsig.Statement{}, errors.New("reconcile: the approval was decided under a standing grant, not by a signed decision")
	case ap.Status == oncekeystore.ApprovalApproved:
		d.Decision = Approve
	case ap.Status == oncekeystore.ApprovalReplaced:
		d.Decision = Approve
	case ap.Status == oncekeystore.ApprovalDenied && ap.ChangesRequested:
		d.Decision = RequestChanges
	case ap.Status == oncekeystore.ApprovalDenied:
		d.Decision = Deny
	default:
		return decisionsig.Statement{}, fmt.Errorf("reconcile: an approval %s was not decided by a signed decision", ap.Status)
	}
	d.DecidedBy, d.Reason, d.Message = ap.DecidedBy, ap.Reason, ap.ModelMessage
	st, err := DecisionStatement(ap, d)
	if err != nil {
		return st, err
	}
	if ap.Status == oncekeystore.ApprovalReplaced {
		st.Kind, st.ArgumentsDigest = decisionsig.ApproveEdited, argsDigest
	}
	return st, nil
}

// SignDecision returns d with its Signature: DecisionStatement(ap, d) signed by s. ap is the
// approval as the store holds its pending request (`oncekey approvals`, ApprovalStore.GetApproval);
// d.Episode, when set, must be ap's.
func SignDecision(s decisionsig.Signer, ap *oncekeystore.Approval, d Decision) (Decision, error) {
	if ap == nil {
		return d, errors.New("reconcile: sign decision: no approval")
	}
	if d.Episode != 0 && d.Episode != ap.Episode {
		return d, &InvalidDecisionError{Field: "Episode", Reason: fmt.Sprintf("%d is not the approval's episode, %d", d.Episode, ap.Episode)}
	}
	st, err := DecisionStatement(ap, d)
	if err != nil {
		return d, err
	}
	d.Signature, err = encodeSigned(s, st)
	return d, err
}

// ResolutionStatement returns the statement a signature on r must make for the record rec
// (its namespace, tenant, operation key and tool): kind resolve, r's epoch, outcome, the digest
// of its result, its effect reference, note (as Reason) and ResolvedBy. SignedAt is left zero.
// An error for a result that is not JSON.
func ResolutionStatement(rec *oncekeystore.Record, r Resolution) (decisionsig.Statement, error) {
	digest, err := decisionsig.Digest(r.Result)
	if err != nil {
		return decisionsig.Statement{}, fmt.Errorf("reconcile: result: %w", err)
	}
	return decisionsig.Statement{Kind: decisionsig.Resolve, Namespace: rec.Namespace, Tenant: rec.Tenant, OperationKey: rec.OperationKey,
		Tool: rec.Tool, Epoch: r.Epoch, Outcome: string(r.Outcome), ResultDigest: digest, EffectReference: r.EffectReference,
		Reason: r.Note, DecidedBy: r.ResolvedBy}, nil
}

// SignResolution returns r with its Signature: ResolutionStatement(rec, r) signed by s. rec is
// the record as the store holds it (Store.Get); r.Epoch, when zero, is set to rec's.
func SignResolution(s decisionsig.Signer, rec *oncekeystore.Record, r Resolution) (Resolution, error) {
	if rec == nil {
		return r, errors.New("reconcile: sign resolution: no record")
	}
	if r.Epoch == 0 {
		r.Epoch = rec.Epoch
	}
	st, err := ResolutionStatement(rec, r)
	if err != nil {
		return r, err
	}
	r.Signature, err = encodeSigned(s, st)
	return r, err
}

func encodeSigned(s decisionsig.Signer, st decisionsig.Statement) (json.RawMessage, error) {
	signed, err := decisionsig.Sign(s, st)
	if err != nil {
		return nil, err
	}
	return signed.Encode()
}

// GrantStatement returns the statement a signature on the making of grant g must make: kind
// grant_create, its namespace, tenant, tool, workflow ID, rule, duration (from its CreatedAt to
// its ExpiresAt, in whole seconds), CreatedBy and Reason.
func GrantStatement(g *oncekeystore.Grant) decisionsig.Statement {
	return decisionsig.Statement{Kind: decisionsig.GrantCreate, Namespace: g.Namespace, Tenant: g.Tenant, Tool: g.Tool,
		WorkflowID: g.WorkflowID, Rule: g.Rule, DurationSeconds: int64(g.ExpiresAt.Sub(g.CreatedAt).Round(time.Second) / time.Second),
		DecidedBy: g.CreatedBy, Reason: g.Reason}
}

// SignGrant returns p with its Signature: GrantStatement of the grant p makes, signed by s. The
// grant's Duration must be whole seconds.
func SignGrant(s decisionsig.Signer, p oncekeystore.CreateGrantParams) (oncekeystore.CreateGrantParams, error) {
	if p.Duration%time.Second != 0 {
		return p, fmt.Errorf("reconcile: sign grant: its duration %s is not whole seconds", p.Duration)
	}
	st := GrantStatement(&oncekeystore.Grant{Namespace: p.Namespace, Tenant: p.Tenant, Tool: p.Tool, WorkflowID: p.WorkflowID,
		Rule: p.Rule, CreatedBy: p.CreatedBy, Reason: p.Reason, ExpiresAt: time.Time{}.Add(p.Duration)})
	var err error
	p.Signature, err = encodeSigned(s, st)
	return p, err
}

// AuditApproval re-verifies, from the stored approval alone, the signed decision kept with it
// (Approval.Signature): the signature, its key's trust at the statement's SignedAt
// (TrustList.Audit), and that the statement is exactly the decision ap records
// (ApprovalStatement). It returns the signed statement (nil, with no error, when ap carries
// none) and the entry of its key (zero when the list does not hold it); the error is a
// *decisionsig.Error, or ApprovalStatement's for an approval no person decided. `oncekey show`,
// `oncekey audit` and the inbox show its answer.
func AuditApproval(tl *decisionsig.TrustList, ap *oncekeystore.Approval) (*decisionsig.Signed, decisionsig.Entry, error) {
	return audit(tl, ap.Signature, func(s *decisionsig.Signed) (decisionsig.Statement, error) {
		return ApprovalStatement(ap, s.Statement.ArgumentsDigest)
	})
}

// AuditResolution is AuditApproval for the signed resolution sig kept with the record rec
// (SignatureStore.ResolutionSignature). The stored result is encoded for the workers, so the
// statement's result digest is taken as signed; every other member must be the record's.
func AuditResolution(tl *decisionsig.TrustList, rec *oncekeystore.Record, sig []byte) (*decisionsig.Signed, decisionsig.Entry, error) {
	return audit(tl, sig, func(s *decisionsig.Signed) (decisionsig.Statement, error) {
		r := Resolution{Epoch: rec.Epoch, Outcome: outcomeOf(rec.Status), EffectReference: rec.EffectReference,
			Note: rec.Note, ResolvedBy: rec.ResolvedBy}
		st, err := ResolutionStatement(rec, r)
		st.ResultDigest = s.Statement.ResultDigest
		return st, err
	})
}

// audit decodes sig, audits it against tl and compares its statement with want's.
func audit(tl *decisionsig.TrustList, sig []byte, want func(*decisionsig.Signed) (decisionsig.Statement, error)) (*decisionsig.Signed, decisionsig.Entry, error) {
	s, err := decisionsig.Decode(sig)
	if err != nil || s == nil {
		return nil, decisionsig.Entry{}, err
	}
	e, err := tl.Audit(s)
	if err == nil {
		var st decisionsig.Statement
		if st, err = want(s); err == nil {
			err = decisionsig.Mismatch(s, st)
		}
	}
	return s, e, err
}

// outcomeOf is the resolution outcome a settled record's status records.
func outcomeOf(st oncekeystore.Status) ResolutionOutcome {
	switch st {
	case oncekeystore.StatusApplied:
		return Applied
	case oncekeystore.StatusReleased:
		return NotApplied
	case oncekeystore.StatusFailed:
		return Failed
	}
	return ResolutionOutcome(st)
}

// RevocationStatement returns the statement a signature on the revocation of grant g by
// revokedBy must make: kind grant_revoke, the grant's ID, namespace, tenant and tool, and
// revokedBy as the decider. Bound to the grant's ID, it revokes no other grant.
func RevocationStatement(g *oncekeystore.Grant, revokedBy string) decisionsig.Statement {
	return decisionsig.Statement{Kind: decisionsig.GrantRevoke, Namespace: g.Namespace, Tenant: g.Tenant, Tool: g.Tool,
		GrantID: g.ID, DecidedBy: revokedBy}
}

// SignRevocation returns p with its Signature: RevocationStatement of g, the grant p revokes as
// the store holds it (GrantStore.GetGrant), by p.RevokedBy, signed by s.
func SignRevocation(s decisionsig.Signer, g *oncekeystore.Grant, p oncekeystore.RevokeGrantParams) (oncekeystore.RevokeGrantParams, error) {
	if g == nil || g.ID != p.ID {
		return p, fmt.Errorf("reconcile: sign revocation: the grant read is not %s", p.ID)
	}
	var err error
	p.Signature, err = encodeSigned(s, RevocationStatement(g, p.RevokedBy))
	return p, err
}

// AuditRevocation is AuditApproval for the signed revocation kept with the revoked grant g
// (Grant.RevocationSignature): its statement must be RevocationStatement(g, g.RevokedBy).
func AuditRevocation(tl *decisionsig.TrustList, g *oncekeystore.Grant) (*decisionsig.Signed, decisionsig.Entry, error) {
	return audit(tl, g.RevocationSignature, func(*decisionsig.Signed) (decisionsig.Statement, error) {
		return RevocationStatement(g, g.RevokedBy), nil
	})
}

// AuditGrant is AuditApproval for the signed statement of the making of grant g
// (Grant.Signature): its statement must be GrantStatement(g).
func AuditGrant(tl *decisionsig.TrustList, g *oncekeystore.Grant) (*decisionsig.Signed, decisionsig.Entry, error) {
	return audit(tl, g.Signature, func(*decisionsig.Signed) (decisionsig.Statement, error) {
		return GrantStatement(g), nil
	})
}
