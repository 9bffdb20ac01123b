package reconcile

import (
	"fmt"
	"strings"

	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/oncekeystore"
)

// ApprovalSigners counts the different trusted signers who approved the request of ap (four-eyes
// approval, oncekey.ApprovalPolicy.Signers): its partial approvals (ap.Cosignatures), its
// decision when it is approved (ap.Signature), and more, signed statements not yet stored (a
// decision being recorded). Each must verify against tl as it is now and be an approval of
// exactly ap's request (kind approve; its key, tenant, namespace, tool, episode, request token and
// fingerprint), by the decider, reason and message it names itself. A signer counts once: a key
// already counted, or a decider already counted (compared without case), adds nothing. What
// does not verify counts for nothing. A nil tl, and an approval that is neither pending nor
// approved or was decided under a standing grant, count nothing.
func ApprovalSigners(tl *decisionsig.TrustList, ap *oncekeystore.Approval, more ...[]byte) int {
	if tl == nil || ap == nil || ap.GrantID != "" || (ap.Status != oncekeystore.ApprovalPending && ap.Status != oncekeystore.ApprovalApproved) {
		return 0
	}
	sigs := append([][]byte(nil), ap.Cosignatures...)
	if ap.Status == oncekeystore.ApprovalApproved {
		sigs = append(sigs, ap.Signature)
	}
	sigs = append(sigs, more...)
	keys, deciders := map[string]bool{}, map[string]bool{}
	n := 0
	for _, sig := range sigs {
		signed, err := decisionsig.Decode(sig)
		if err != nil || signed == nil {
			continue
		}
		want, err := cosignatureStatement(ap, signed)
		if err != nil {
			continue
		}
		if _, err := tl.Verify(signed, want); err != nil {
			continue
		}
		decider := strings.ToLower(strings.TrimSpace(signed.Statement.DecidedBy))
		if keys[signed.KeyID] || deciders[decider] {
			continue
		}
		keys[signed.KeyID], deciders[decider] = true, true
		n++
	}
	return n
}

// ApprovalSigner is one signed approval of a request, as AuditApprovalSigners found it.
type ApprovalSigner struct {
	// Signed is the signed statement: its key (KeyID), its decider (Statement.DecidedBy) and
	// when it was signed (Statement.SignedAt). nil when the stored bytes do not decode (Err says
	// why).
	Signed *decisionsig.Signed
	// Entry is the trust list's entry of its key; zero when the list does not hold it, or there
	// is no list.
	Entry decisionsig.Entry
	// Verified: audited against the trust list, the signature verifies, its key was trusted for
	// it when it was signed and its statement is an approval of exactly this request. Err says
	// why not (a *decisionsig.Error); both are zero when there was no trust list to audit with.
	Verified bool
	Err      error
	// Decision: the signature of the approval's decision (Approval.Signature), not a partial
	// approval (Approval.Cosignatures).
	Decision bool
	// Repeat: a key or a decider (compared without case) an earlier signer has, which counts once.
	Repeat bool
}

// ApprovalSignersAudit is every signer of an approval that asked for more than one
// (oncekey.ApprovalPolicy.Signers), in the order they signed.
type ApprovalSignersAudit struct {
	Signers []ApprovalSigner
	// Status is the approval's.
	Status oncekeystore.ApprovalStatus
	// Recorded counts the different signers who approved, as stored (not Repeat); Verified
	// those of them that verify against the trust list now.
	Recorded, Verified int
	// Required is how many different signers the request needs. The store keeps no policy, so
	// it is what the record shows: for an approved request, the signers it was approved with
	// (the worker decides it when the last one needed signs); for a pending one, one more than
	// have approved (the fewest the policy can ask for). 0 for a denied or timed-out request.
	Required int
}

// Waiting reports whether the request is pending and has partial approvals: it waits for
// another signer.
func (a *ApprovalSignersAudit) Waiting() bool {
	return a.Status == oncekeystore.ApprovalPending && a.Recorded > 0
}

