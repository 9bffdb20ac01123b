package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/failure"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// Registered names of the approval workflow's activities.
const (
	RequestApprovalName = "oncekey.RequestApproval"
	DecideApprovalName  = "oncekey.DecideApproval"
)

// ApprovalAnswer is an approval as the approval workflow's activities found or left it: its
// decision as the workflow answers with it (reconcile.ApprovalOutput: status, episode,
// fingerprint, who decided, when and why; RequestID and FingerprintMismatch are the workflow's to
// set) and the request the worker made, which only the workflow reads. Its JSON is one object
// with the fields of both, under the names ApprovalAnswer has always had, so recorded histories
// decode as before.
type ApprovalAnswer struct {
	reconcile.ApprovalOutput
	// Conflict: DecideApproval found the approval no longer pending; the fields are the decision
	// already recorded.
	Conflict    bool      `json:"conflict,omitempty"`
	RequestedAt time.Time `json:"requested_at,omitzero"`
	Deadline    time.Time `json:"deadline,omitzero"`
	// Summary is the request's summary, as the worker derived it; Token the request's token,
	// which DecideApproval must name.
	Summary string `json:"summary,omitempty"`
	Token   string `json:"token,omitempty"`
}

// answerOf is the stored approval a as the activities answer with it. (ApprovalAnswer.Created is
// RequestApproval's of the earlier protocol; nothing sets it now.)
func answerOf(a *oncekeystore.Approval) ApprovalAnswer {
	return ApprovalAnswer{ApprovalOutput: reconcile.ApprovalOutput{Status: a.Status, Episode: a.Episode, DecidedBy: a.DecidedBy,
		DecidedAt: a.DecidedAt, Reason: a.Reason, Fingerprint: a.Fingerprint,
		Message: a.ModelMessage, ChangesRequested: a.ChangesRequested, EditedAs: a.EditedAs},
		RequestedAt: a.RequestedAt, Deadline: a.Deadline, Summary: a.Summary, Token: a.Token}
}

// Output returns the approval workflow's output for a decided answer: a.ApprovalOutput.
//
// Deprecated: use the ApprovalOutput field.
func (a ApprovalAnswer) Output() reconcile.ApprovalOutput { return a.ApprovalOutput }

// approvals returns the store as an ApprovalStore, or a non-retryable oncekey.Config error.
func (a *Activities) approvals() (oncekeystore.ApprovalStore, error) {
	s, ok := a.store.(oncekeystore.ApprovalStore)
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"activities: the store (%T) keeps no approvals (oncekeystore.ApprovalStore): give the workers a store that does (pgstore, memstore, redisstore), or drop Policy.Approval", a.store),
			oncekey.ErrTypeConfig, nil)
	}
	return s, nil
}

// getApproval reads the approval of tenant's key from the store (which must be an ApprovalStore,
// see approvals) and returns the store too; nil when it holds none. op names the read in a store
// error, which is returned wrapped (retryable).
func (a *Activities) getApproval(ctx context.Context, op, tenant, key string) (oncekeystore.ApprovalStore, *oncekeystore.Approval, error) {
	s, err := a.approvals()
	if err != nil {
		return nil, nil, err
	}
	ap, err := s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
	switch {
	case errors.Is(err, oncekeystore.ErrNotFound):
		return s, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("activities: %s %s: %w", op, key, err)
	}
	return s, ap, nil
}

// boundApproval refuses ap to a caller that may not act on it, as bound does for records.
func boundApproval(ctx context.Context, ap *oncekeystore.Approval, tool string) error {
	return boundTo(ctx, "approval", ap.OperationKey, ap.Namespace, ap.Tool, tool)
}

// ErrTypeNoWorkerRequest is the application error type (non-retryable) of RequestApproval when
// no worker asked for approval of the key: the store holds no approval for it, or one asked
// under the earlier protocol (no Token). A decision sent to the approval workflow then
// authorises nothing.
const ErrTypeNoWorkerRequest = failure.TypeNoWorkerRequest

// RequestApproval reads the request for approval of in.OperationKey that a worker made (the
// interceptor writes it, with the summary it derives and a token it mints, when a call that
// needs approval has none) and returns it as it stands: pending, approved, denied or timed out,
// with its summary and token. It writes nothing: an approval workflow, which anyone who can start
// workflows in the namespace can start with any input, cannot make or change a request. No
// approval for the key, or one no worker asked (no token), is a non-retryable error of type
// ErrTypeNoWorkerRequest; an approval of another namespace or tool, or a call from another
// workflow than the key's approval workflow, one of type ErrTypeForeignRecord; a store that
// keeps no approvals one of type oncekey.ErrTypeConfig; store errors are returned retryable.
//
// Its name and input are those of the activity that wrote the request from the workflow's input
// before, so that approval workflows of earlier histories replay and, run on, read instead.
func (a *Activities) RequestApproval(ctx context.Context, in decision.ApprovalInput) (ApprovalAnswer, error) {
	if err := approvalWorkflow(ctx, RequestApprovalName, in.OperationKey); err != nil {
		return ApprovalAnswer{}, err
	}
	_, ap, err := a.getApproval(ctx, "read approval", in.Tenant, in.OperationKey)
	if err != nil {
		return ApprovalAnswer{}, err
	}
	if ap == nil || ap.Token == "" {
		return ApprovalAnswer{}, temporal.NewNonRetryableApplicationError(NoWorkerRequestMessage(in.OperationKey), ErrTypeNoWorkerRequest, nil)
	}
	if err := boundApproval(ctx, ap, in.Tool); err != nil {
		return ApprovalAnswer{}, err
	}
	return answerOf(ap), nil
}

