package reconcile

import (
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
		req := *ap
		req.Status = oncekeystore.ApprovalPending
		want, err := DecisionStatement(&req, Decision{Decision: Approve, DecidedBy: signed.Statement.DecidedBy,
			Reason: signed.Statement.Reason, Message: signed.Statement.Message})
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
