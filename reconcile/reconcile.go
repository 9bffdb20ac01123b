package reconcile

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/failure"
	"github.com/oncekey/oncekey/internal/textcheck"
	"github.com/oncekey/oncekey/oncekeystore"
)

// Names of the reconciliation workflow's signal, update, query and registered type.
const (
	// SignalName is the signal that carries a Resolution to the reconciliation workflow.
	SignalName = "oncekey.resolve"
	// UpdateName is the Workflow Update that carries a Resolution to the reconciliation workflow
	// and answers with its Output: a validator refuses a resolution it cannot take before
	// anything is written to the workflow's history. It has the signal's name; Temporal keeps
	// signal and update names apart.
	UpdateName = "oncekey.resolve"
	// QueryName is the query that returns the reconciliation workflow's StatusReport.
	QueryName = "oncekey.status"
	// WorkflowName is the registered name of the reconciliation workflow.
	WorkflowName = "oncekey.Reconcile"
	// WorkflowIDPrefix starts every reconciliation workflow ID.
	WorkflowIDPrefix = "oncekey-reconcile-"
)

// WorkflowID returns the ID of the reconciliation workflow for an operation key:
// "oncekey-reconcile-" + key. The key already digests the tenant, so one key has one
// investigation however many workflows are blocked on it.
func WorkflowID(key string) string { return WorkflowIDPrefix + key }

// ResolutionOutcome is what an operator (or a receipt lookup) decided happened.
type ResolutionOutcome string

const (
	// Applied: the effect landed. Resolution.Result, if given, is handed back as the activity's
	// result.
	Applied ResolutionOutcome = "applied"
	// NotApplied: the effect did not land. The claim is released and the activity runs again.
	NotApplied ResolutionOutcome = "not_applied"
	// Failed: a definite failure; the effect did not and will not land. The activity fails,
	// non-retryable.
	Failed ResolutionOutcome = "failed"
)

// Valid reports whether o is Applied, NotApplied or Failed.
func (o ResolutionOutcome) Valid() bool {
	return o == Applied || o == NotApplied || o == Failed
}

// Status returns the record status the outcome is written as: applied, released or failed.
func (o ResolutionOutcome) Status() oncekeystore.Status {
	switch o {
	case Applied:
		return oncekeystore.StatusApplied
	case NotApplied:
		return oncekeystore.StatusReleased
	case Failed:
		return oncekeystore.StatusFailed
	}
	return ""
}

// Resolution is a decision on an operation whose outcome is unknown. It is the argument of the
// UpdateName update and the payload of the SignalName signal.
type Resolution struct {
	// Outcome is the decision. Required.
	Outcome ResolutionOutcome `json:"outcome"`
	// Epoch is the record's epoch the decision was made on: oncekeystore.Record.Epoch, or
	// StatusReport.Epoch of the reconciliation workflow, as read while the outcome was unknown
	// (`oncekey show` and `oncekey list` print it). Required. The workflow and Store.Resolve refuse a
	// decision for another epoch (the operation has moved on: that episode was settled and a later
	// attempt ran), so a decision delivered twice, or by two people, lands at most once.
	Epoch int64 `json:"epoch"`
	// EffectReference identifies the effect downstream (a ticket number, a charge ID). Optional;
	// at most oncekey.MaxEffectReferenceBytes bytes.
	EffectReference string `json:"effect_reference,omitempty"`
	// Result is the activity's result as JSON, for Applied only. It must decode into the
	// activity's declared result type. Empty means the zero value.
	Result json.RawMessage `json:"result,omitempty"`
	// Note says why (free text, stored with the record); at most MaxNoteBytes bytes.
	Note string `json:"note,omitempty"`
	// ResolvedBy names who decided (a person, or "receipt:<tool>" for an automatic lookup); at
	// most MaxResolvedByBytes bytes.
	ResolvedBy string `json:"resolved_by,omitempty"`
	// Tenant, if set, must be the tenant of the operation; a mismatch makes the signal invalid.
	// Resolve sets it.
	Tenant string `json:"tenant,omitempty"`
	// RequestID identifies this resolution: the workflow names it in
	// StatusReport.LastInvalidRequestID when it refuses it as a signal, and Resolve sends it as the
	// update ID, so a resolution sent twice with one RequestID is taken once. Optional; Resolve
	// sets a fresh one.
	RequestID string `json:"request_id,omitempty"`
	// Signature is the resolution's signed statement (decisionsig.Signed's JSON, made by
	// SignResolution), at most oncekeystore.MaxSignatureBytes. Optional; workers with a trust list
	// (okworker.Options.TrustList) refuse a resolution without a valid one, and store it with the
	// record (oncekeystore.SignatureStore).
	Signature json.RawMessage `json:"signature,omitempty"`
}