// NoWorkerRequestMessage is the message of an ErrTypeNoWorkerRequest error for key.
func NoWorkerRequestMessage(key string) string {
	return fmt.Sprintf("no worker asked for approval of %s: only the worker that runs the call makes its request, "+
		"and this approval workflow was started without one, so nothing was asked and a decision sent to it authorises nothing. "+
		"List what waits for a decision with `oncekey approvals`", key)
}

// DecideApprovalInput is a decision to record on the pending approval at Episode.
type DecideApprovalInput struct {
	Tenant       string `json:"tenant"`
	OperationKey string `json:"operation_key"`
	Tool         string `json:"tool"`
	Episode      int64  `json:"episode"`
	// Token is the token of the request decided (ApprovalAnswer.Token); another request's is
	// refused.
	Token     string                      `json:"token,omitempty"`
	Status    oncekeystore.ApprovalStatus `json:"status"`
	DecidedBy string                      `json:"decided_by,omitempty"`
	Reason    string                      `json:"reason,omitempty"`
	// Retention is how long the decision is kept, from now.
	Retention time.Duration `json:"retention"`
	// Message and ChangesRequested are recorded with the decision (oncekeystore.Approval.
	// ModelMessage, ChangesRequested).
	Message          string `json:"message,omitempty"`
	ChangesRequested bool   `json:"changes_requested,omitempty"`
	// Arguments, with Status approved, are a person's edited arguments (reconcile.Decision.
	// Arguments): DecideApproval checks them against the tool's input type and records the
	// approval as replaced by their edit (see DecideApproval).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Signature is the decision's signed statement (reconcile.Decision.Signature): verified
	// against the worker's trust list, when it has one, and stored with the decision.
	Signature json.RawMessage `json:"signature,omitempty"`
	// SignatureRefusedType: the workflow that scheduled the activity takes a refusal of type
	// oncekey.ErrTypeSignatureRefused (oncekey's approval workflow from the version that made
	// it). Without it (a workflow of an earlier worker, which would end instead of waiting on a
	// type it does not know) a signature is refused as ErrTypeInvalid, as before.
	SignatureRefusedType bool `json:"signature_refused_type,omitempty"`
}

// recordedAs reports whether ap holds this decision as written: its episode, status, decider and
// reason. It is how a retry knows its own write, whose answer was lost.
func (in DecideApprovalInput) recordedAs(ap *oncekeystore.Approval) bool {
	return ap.Episode == in.Episode && ap.Status == in.Status && ap.DecidedBy == in.DecidedBy && ap.Reason == in.Reason &&
		ap.ModelMessage == in.Message
}

