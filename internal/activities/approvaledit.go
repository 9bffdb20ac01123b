package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/approvaledit"
	"github.com/oncekey/oncekey/oncekeystore"
)

// edit is an edit of a call's arguments that a person approved, as DecideApproval checked and
// recorded it: the edit's operation key and its arguments in canonical JSON.
type edit struct {
	editKey string
	args    json.RawMessage
}

// key is the edit's operation key, "" for none.
func (e *edit) key() string {
	if e == nil {
		return ""
	}
	return e.editKey
}

// answer is ans with the edit's arguments (which the store never keeps).
func (e *edit) answer(ans ApprovalAnswer) ApprovalAnswer {
	if e != nil && ans.EditedAs == e.editKey {
		ans.Arguments = e.args
	}
	return ans
}

// approveEdit checks a person's edited arguments (in.Arguments) for the call cur asked about and
// writes the edit's approval, before DecideApproval records cur as replaced by it (in.Status is
// set to oncekeystore.ApprovalReplaced). Everything is derived here, on the worker, from the stored
// approval and the worker's Registry, never from the decision: the edit is of cur's tool, tenant,
// namespace, workflow and step; its arguments decode into the tool's input type
// (approvaledit.EditArguments); its fingerprint and summary are computed as the worker computes a
// call's; its key is oncekey.EditKey of cur's key and episode. The edit's approval is asked
// (ApprovalStore.RequestApproval with EditOf, a request token stable across this activity's
// retries) and approved by the decision's decider. Arguments the tool cannot take, the call's own
// arguments, or an approval no longer pending at in.Episode are non-retryable errors of type
// ErrTypeInvalid, and nothing is written.
func (a *Activities) approveEdit(ctx context.Context, s oncekeystore.ApprovalStore, cur *oncekeystore.Approval, in *DecideApprovalInput) (*edit, error) {
	invalid := func(msg string) error {
		return temporal.NewNonRetryableApplicationError(msg+"; nothing was written", ErrTypeInvalid, nil)
	}
	if in.Status != oncekeystore.ApprovalApproved {
		return nil, invalid("activities: only an approval takes edited arguments")
	}
	// replacedAlready: an earlier attempt of this activity recorded the replacement and its answer
	// was lost; the edit is derived again for the answer, and nothing is written.
	replacedAlready := cur.Status == oncekeystore.ApprovalReplaced && cur.Episode == in.Episode && cur.Token == in.Token
	if !replacedAlready && (cur.Status != oncekeystore.ApprovalPending || cur.Episode != in.Episode || cur.Token != in.Token) {
		return nil, nil // DecideApproval answers it as stale or decided, without the edit.
	}
	doc, val, err := approvaledit.EditArguments(a.registry, cur.Tool, in.Arguments)
	if err != nil {
		return nil, invalid(err.Error())
	}
	p, _ := a.registry.Policy(cur.Tool)
	op := oncekey.Operation{Namespace: cur.Namespace, Tenant: cur.Tenant, WorkflowID: cur.WorkflowID, StepID: cur.StepID,
		Tool: cur.Tool, ActivityType: cur.Tool, Args: []any{val}, ArgsJSON: doc}
	fp, summary, err := editFingerprint(p, op, a.secret)
	if err != nil {
		return nil, invalid(err.Error())
	}
	if fp == cur.Fingerprint {
		return nil, invalid("activities: the edited arguments are the call's own: approve it without arguments")
	}
	key, err := oncekey.EditKey(cur.Namespace, cur.Tenant, cur.OperationKey, cur.Episode)
	if err != nil {
		return nil, invalid(err.Error())
	}
	if replacedAlready {
		if cur.EditedAs != key {
			return nil, nil
		}
		if ed, err := s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: cur.Tenant, OperationKey: key}); err != nil || ed.Fingerprint != fp {
			return nil, nil // another edit's replacement: DecideApproval answers it as decided
		}
		in.Status = oncekeystore.ApprovalReplaced
		return &edit{editKey: key, args: doc}, nil
	}
	res, err := s.RequestApproval(ctx, &oncekeystore.RequestApprovalParams{
		Tenant: cur.Tenant, OperationKey: key, Namespace: cur.Namespace, Tool: cur.Tool, Fingerprint: fp,
		WorkflowID: cur.WorkflowID, StepID: cur.StepID, Summary: summary, RequestToken: editRequestToken(ctx),
		Token: "e1_" + cur.Token, Timeout: in.Retention, EditOf: cur.OperationKey,
	})
	if err != nil {
		return nil, fmt.Errorf("activities: ask the approval of the edit %s: %w", key, err)
	}
	ed := res.Approval
	if ed.Fingerprint != fp || ed.EditOf != cur.OperationKey || ed.Tool != cur.Tool || ed.Namespace != cur.Namespace {
		return nil, invalid(fmt.Sprintf("activities: the key %s of the edit holds an approval of other arguments", key))
	}
	if ed.Status == oncekeystore.ApprovalPending {
		_, err = s.DecideApproval(ctx, &oncekeystore.DecideApprovalParams{Tenant: cur.Tenant, OperationKey: key, Episode: ed.Episode,
			Token: ed.Token, Status: oncekeystore.ApprovalApproved, DecidedBy: in.DecidedBy, Reason: in.Reason, Retention: in.Retention,
			Signature: in.Signature})
		var conflict *oncekeystore.ApprovalConflictError
		if err != nil && !(errors.As(err, &conflict) && conflict.Approval != nil && conflict.Approval.Status == oncekeystore.ApprovalApproved) {
			return nil, fmt.Errorf("activities: approve the edit %s: %w", key, err)
		}
	}
	in.Status = oncekeystore.ApprovalReplaced
	return &edit{editKey: key, args: doc}, nil
}

// editFingerprint returns the fingerprint and the summary of the edited call op under p, as the
// worker derives them for a call; a panic in the policy's code is an error.
func editFingerprint(p oncekey.Policy, op oncekey.Operation, secret []byte) (fp, summary string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("activities: the tool's policy panicked on the edited arguments: %v", r)
		}
	}()
	if fp, err = oncekey.KeyedFingerprint(p, op, secret); err != nil {
		return "", "", err
	}
	return fp, approvaledit.ApprovalSummary(p.Approval, op), nil
}

// editRequestToken is the request token of the edit's approval: the same across this activity's
// retries (its workflow run and activity ID), so a retry after a lost answer learns it asked.
func editRequestToken(ctx context.Context) int64 {
	if !activity.IsActivity(ctx) {
		return 0
	}
	info := activity.GetInfo(ctx)
	var h int64 = 1469598103934665603
	for _, b := range []byte(info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID) {
		h = (h ^ int64(b)) * 1099511628211
	}
	if h == 0 {
		h = 1
	}
	return h
}