// Limits on a Resolution's text fields. A resolution travels in a signal and in the
// reconciliation workflow's history and is stored with the record, so its free text is bounded
// well below Temporal's 2 MB payload limit.
const (
	MaxNoteBytes       = 64 << 10
	MaxResolvedByBytes = 1024
)

// InvalidResolutionError: a Resolution is malformed. Nothing was signalled or written.
type InvalidResolutionError struct {
	Field  string
	Reason string
	// Err is the store's refusal when the store refused the resolution as given (see Record).
	Err error
}

func (e *InvalidResolutionError) Error() string {
	return fmt.Sprintf("reconcile: invalid resolution: %s: %s", e.Field, e.Reason)
}

func (e *InvalidResolutionError) Unwrap() error { return e.Err }

// Validate checks r: a known Outcome, an Epoch of at least 1, a Result only with Applied and only as valid JSON, and
// EffectReference, Note and ResolvedBy valid UTF-8 without NUL bytes (Postgres text cannot hold
// NUL) within their limits (oncekey.MaxEffectReferenceBytes, MaxNoteBytes, MaxResolvedByBytes).
// It returns an *InvalidResolutionError naming the bad field.
func (r Resolution) Validate() error {
	if !r.Outcome.Valid() {
		return &InvalidResolutionError{Field: "Outcome", Reason: fmt.Sprintf("%q is not %q, %q or %q", r.Outcome, Applied, NotApplied, Failed)}
	}
	if r.Epoch < 1 {
		return &InvalidResolutionError{Field: "Epoch", Reason: fmt.Sprintf("%d is not an epoch: give the epoch of the record the decision is for (`oncekey show KEY` prints it; StatusReport.Epoch, Record.Epoch)", r.Epoch)}
	}
	for _, f := range []struct {
		name, v string
		limit   int
	}{
		{"EffectReference", r.EffectReference, oncekey.MaxEffectReferenceBytes},
		{"Note", r.Note, MaxNoteBytes},
		{"ResolvedBy", r.ResolvedBy, MaxResolvedByBytes},
	} {
		if reason := textcheck.Problem(f.v, f.limit); reason != "" {
			return &InvalidResolutionError{Field: f.name, Reason: reason}
		}
	}
	if len(bytes.TrimSpace(r.Result)) > 0 {
		if r.Outcome != Applied {
			return &InvalidResolutionError{Field: "Result", Reason: fmt.Sprintf("a result is only allowed with %q", Applied)}
		}
		if !json.Valid(r.Result) {
			return &InvalidResolutionError{Field: "Result", Reason: "is not valid JSON"}
		}
	}
	if len(r.Signature) > oncekeystore.MaxSignatureBytes {
		return &InvalidResolutionError{Field: "Signature", Reason: fmt.Sprintf("%d bytes is more than %d", len(r.Signature), oncekeystore.MaxSignatureBytes)}
	}
	return nil
}

// Application error types of the UpdateName update's refusals (a *temporal.ApplicationError from
// the update's result; nothing was written to the workflow's history or the store).
const (
	// ErrTypeRefused: the resolution cannot settle this operation (a bad outcome, another tenant,
	// a result that does not decode into the tool's result type, a store refusal); the workflow
	// keeps waiting. The message says why.
	ErrTypeRefused = failure.TypeRefused
	// ErrTypeNotWaiting: the workflow is not waiting for a resolution: it is still inspecting the
	// record or waiting for a live claim's lease, another resolution is being recorded, or it
	// has decided. The message names its state.
	ErrTypeNotWaiting = failure.TypeNotWaiting
)