// DecideApproval writes a decision with ApprovalStore.DecideApproval, fenced by in.Episode, and
// returns the approval as decided. An approval found decided already is returned as it is, with
// Conflict set, unless it holds this very decision (episode, status, decided by and reason: the
// write of an earlier attempt whose answer was lost, or the same decision delivered twice), which
// is returned as written, Conflict unset. A stale episode, a missing approval or a decision the store refuses as given is a
// non-retryable error of type ErrTypeInvalid; an approval of another namespace or tool, or a call
// from another workflow than the key's approval workflow, one of type ErrTypeForeignRecord; store
// errors are returned retryable.
func (a *Activities) DecideApproval(ctx context.Context, in DecideApprovalInput) (ApprovalAnswer, error) {
	if err := approvalWorkflow(ctx, DecideApprovalName, in.OperationKey); err != nil {
		return ApprovalAnswer{}, err
	}
	s, cur, err := a.getApproval(ctx, "decide approval", in.Tenant, in.OperationKey)
	if err != nil {
		return ApprovalAnswer{}, err
	}
	if cur == nil {
		return ApprovalAnswer{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"activities: no approval for key %s (purged or forgotten); nothing was written", in.OperationKey), ErrTypeInvalid, nil)
	}
	if err := boundApproval(ctx, cur, in.Tool); err != nil {
		return ApprovalAnswer{}, err
	}
	if err := a.verifyDecision(ctx, cur, in); err != nil {
		return ApprovalAnswer{}, err
	}
	signers, err := a.signers(cur, in)
	if err != nil {
		return ApprovalAnswer{}, err
	}
	var e *edit
	if len(in.Arguments) > 0 {
		if e, err = a.approveEdit(ctx, s, cur, &in); err != nil {
			return ApprovalAnswer{}, err
		}
	}
	p := &oncekeystore.DecideApprovalParams{
		Tenant: in.Tenant, OperationKey: in.OperationKey, Episode: in.Episode, Token: in.Token, Status: in.Status,
		DecidedBy: in.DecidedBy, Reason: in.Reason, Retention: in.Retention,
		ModelMessage: in.Message, ChangesRequested: in.ChangesRequested, EditedAs: e.key(), Signature: in.Signature,
	}
	if signers.waiting() {
		if !signers.counted {
			// One signer already counted (the same key, or the same decider) adds nothing.
			return signers.answer(answerOf(cur)), nil
		}
		p = &oncekeystore.DecideApprovalParams{Tenant: in.Tenant, OperationKey: in.OperationKey, Episode: in.Episode, Token: in.Token,
			Status: oncekeystore.ApprovalPending, Retention: in.Retention, Signature: in.Signature}
	}
	ap, err := s.DecideApproval(ctx, p)
	var (
		conflict *oncekeystore.ApprovalConflictError
		stale    *oncekeystore.StaleDecisionError
		inv      *oncekeystore.InvalidParamsError
	)
	switch {
	case err == nil && signers.waiting():
		return signers.answer(answerOf(ap)), nil
	case err == nil:
		return signers.answer(e.answer(answerOf(ap))), nil
	case errors.As(err, &conflict) && conflict.Approval != nil:
		ans := answerOf(conflict.Approval)
		ans.Conflict = !in.recordedAs(conflict.Approval)
		if !ans.Conflict {
			ans = e.answer(ans)
		}
		return ans, nil
	case errors.As(err, &stale), errors.As(err, &inv), errors.Is(err, oncekeystore.ErrNotFound):
		return ApprovalAnswer{}, temporal.NewNonRetryableApplicationError(err.Error()+"; nothing was written", ErrTypeInvalid, nil)
	}
	return ApprovalAnswer{}, fmt.Errorf("activities: decide approval %s: %w", in.OperationKey, err)
}

// awaitApproval reads the approval a call waits on (in.Approval) and checks that it is of the
// call's namespace and tool (boundApproval); nil when the store holds none.
func (a *Activities) awaitApproval(ctx context.Context, in AwaitInput) (*oncekeystore.Approval, error) {
	_, ap, err := a.getApproval(ctx, "await approval", in.Approval.Tenant, in.Approval.OperationKey)
	if err != nil || ap == nil {
		return nil, err
	}
	if err := boundApproval(ctx, ap, in.Approval.Tool); err != nil {
		return nil, err
	}
	return ap, nil
}

// awaitedApproval answers for the approval of an approval workflow that has closed: the
// approval's decision as the store has it; an Err when it is still pending or gone (the
// workflow was terminated, or the approval purged).
func (a *Activities) awaitedApproval(ctx context.Context, in AwaitInput) (AwaitOutput, error) {
	ap, err := a.awaitApproval(ctx, in)
	switch {
	case err != nil:
		return AwaitOutput{}, err
	case ap == nil:
		return AwaitOutput{Done: true, Err: fmt.Sprintf("the approval workflow %s closed and the store holds no approval for the key", in.WorkflowID)}, nil
	case !ap.Status.Decided():
		return AwaitOutput{Done: true, Err: fmt.Sprintf("the approval workflow %s closed with the approval still %s", in.WorkflowID, ap.Status)}, nil
	}
	out := answerOf(ap).ApprovalOutput
	return AwaitOutput{Done: true, Approval: &out}, nil
}

// fingerprintCheck returns the check a call waiting on an approval runs before each look at the
// approval workflow: the answer for an approval the store holds for another fingerprint
// (AwaitOutput.Approval, FingerprintMismatch set, Fingerprint the stored one), or nil: no
// approval yet (the approval workflow is still asking), or one of the call's fingerprint, after
// which it asks the store no more (an approval's fingerprint never changes). An approval of
// another namespace or tool is an ErrTypeForeignRecord error.
func (a *Activities) fingerprintCheck(in AwaitInput) func(context.Context) (*AwaitOutput, error) {
	same := false
	return func(ctx context.Context) (*AwaitOutput, error) {
		if same {
			return nil, nil
		}
		ap, err := a.awaitApproval(ctx, in)
		if err != nil || ap == nil {
			return nil, err
		}
		if ap.Fingerprint == in.Fingerprint {
			same = true
			return nil, nil
		}
		out := answerOf(ap).ApprovalOutput
		out.FingerprintMismatch = true
		return &AwaitOutput{Done: true, Approval: &out}, nil
	}
}
