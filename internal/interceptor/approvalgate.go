package interceptor

import (
	"context"

	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	tinterceptor "go.temporal.io/sdk/interceptor"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/oncekeystore"
)

// The approval gate of a call whose policy asks for approval, on the worker: only a request the
// worker made counts. Before the claim (approval), and again under it (approvedUnderClaim), the
// worker reads the key's approval and runs the call only on one that is approved, for the call's
// fingerprint, asked by a worker (it has a Token, which only a worker writes) and showing the
// summary the worker derives now from the arguments the body receives. Otherwise it writes the
// request itself (ApprovalStore.RequestApproval, with that summary and a token it mints) and
// refuses the attempt without running the body: oncekey.ErrTypeApprovalPending while a person
// decides (the workflow side waits for the decision and schedules the call again), or the
// decision or mismatch that stands. Nothing is claimed for a refused call.

// newApprovalToken returns a fresh request token (oncekeystore.RequestApprovalParams.Token).
func newApprovalToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "w1_" + hex.EncodeToString(b[:])
}

// authorises reports whether ap lets this call run: approved, for its fingerprint, namespace
// and tool, asked by a worker, and showing the summary derived for these arguments.
func (c *call) authorises(ap *oncekeystore.Approval) bool {
	return ap != nil && ap.Status == oncekeystore.ApprovalApproved && ap.Fingerprint == c.fp && ap.Token != "" &&
		ap.Summary == c.summary && ap.Namespace == c.op.Namespace && ap.Tool == c.tool
}

// approval is the gate before the claim; nil lets the call go on to claim. With afterRecord, a
// record of the key that is not free to take (pending, applied, failed, unknown) also lets it
// go on: the claim replays it, waits for it or refuses it (another fingerprint) as for any
// call, and a claim that acquires it after all meets the gate again under the claim.
func (c *call) approval(ctx context.Context, afterRecord bool) error {
	if !c.needsApproval {
		return nil
	}
	s, ok := c.root.opts.Store.(oncekeystore.ApprovalStore)
	if !ok {
		return c.configError(fmt.Errorf("Policy.Approval needs a store that keeps approvals (oncekeystore.ApprovalStore), and %T does not", c.root.opts.Store))
	}
	if n := c.policy.Approval.RequiredSigners(); n > 1 && c.root.opts.TrustList == nil {
		return c.configError(&oncekey.SignersNeedTrustListError{Tool: c.tool, Signers: n})
	}
	if c.editOf != "" {
		return c.editApproval(ctx, s)
	}
	ap, err := s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: c.op.Tenant, OperationKey: c.key})
	switch {
	case errors.Is(err, oncekeystore.ErrNotFound):
		ap = nil
	case err != nil:
		return c.storeFailed("get approval", err)
	}
	var supersede string
	if c.authorises(ap) {
		if err := c.signedApproval(ctx, ap); err != nil {
			return err
		}
		stands, err := c.grantStands(ctx, ap)
		if err != nil || stands {
			return err
		}
		supersede = ap.GrantID
	}
	if afterRecord {
		rec, err := c.root.opts.Store.Get(ctx, &oncekeystore.GetParams{Tenant: c.op.Tenant, OperationKey: c.key})
		switch {
		case err == nil && (rec.Status == oncekeystore.StatusPending || rec.Status == oncekeystore.StatusApplied ||
			rec.Status == oncekeystore.StatusFailed || rec.Status == oncekeystore.StatusUnknown):
			return nil
		case err != nil && !errors.Is(err, oncekeystore.ErrNotFound):
			return c.storeFailed("get", err)
		}
	}
	return c.ask(ctx, s, supersede)
}

// approvedUnderClaim checks the approval again under the claim acquired at epoch, right before
// the effect; refused, it gives the claim back. The record then holds what it held before the
// claim, or a fingerprint the gate before the claim found approved: never a refused one.
func (c *call) approvedUnderClaim(ctx context.Context, epoch int64) error {
	err := c.approval(ctx, false)
	if err != nil {
		c.release(ctx, epoch)
	}
	return err
}