// Output is the result of the reconciliation workflow.
type Output struct {
	Outcome ResolutionOutcome `json:"outcome"`
	// Result is the activity's result for Applied: a proto-marshalled commonpb.Payloads, exactly
	// as stored with the record. Empty when the activity has no result.
	Result          []byte `json:"result,omitempty"`
	EffectReference string `json:"effect_reference,omitempty"`
	Note            string `json:"note,omitempty"`
	ResolvedBy      string `json:"resolved_by,omitempty"`
	// Failure is the reason for Failed, as text.
	Failure string `json:"failure,omitempty"`
	// Epoch is the record's epoch the outcome was decided on.
	Epoch int64 `json:"epoch,omitempty"`
	// RequestID is the Resolution.RequestID of the signal whose decision was recorded; "" when the
	// operation was settled another way (a receipt lookup, the record found settled).
	RequestID string `json:"request_id,omitempty"`
}

// State is where a reconciliation workflow stands.
type State string

const (
	StateInspecting      State = "inspecting"             // reading the record
	StateWaitingForLease State = "waiting_for_lease"      // a live claim still runs; waiting for its lease
	StateWaitingForClaim State = "waiting_for_claim"      // no record yet; an attempt may still claim until Input.ClaimDeadline
	StateReceiptLookup   State = "receipt_lookup"         // running the tool's Reconcile hook
	StateWaiting         State = "waiting_for_resolution" // waiting for the UpdateName update or the SignalName signal
	StateResolved        State = "resolved"               // decided; the workflow is finishing
)

// Values of SearchAttributeStatus on the approval workflow, which sets them in this order. A
// decided approval's value is its oncekeystore.ApprovalStatus.
const (

	// SearchStatusWaitingForApproval: the approval is pending; the workflow waits for a
	// decision or its deadline (ApprovalStateWaiting). ApprovalWaitingQuery lists these.
	SearchStatusWaitingForApproval = "waiting_for_approval"
	// SearchStatusApproved, SearchStatusDenied and SearchStatusTimedOut: decided
	// (ApprovalStateDecided), by a person or by the deadline.
	SearchStatusApproved = string(oncekeystore.ApprovalApproved)
	SearchStatusDenied   = string(oncekeystore.ApprovalDenied)
	SearchStatusTimedOut = string(oncekeystore.ApprovalTimedOut)
	// SearchStatusOtherArguments: the key's approval was asked for other arguments
	// (ApprovalOutput.FingerprintMismatch); nothing was asked for this call, and it is refused.
	SearchStatusOtherArguments = "fingerprint_mismatch"
)

// StatusReport is the answer of the QueryName query.
type StatusReport struct {
	State        State  `json:"state"`
	Tenant       string `json:"tenant"`
	OperationKey string `json:"operation_key"`
	Tool         string `json:"tool"`
	WorkflowID   string `json:"workflow_id"`
	StepID       string `json:"step_id"`
	Reason       string `json:"reason,omitempty"`
	// RecordStatus is the record's status at the last inspection.
	RecordStatus oncekeystore.Status `json:"record_status,omitempty"`
	// Epoch is the record's epoch at the last inspection: once State is StateWaiting, the epoch a
	// Resolution must name.
	Epoch int64 `json:"epoch,omitempty"`
	// ClaimDeadline is Input.ClaimDeadline: while State is StateWaitingForClaim, the time after
	// which a still missing record settles NotApplied.
	ClaimDeadline time.Time `json:"claim_deadline,omitzero"`
	// WaitingSince is when the workflow started waiting for a Resolution (zero before).
	WaitingSince time.Time `json:"waiting_since,omitempty"`
	// LastInvalidSignal is why the last signal was ignored, if one was: also a signal whose
	// payload does not decode into a Resolution (a number for a string field, a bare string).
	LastInvalidSignal string `json:"last_invalid_signal,omitempty"`
	// LastInvalidRequestID is the RequestID of that signal ("" when it had none or did not decode).
	LastInvalidRequestID string `json:"last_invalid_request_id,omitempty"`
	// InvalidSignals counts the invalid signals so far, across runs continued as new.
	InvalidSignals int `json:"invalid_signals,omitempty"`
	// Outcome is the decision once State is resolved.
	Outcome ResolutionOutcome `json:"outcome,omitempty"`
}

// ErrNoReconciliation: no reconciliation workflow is running for the key: it was never started,
// or it already finished. Test with errors.Is.
var ErrNoReconciliation = errors.New("reconcile: no running reconciliation workflow")

// ErrUnconfirmed: the resolution was delivered to the reconciliation workflow, but the workflow
// neither accepted nor refused it within ConfirmWait (or before ctx ended), typically because no
// worker is running it or it is still busy. The workflow handles the signal when it gets to it;
// check with Status or the record. Test with errors.Is.
var ErrUnconfirmed = errors.New("reconcile: resolution delivered but not yet confirmed")

