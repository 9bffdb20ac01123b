package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/metrics"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// Signed decisions on the worker (Options.TrustList): DecideApproval and RecordResolution verify
// a person's decision before they write anything, against the request or the record the store
// holds, so a decision sent by anyone who can write to the namespace records nothing unless a
// key the trust list names for the call's tenant, tool and kind signed exactly it.

// verifyDecision checks the signature of the decision in on the approval cur (its request at
// in's episode and token): nil when the activities have no trust list, for a timeout (which
// lets nothing happen and no person makes), or when it verifies; otherwise the refusal
// (refusedSignature).
func (a *Activities) verifyDecision(ctx context.Context, cur *oncekeystore.Approval, in DecideApprovalInput) error {
	if a.trust == nil || in.Status == oncekeystore.ApprovalTimedOut {
		return nil
	}
	d := reconcile.Decision{DecidedBy: in.DecidedBy, Reason: in.Reason, Message: in.Message, Arguments: in.Arguments}
	switch {
	case in.Status == oncekeystore.ApprovalApproved:
		d.Decision = reconcile.Approve
	case in.Status == oncekeystore.ApprovalDenied && in.ChangesRequested:
		d.Decision = reconcile.RequestChanges
	case in.Status == oncekeystore.ApprovalDenied:
		d.Decision = reconcile.Deny
	}
	req := *cur
	req.Episode, req.Token = in.Episode, in.Token
	want, err := reconcile.DecisionStatement(&req, d)
	if err == nil {
		err = a.verify(in.Signature, want)
	}
	verb := string(reconcile.Approve)
	if d.Decision != reconcile.Approve {
		verb = string(reconcile.Deny)
	}
	return a.refusedSignature(ctx, "decision on the approval of", in.OperationKey, cur.Tenant, cur.Tool,
		shell.Decide(verb, in.OperationKey, cur.Tenant), in.SignatureRefusedType, err)
}

// verifyResolution checks the signature of the resolution in against the record it settles:
// nil when the activities have no trust list, when the store holds no record (Record reports
// it), or when it verifies; otherwise the refusal (refusedSignature). A store error is returned
// retryable.
func (a *Activities) verifyResolution(ctx context.Context, in RecordInput) error {
	if a.trust == nil {
		return nil
	}
	rec, err := a.store.Get(ctx, &oncekeystore.GetParams{Tenant: in.Tenant, OperationKey: in.OperationKey})
	switch {
	case errors.Is(err, oncekeystore.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("activities: record resolution %s: %w", in.OperationKey, err)
	}
	want, err := reconcile.ResolutionStatement(rec, in.Resolution)
	if err == nil {
		err = a.verify(in.Resolution.Signature, want)
	}
	return a.refusedSignature(ctx, "resolution of", in.OperationKey, rec.Tenant, rec.Tool,
		shell.Resolve(in.OperationKey).Flag("--tenant", rec.Tenant).Int("--epoch", in.Resolution.Epoch), in.SignatureRefusedType, err)
}

// verify decodes a signed statement and verifies it against the trust list as want.
func (a *Activities) verify(sig []byte, want decisionsig.Statement) error {
	signed, err := decisionsig.Decode(sig)
	if err != nil {
		return err
	}
	_, err = a.trust.Verify(signed, want)
	return err
}

// refusedSignature returns nil for a nil err; else, after logging it for the operator and
// counting it (metrics.DecisionsRefused), the non-retryable oncekey.ErrTypeSignatureRefused error
// that refuses the decision (its message names the *decisionsig.Error): the decision workflow
// keeps waiting, and the sender reads why and what to do (signatureRefusal). err that is no
// *decisionsig.Error (a statement that cannot be built: arguments or a result that are not
// JSON) is refused the same way, as a bad signature. cmd is the command that sends the decision
// again, to which the message adds --sign-key. Without typed (the input's SignatureRefusedType:
// a workflow of an earlier worker, which ends on an activity error type it does not know) the
// error is of type ErrTypeInvalid, as before that type, with the same message.
func (a *Activities) refusedSignature(ctx context.Context, what, key, tenant, tool string, cmd *shell.Command, typed bool, err error) error {
	if err == nil {
		return nil
	}
	var se *decisionsig.Error
	if !errors.As(err, &se) {
		se = &decisionsig.Error{Reason: decisionsig.ReasonBadSignature, Detail: err.Error()}
	}
	activity.GetLogger(ctx).Warn("oncekey: refused a decision whose signature does not verify; nothing was recorded. "+
		"If a person made it, have them sign it with a key the workers' trust list names for this tenant, tool and kind "+
		"(`oncekey approve|deny|resolve --sign-key FILE`); otherwise someone without a trusted key tried to decide",
		"what", what, "key_prefix", keyPrefix(key), "tool", tool, "reason", string(se.Reason), "key_id", se.KeyID, "error", se.Error())
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{metrics.TagTool: tool, metrics.TagReason: string(se.Reason)}).
		Counter(metrics.DecisionsRefused).Inc(1)
	typ := oncekey.ErrTypeSignatureRefused
	if !typed {
		typ = ErrTypeInvalid
	}
	return temporal.NewNonRetryableApplicationError(signatureRefusal(what, key, tenant, tool, cmd, se), typ, nil)
}