// ask writes the worker's request for approval of the call and returns its refusal: pending
// (oncekey.ErrTypeApprovalPending), denied (oncekey.ErrTypeApproval), another fingerprint's
// approval (oncekey.ErrTypeFingerprintMismatch) or another namespace's or tool's
// (activities.ErrTypeForeignRecord); nil when the approval it finds authorises the call (decided
// since it was read, or by a standing grant that covers the call). supersede names the grant of
// an approval the worker found no longer covered (oncekeystore.RequestApprovalParams.SupersedeGrant).
func (c *call) ask(ctx context.Context, s oncekeystore.ApprovalStore, supersede string) error {
	timeout := c.policy.Approval.RequestTimeout()
	token := newApprovalToken()
	res, err := s.RequestApproval(ctx, &oncekeystore.RequestApprovalParams{
		Tenant: c.op.Tenant, OperationKey: c.key, Namespace: c.op.Namespace, Tool: c.tool, Fingerprint: c.fp,
		WorkflowID: c.op.WorkflowID, StepID: c.op.StepID, Summary: c.summary, Token: token, Timeout: timeout, SupersedeGrant: supersede,
	})
	var inv *oncekeystore.InvalidParamsError
	switch {
	case errors.As(err, &inv):
		return c.configError(err)
	case err != nil:
		return c.storeFailed("request approval", err)
	case res == nil || res.Approval == nil:
		return c.storeUnavailable("request approval", errors.New("the store returned no approval"))
	}
	ap := res.Approval
	if res.Created && ap.Status == oncekeystore.ApprovalPending && ap.Token == token && ap.Fingerprint == c.fp {
		// This attempt asked: a standing grant may decide it at once.
		if ap, err = c.approveByGrant(ctx, ap); err != nil {
			return err
		}
	}
	if c.authorises(ap) {
		if err := c.signedApproval(ctx, ap); err != nil {
			return err
		}
		if stands, err := c.grantStands(ctx, ap); err != nil || stands {
			return err
		}
	}
	c.outcome = oncekey.OutcomeRejected
	d := c.details(reasonNotApproved, false)
	d.Approval = &oncekey.ApprovalDetails{Status: ap.Status, Episode: ap.Episode, Fingerprint: ap.Fingerprint, Summary: ap.Summary, Created: res.Created}
	switch {
	case ap.Namespace != c.op.Namespace || ap.Tool != c.tool:
		d.Reason = "approval of another namespace or tool"
		return c.refusal(fmt.Sprintf("oncekey: %s did not run: the approval of its key %s is %s's, tool %s, not this call's; nothing was asked and nothing ran, "+
			"and calling it again is refused the same way: give this call a step ID of its own (oncekey.WithStepID), or see whose it is with `%s`",
			c.tool, c.key, shell.Word(ap.Namespace), shell.Word(ap.Tool), shell.Show(c.key).Flag("--tenant", c.op.Tenant)), activities.ErrTypeForeignRecord, d)
	case ap.Fingerprint != c.fp:
		d.Reason = "fingerprint mismatch"
		e := &oncekey.FingerprintMismatchError{OperationKey: c.key, Tool: c.tool, Stored: ap.Fingerprint, Got: c.fp}
		return c.refusal(e.Error(), oncekey.ErrTypeFingerprintMismatch, d)
	}
	e := &oncekey.ApprovalRequiredError{Tenant: c.op.Tenant, OperationKey: c.key, Tool: c.tool, Status: ap.Status,
		Episode: ap.Episode, DecidedBy: ap.DecidedBy, Reason: ap.Reason, EditedAs: ap.EditedAs}
	if ap.Status == oncekeystore.ApprovalPending {
		d.Reason = "approval pending"
		return c.refusal(e.Error(), oncekey.ErrTypeApprovalPending, d)
	}
	d.ModelMessage = ap.ModelMessage
	switch {
	case ap.Status == oncekeystore.ApprovalDenied && ap.ChangesRequested:
		d.Reason = reasonChangesRequested
	case ap.Status == oncekeystore.ApprovalDenied:
		d.Reason = reasonApprovalDenied
	case ap.Status == oncekeystore.ApprovalReplaced:
		d.Reason = reasonApprovalReplaced
	}
	return c.refusal(e.Error(), oncekey.ErrTypeApproval, d)
}