// RefusedError: the reconciliation workflow received the resolution and did not apply it. Either
// it refused it (Reason is the update's refusal, or for a signal its
// StatusReport.LastInvalidSignal: a tenant mismatch, a result that does not decode into the tool's
// result type…; the workflow keeps waiting and the record is unchanged), or the operation was settled another way (SettledAs is then the workflow's
// output, with an outcome other than the one sent), or the workflow ended without an outcome
// (a record past its retention). Test with errors.As.
type RefusedError struct {
	Key       string
	Reason    string
	SettledAs *Output
	// Signature: the workflow refused the resolution because of its signature (a worker with a
	// trust list; the activity's oncekey.ErrTypeSignatureRefused): sign it with a key the
	// workers' trust list holds for the record's tenant and tool. errors.Is(err,
	// decisionsig.ErrRefused) reports it too. Known from the update's refusal only: false for a
	// refusal read from the query after a signal.
	Signature bool
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("reconcile: resolve %s: refused: %s", e.Key, e.Reason)
}

// Unwrap returns decisionsig.ErrRefused for a refusal because of the signature, else nil.
func (e *RefusedError) Unwrap() error { return signatureRefused(e.Signature) }

// signatureRefused is what a refusal error unwraps to: decisionsig.ErrRefused when it was
// refused because of its signature.
func signatureRefused(signature bool) error {
	if signature {
		return decisionsig.ErrRefused
	}
	return nil
}

// ConfirmWait bounds how long ResolveOutput and Decide wait in all for the workflow to accept or
// refuse what they sent: the update and, where they fall back to the signal, the signal and the
// watch after it share this one budget (the update gets all of it but signalReserve).
const ConfirmWait = 10 * time.Second

// signalReserve is the part of ConfirmWait an update that no worker took leaves for the signal
// sent instead and a first look at the workflow.
const signalReserve = 2 * time.Second

// withConfirmWait returns ctx bounded by ConfirmWait from now (ctx's own deadline if sooner).
func withConfirmWait(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, ConfirmWait)
}

// confirmPoll is the pause between two looks at the workflow while Resolve waits.
const confirmPoll = 200 * time.Millisecond

// Resolve is ResolveOutput without the output: it returns nil once the workflow finished with
// r's outcome, and ResolveOutput's errors.
func Resolve(ctx context.Context, c client.Client, tenant, key string, r Resolution) error {
	_, err := ResolveOutput(ctx, c, tenant, key, r)
	return err
}

// ResolveOutput validates r and gives it to the reconciliation workflow of key as the
// UpdateName Workflow Update, with r.RequestID (a fresh one when empty) as the update ID, so a
// resolution sent again with the same RequestID is taken once. The workflow's validator accepts
// or refuses it before anything is written to its history; an accepted one is recorded and the
// workflow's Output (its decision) is returned. It waits at most ConfirmWait in all, and not past
// ctx.
//
// Where the update cannot be used it falls back to the SignalName signal and watches the workflow
// (its status query and its result) for what is left of ConfirmWait: the workflow is not waiting yet (still inspecting
// the record or waiting for a live claim's lease: the signal is taken once it waits), the server
// has updates turned off, the running workflow predates the update handler, or no worker accepted
// the update in time (the signal is durable; the update may still be taken too, and then the
// second of the two is refused). Errors:
//   - *InvalidResolutionError: r is malformed; nothing was sent.
//   - ErrNoReconciliation (wrapped): no reconciliation workflow is running for the key.
//   - *RefusedError: the workflow refused r (Reason says why: a tenant mismatch, an epoch the
//     operation has moved on from, a result that does not decode into the tool's result type, the
//     store's refusal) and keeps waiting, or the operation was settled another way or by another
//     resolution of the same outcome (SettledAs; its RequestID is not r's).
//   - ErrUnconfirmed (wrapped): delivered, but no answer in time; the workflow still handles it
//     when it gets to it (once a worker polls its task queue).
//
// A worker must be running the reconciliation workflow for ResolveOutput to get an answer.
func ResolveOutput(ctx context.Context, c client.Client, tenant, key string, r Resolution) (*Output, error) {
	if strings.TrimSpace(key) == "" {
		return nil, &InvalidResolutionError{Field: "key", Reason: "must not be empty"}
	}
	if strings.TrimSpace(tenant) == "" {
		return nil, &InvalidResolutionError{Field: "tenant", Reason: "must not be empty"}
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	r.Tenant = tenant
	if len(r.Result) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, r.Result); err != nil {
			return nil, &InvalidResolutionError{Field: "Result", Reason: err.Error()}
		}
		r.Result = buf.Bytes()
	}
	if err := fillRequestID("resolve", key, &r.RequestID); err != nil {
		return nil, err
	}
	return deliver(ctx, c, resolveTarget(key), r, r.RequestID, delivery[Output, StatusReport]{
		asSent:  func(out *Output) error { return settledAsSent(key, out, r) },
		refused: func(r refusal) error { return &RefusedError{Key: key, Reason: r.reason, Signature: r.signature} },
		ended:   "the reconciliation workflow ended without an outcome: ",
	})
}