// signatureRefusal is the one text of a decision refused for its signature, which the decision
// update answers, the query's last refused signal names and the CLI and the inbox show: what
// happened, and what to do, with the command. "the decision on the approval of ok1_… was
// refused: decisionsig: decision refused (untrusted), key ed25519:…: the key is revoked; nothing
// was recorded. Sign it with a key the workers' trust list holds for tenant acme, tool
// IssueRefund: `oncekey approve ok1_… --tenant acme --sign-key FILE`".
func signatureRefusal(what, key, tenant, tool string, cmd *shell.Command, se *decisionsig.Error) string {
	return fmt.Sprintf("the %s %s was refused: %s; nothing was recorded. Sign it with a key the workers' trust list holds for tenant %s, tool %s: `%s`",
		what, key, se.Error(), tenant, tool, cmd.Placeholder("--sign-key", "FILE"))
}

// keyPrefix is the first 12 characters of an operation key, as logs name it.
func keyPrefix(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}

// signerCount is where a decision leaves a request whose policy asks for more than one signer
// (oncekey.ApprovalPolicy.Signers): required signers (0 for a one-signer request), how many
// different trusted signers approved it with this decision, and whether this decision's signer
// is one more (counted).
type signerCount struct {
	required, with int
	counted        bool
}

// waiting reports whether the decision is an approval that leaves the request waiting for
// another signer: it is recorded as a partial approval.
func (n signerCount) waiting() bool { return n.required > 1 && n.with < n.required }

// answer sets the signer counts of a four-eyes request on ans.
func (n signerCount) answer(ans ApprovalAnswer) ApprovalAnswer {
	if n.required > 1 {
		ans.Signers, ans.SignersRequired = min(n.with, n.required), n.required
	}
	return ans
}

// signers counts, for a decision in on the approval cur of a tool whose policy asks for more than
// one signer, the different trusted signers with this decision (reconcile.ApprovalSigners): an
// approval of a pending request that leaves fewer than required is recorded as a partial
// approval and the request keeps waiting; a denial decides as any. Such a request needs the
// trust list (a non-retryable oncekey.ErrTypeConfig error without one) and cannot be approved
// with edited arguments (refused, ErrTypeInvalid). A one-signer request, a decision found
// recorded already or another request's: the zero signerCount, and the decision goes on as any.
func (a *Activities) signers(cur *oncekeystore.Approval, in DecideApprovalInput) (signerCount, error) {
	var n signerCount
	if a.registry != nil {
		if p, ok := a.registry.Policy(cur.Tool); ok && p.Approval != nil {
			n.required = p.Approval.RequiredSigners()
		}
	}
	if n.required < 2 || in.Status == oncekeystore.ApprovalTimedOut {
		return signerCount{}, nil
	}
	switch {
	case a.trust == nil:
		return signerCount{}, temporal.NewNonRetryableApplicationError((&oncekey.SignersNeedTrustListError{Tool: cur.Tool, Signers: n.required}).Error()+"; nothing was recorded",
			oncekey.ErrTypeConfig, nil)
	case len(in.Arguments) > 0:
		return signerCount{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the approval of %s needs %d different signers, and an approval with edited arguments is not taken for it: nothing was recorded; "+
				"request changes instead, so the model proposes the call with other arguments", in.OperationKey, n.required), ErrTypeInvalid, nil)
	case in.Status != oncekeystore.ApprovalApproved || cur.Status != oncekeystore.ApprovalPending || cur.Episode != in.Episode || cur.Token != in.Token:
		return signerCount{}, nil
	}
	have := reconcile.ApprovalSigners(a.trust, cur)
	n.with = reconcile.ApprovalSigners(a.trust, cur, in.Signature)
	n.counted = n.with > have
	return n, nil
}