// refusal is the call's non-retryable error of type typ with details d.
func (c *call) refusal(msg, typ string, d oncekey.Details) error {
	return detailedError(msg, typ, true, nil, d)
}

// reasonEditNotApproved is Details.Reason of a call scheduled as an edit that no approval covers.
const reasonEditNotApproved = "edit not approved"

// editOfHeader returns the wire.HeaderEditOf header of the call, "" when it has none.
func (c *call) editOfHeader(ctx context.Context) (string, error) {
	var orig string
	if h := tinterceptor.Header(ctx); h != nil && h[wire.HeaderEditOf] != nil {
		if err := c.root.opts.DataConverter.FromPayload(h[wire.HeaderEditOf], &orig); err != nil {
			return "", fmt.Errorf("header %s: %w", wire.HeaderEditOf, err)
		}
		if orig == "" {
			return "", fmt.Errorf("header %s is empty", wire.HeaderEditOf)
		}
	}
	return orig, nil
}

// editApproval is the gate of a call scheduled as the edit of the call keyed c.editOf: the
// header only names the original, and everything else is read from the store and derived from
// the arguments the body receives. The call runs only when the original's approval (of the
// call's tenant, namespace, tool, workflow and step) was replaced by the edit keyed
// oncekey.EditKey(original, episode), and that edit's approval authorises this call (approved,
// of its fingerprint and summary, asked by a worker) and names the original (EditOf). It then
// runs under the edit's key. Otherwise it is refused, oncekey.ErrTypeApproval, and nothing is
// asked: an edit is approved by a person's decision on the original, never by a request.
func (c *call) editApproval(ctx context.Context, s oncekeystore.ApprovalStore) error {
	refuse := func(why string) error {
		c.outcome = oncekey.OutcomeRejected
		d := c.details(reasonEditNotApproved, false)
		return c.refusal(fmt.Sprintf("oncekey: %s did not run: it was scheduled as the edit of %s with other arguments, and %s; nothing was asked and nothing ran",
			c.tool, c.editOf, why), oncekey.ErrTypeApproval, d)
	}
	get := func(key string) (*oncekeystore.Approval, error) {
		ap, err := s.GetApproval(ctx, &oncekeystore.GetParams{Tenant: c.op.Tenant, OperationKey: key})
		if errors.Is(err, oncekeystore.ErrNotFound) {
			return nil, nil
		}
		return ap, err
	}
	orig, err := get(c.editOf)
	switch {
	case err != nil:
		return c.storeFailed("get approval", err)
	case orig == nil:
		return refuse("the store holds no approval for that key")
	case orig.Status != oncekeystore.ApprovalReplaced:
		return refuse(fmt.Sprintf("its approval is %s, not replaced by an edit", orig.Status))
	case orig.Namespace != c.op.Namespace || orig.Tool != c.tool || orig.WorkflowID != c.op.WorkflowID || orig.StepID != c.op.StepID:
		return refuse("its approval is of another namespace, tool, workflow or step")
	}
	key, err := oncekey.EditKey(c.op.Namespace, c.op.Tenant, c.editOf, orig.Episode)
	if err != nil || key != orig.EditedAs {
		return refuse("its approval was replaced by another edit")
	}
	c.key = key
	ed, err := get(key)
	switch {
	case err != nil:
		return c.storeFailed("get approval", err)
	case ed == nil || ed.EditOf != c.editOf || !c.authorises(ed):
		return refuse("the edit a person approved is of other arguments")
	}
	return c.signedApproval(ctx, orig)
}