// resolveTarget is the reconciliation workflow of key, as the target of a resolution.
func resolveTarget(key string) target {
	return target{op: "resolve", noun: "resolution", key: key, id: WorkflowID(key), update: UpdateName, signal: SignalName,
		query: QueryName, queryOp: "status", notWaiting: failure.NotWaiting, none: ErrNoReconciliation, list: "list open operations with reconcile.List"}
}

// settledAsSent returns nil when out is the decision r made (its outcome and its RequestID), else a
// *RefusedError saying how the operation was settled instead.
func settledAsSent(key string, out *Output, r Resolution) error {
	if out.Outcome != r.Outcome {
		return &RefusedError{Key: key, SettledAs: out,
			Reason: fmt.Sprintf("the operation was settled as %s by %q instead", out.Outcome, out.ResolvedBy)}
	}
	if out.RequestID != r.RequestID {
		// The same outcome, but another decision's: this one was not the one recorded (its note,
		// reference and result, if any, were not stored).
		return &RefusedError{Key: key, SettledAs: out,
			Reason: fmt.Sprintf("the operation was settled as %s by %q (another resolution) before this one was recorded", out.Outcome, out.ResolvedBy)}
	}
	return nil
}

// target is a workflow of oncekey's that takes a person's decision, as an update or a signal:
// the reconciliation workflow of a key (a resolution) or its approval workflow (a decision).
type target struct {
	op, noun string // the operation ("resolve") and what is sent ("resolution"), for errors
	key, id  string
	// update, signal and query are the workflow's names of the decision update and signal and of
	// its query (whose report says where it stands and which signal it refused last); queryOp
	// names the query in errors ("status").
	update, signal, query, queryOp string
	// notWaiting is the kind (failure table row) of the update's refusal that means "not yet":
	// the signal is sent instead, and is taken once the workflow waits.
	notWaiting failure.Kind
	// none is the sentinel of a workflow that does not exist (ErrNoReconciliation, ErrNoApproval)
	// and list says where to find the ones that do.
	none error
	list string
}

// missing is the error of op on the target that failed with err: wrapping t.none when the
// workflow does not exist (a *serviceerror.NotFound), else err wrapped.
func (t target) missing(op string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("reconcile: %s %s: %w (workflow %s was never started or has finished; %s): %v", op, t.key, t.none, t.id, t.list, err)
	}
	return fmt.Errorf("reconcile: %s %s: %w", op, t.key, err)
}

// query asks the target's workflow its query and decodes the report into an R. Errors name
// t.queryOp: t.missing's, or the decoding's.
func query[R any](ctx context.Context, c client.Client, t target) (*R, error) {
	v, err := c.QueryWorkflow(ctx, t.id, "", t.query)
	if err != nil {
		return nil, t.missing(t.queryOp, err)
	}
	var rep R
	if err := v.Get(&rep); err != nil {
		return nil, fmt.Errorf("reconcile: %s %s: decode: %w", t.queryOp, t.key, err)
	}
	return &rep, nil
}