// Text says in one line where the signers stand: "2 of 2 signers", "1 of 2: waiting for
// another signer", and, when fewer verify now than were recorded, how many do ("2 of 2
// signers; 1 verifies against the trust list now"). "" for a denied or timed-out request.
func (a *ApprovalSignersAudit) Text(audited bool) string {
	var s string
	switch {
	case a.Waiting():
		s = fmt.Sprintf("%d of %d: waiting for another signer", a.Recorded, a.Required)
	case a.Status == oncekeystore.ApprovalApproved:
		s = fmt.Sprintf("%d of %d signers", a.Recorded, a.Required)
	default:
		return ""
	}
	if audited && a.Verified < a.Recorded {
		verb := "verify"
		if a.Verified == 1 {
			verb = "verifies"
		}
		s += fmt.Sprintf("; %d %s against the trust list now", a.Verified, verb)
	}
	return s
}

// AuditApprovalSigners re-verifies, from the stored approval alone, each signed approval of a
// request that asked for more than one signer: its partial approvals (ap.Cosignatures), oldest
// first, then its decision (ap.Signature). A partial approval is audited as ApprovalSigners
// counts it (an approval of exactly ap's request, by the decider, reason and message it names),
// its key's trust taken at its SignedAt (TrustList.Audit: a key revoked since does not verify);
// the decision as AuditApproval audits it. With a nil tl nothing is audited: each signer is
// only decoded. nil for an approval without partial approvals (one signer, or none).
func AuditApprovalSigners(tl *decisionsig.TrustList, ap *oncekeystore.Approval) *ApprovalSignersAudit {
	if ap == nil || len(ap.Cosignatures) == 0 {
		return nil
	}
	out := &ApprovalSignersAudit{Status: ap.Status}
	keys, deciders := map[string]bool{}, map[string]bool{}
	add := func(sig []byte, decision bool, audit func() (*decisionsig.Signed, decisionsig.Entry, error)) {
		s := ApprovalSigner{Decision: decision}
		if tl == nil {
			s.Signed, s.Err = decisionsig.Decode(sig)
		} else {
			s.Signed, s.Entry, s.Err = audit()
			s.Verified = s.Signed != nil && s.Err == nil
		}
		if s.Signed == nil {
			out.Signers = append(out.Signers, s)
			return
		}
		approves := !decision || ap.Status == oncekeystore.ApprovalApproved
		decider := strings.ToLower(strings.TrimSpace(s.Signed.Statement.DecidedBy))
		s.Repeat = approves && (keys[s.Signed.KeyID] || deciders[decider])
		if approves && !s.Repeat {
			keys[s.Signed.KeyID], deciders[decider] = true, true
			out.Recorded++
			if s.Verified {
				out.Verified++
			}
		}
		out.Signers = append(out.Signers, s)
	}
	for _, sig := range ap.Cosignatures {
		add(sig, false, func() (*decisionsig.Signed, decisionsig.Entry, error) { return AuditCosignature(tl, ap, sig) })
	}
	if len(ap.Signature) > 0 {
		add(ap.Signature, true, func() (*decisionsig.Signed, decisionsig.Entry, error) { return AuditApproval(tl, ap) })
	}
	switch ap.Status {
	case oncekeystore.ApprovalApproved:
		out.Required = out.Recorded
	case oncekeystore.ApprovalPending:
		out.Required = out.Recorded + 1
	}
	return out
}

// AuditCosignature is AuditApproval for sig, one of the partial approvals kept with ap
// (Approval.Cosignatures): its statement must be an approval of exactly ap's request (kind
// approve; its key, tenant, namespace, tool, episode, request token and fingerprint) by the
// decider, reason and message it names itself.
func AuditCosignature(tl *decisionsig.TrustList, ap *oncekeystore.Approval, sig []byte) (*decisionsig.Signed, decisionsig.Entry, error) {
	return audit(tl, sig, func(s *decisionsig.Signed) (decisionsig.Statement, error) { return cosignatureStatement(ap, s) })
}

// cosignatureStatement is the statement an approval signed by s of ap's request must make: an
// approval of exactly that request, by the decider, reason and message s names itself.
func cosignatureStatement(ap *oncekeystore.Approval, s *decisionsig.Signed) (decisionsig.Statement, error) {
	req := *ap
	req.Status = oncekeystore.ApprovalPending
	return DecisionStatement(&req, Decision{Decision: Approve, DecidedBy: s.Statement.DecidedBy,
		Reason: s.Statement.Reason, Message: s.Statement.Message})
}