// send sends arg as the target's update, with update ID requestID, and decodes the answer into
// out, waiting until signalReserve before ctx's deadline (ctx carries the ConfirmWait budget), so
// that a signal sent instead still has time. fallback reports that the update could not be used
// and the signal should be sent instead: no worker took it in time, the server or the running
// workflow does not take updates, or the workflow is not waiting yet. refused is the workflow's
// refusal (its validator's or its handler's), "" when it answered.
func (t target) send(ctx context.Context, c client.Client, requestID string, arg, out any) (fallback bool, refused *refusal, err error) {
	uctx, cancel := ctx, context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) > 2*signalReserve {
		uctx, cancel = context.WithDeadline(ctx, dl.Add(-signalReserve))
	}
	defer cancel()
	h, err := c.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
		UpdateID:     requestID,
		WorkflowID:   t.id,
		UpdateName:   t.update,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		var (
			nf       *serviceerror.NotFound
			timeout  *client.WorkflowUpdateServiceTimeoutOrCanceledError
			unimpl   *serviceerror.Unimplemented
			denied   *serviceerror.PermissionDenied
			precond  *serviceerror.FailedPrecondition
			rejected *temporal.ApplicationError
		)
		switch {
		case errors.As(err, &nf):
			return false, nil, t.missing(t.op, err)
		case errors.As(err, &timeout) && ctx.Err() == nil:
			return true, nil, nil // no worker took it in time: the signal is durable
		case errors.As(err, &unimpl), errors.As(err, &denied), errors.As(err, &precond):
			return true, nil, nil // the server does not take updates (for this workflow)
		case failure.Is(err, t.notWaiting):
			return true, nil, nil // not waiting yet: the signal is taken once it waits
		case errors.As(err, &rejected):
			return false, refusalOf(rejected), nil
		case strings.Contains(err.Error(), "unknown update"):
			return true, nil, nil // the running workflow predates the update handler
		}
		return false, nil, fmt.Errorf("reconcile: %s %s: %w", t.op, t.key, err)
	}
	if err := h.Get(uctx, out); err != nil {
		var (
			rejected *temporal.ApplicationError
			timeout  *client.WorkflowUpdateServiceTimeoutOrCanceledError
		)
		switch {
		case failure.Is(err, t.notWaiting):
			return true, nil, nil
		case errors.As(err, &rejected):
			return false, refusalOf(rejected), nil
		case errors.As(err, &timeout), uctx.Err() != nil:
			return false, nil, fmt.Errorf("reconcile: %s %s: %w within %s: the workflow accepted the %s and is still recording it (workflow %s)", t.op, t.key, ErrUnconfirmed, ConfirmWait, t.noun, t.id)
		case strings.Contains(err.Error(), "unknown update"):
			return true, nil, nil
		}
		return false, nil, fmt.Errorf("reconcile: %s %s: %w", t.op, t.key, err)
	}
	return false, nil, nil
}

// watch waits, until ctx ends (it carries what is left of the ConfirmWait budget), until a signal
// sent to the target is answered: finished reports whether the workflow has closed (and the
// answer then, in err), and refused asks the workflow's query whether it refused the signal
// (reason "" when not). Trouble asking is no answer; once ctx ends watch returns ErrUnconfirmed
// (wrapped).
func (t target) watch(ctx context.Context, finished func(context.Context) (bool, error), refused func(context.Context) (string, error)) error {
	var last error
	for {
		if done, err := finished(ctx); done || err != nil {
			return err
		}
		qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
		reason, qerr := refused(qctx)
		qcancel()
		switch {
		case qerr != nil:
			last = qerr
		case reason != "":
			return &refusal{reason: reason}
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("reconcile: %s %s: %w (workflow %s; last query: %v)", t.op, t.key, ErrUnconfirmed, t.id, last)
			}
			return fmt.Errorf("reconcile: %s %s: %w within %s (workflow %s is busy or no worker runs it)", t.op, t.key, ErrUnconfirmed, ConfirmWait, t.id)
		case <-time.After(confirmPoll):
		}
	}
}

// refusalOf is the workflow's refusal of a decision sent as its update: the message, and whether
// it was refused for its signature (its one detail is oncekey.ErrTypeSignatureRefused).
func refusalOf(rejected *temporal.ApplicationError) *refusal {
	r := &refusal{reason: rejected.Message()}
	var typ any // not a string: details of another shape are no error (nor, made in this process, a panic)
	if rejected.HasDetails() && rejected.Details(&typ) == nil {
		r.signature = typ == failure.TypeSignatureRefused
	}
	return r
}

// refusal is what watch returns for a signal the workflow refused; the caller turns it into its
// own error type.
type refusal struct {
	reason string
	// signature: the decision was refused for its signature (the update's refusal names
	// oncekey.ErrTypeSignatureRefused in its details; a signal's refusal does not say).
	signature bool
}

func (r *refusal) Error() string { return r.reason }

// closedOutput reports whether workflow id has closed and, if it completed, decodes its result
// into out; failed is its failure when it ended without one. Trouble asking is not an answer
// (closed false).
func closedOutput(ctx context.Context, c client.Client, id string, out any) (closed bool, failed error) {
	desc, err := c.DescribeWorkflow(ctx, id, "")
	if err != nil || desc.RawResponse.GetWorkflowExecutionInfo().GetCloseTime() == nil {
		return false, nil
	}
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, out); err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		return true, err
	}
	return true, nil
}

// fillRequestID sets *id, when empty, to a fresh RequestID (24 hex digits) for a decision sent
// without one; op and key name the decision in the error.
func fillRequestID(op, key string, id *string) error {
	if *id != "" {
		return nil
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("reconcile: %s %s: request ID: %w", op, key, err)
	}
	*id = hex.EncodeToString(b[:])
	return nil
}

// delivery is what deliver needs of a protocol besides its target: how the workflow's output O
// shows that the decision sent is the one recorded (asSent, an error saying how it was decided
// instead), the refusal error, and the refusal's prefix for a workflow that ended without a
// decision. R is the report of the workflow's query, which names its last refused signal.
type delivery[O, R any] struct {
	asSent  func(out *O) error
	refused func(r refusal) error
	ended   string
}

// report is the query report R of a decision workflow, which names the last signal it refused.
type report[R any] interface {
	*R
	lastRefused() (requestID, reason string)
}

// deliver is the client side of the decision kernel: within ConfirmWait (and ctx) it sends d
// (with update ID requestID) to t's workflow as its update and returns the workflow's answer, or,
// where the update cannot be used, sends it as the signal and watches the workflow (its result,
// and its query's last refused signal) until it has finished or refused d. Errors: the
// protocol's refusal (p.refused, or p.asSent's), t.missing's for a workflow that does not exist,
// ErrUnconfirmed (wrapped) for no answer in time.
func deliver[O, R any, PR report[R]](ctx context.Context, c client.Client, t target, d any, requestID string, p delivery[O, R]) (*O, error) {
	ctx, cancel := withConfirmWait(ctx)
	defer cancel()
	var out O
	fallback, refused, err := t.send(ctx, c, requestID, d, &out)
	switch {
	case err != nil:
		return nil, err
	case refused != nil:
		return nil, p.refused(*refused)
	case !fallback:
		return &out, p.asSent(&out)
	}
	if err := c.SignalWorkflow(ctx, t.id, "", t.signal, d); err != nil {
		return nil, t.missing(t.op, err)
	}
	var got *O
	err = t.watch(ctx, func(ctx context.Context) (bool, error) {
		var o O
		closed, failed := closedOutput(ctx, c, t.id, &o)
		switch {
		case !closed:
			return false, nil
		case failed != nil:
			return true, p.refused(refusal{reason: p.ended + failed.Error()})
		}
		got = &o
		return true, p.asSent(got)
	}, func(ctx context.Context) (string, error) {
		rep, err := query[R](ctx, c, t)
		if err != nil {
			return "", err
		}
		id, reason := PR(rep).lastRefused()
		if id != requestID {
			return "", nil
		}
		return reason, nil
	})
	var ref *refusal
	if errors.As(err, &ref) {
		return nil, p.refused(*ref)
	}
	return got, err
}

// Status asks the reconciliation workflow of key where it stands. It returns an error wrapping
// ErrNoReconciliation when no such workflow exists. A finished workflow still answers (with
// State resolved) while its history is retained, if a worker polls its task queue.
func Status(ctx context.Context, c client.Client, key string) (*StatusReport, error) {
	return query[StatusReport](ctx, c, resolveTarget(key))
}

// lastRefused is the last refused signal's request ID and reason.
func (r *StatusReport) lastRefused() (requestID, reason string) {
	return r.LastInvalidRequestID, r.LastInvalidSignal
}

// List returns a page of records waiting for reconciliation: p's filters, with Status defaulting
// to unknown. It is Store.List with that default; store errors are returned wrapped.
func List(ctx context.Context, s oncekeystore.Store, p oncekeystore.ListParams) (*oncekeystore.ListResult, error) {
	if p.Status == "" {
		p.Status = oncekeystore.StatusUnknown
	}
	res, err := s.List(ctx, &p)
	if err != nil {
		return nil, fmt.Errorf("reconcile: list: %w", err)
	}
	return res, nil
}
