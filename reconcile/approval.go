package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/internal/failure"
	"github.com/oncekey/oncekey/internal/textcheck"
	"github.com/oncekey/oncekey/oncekeystore"
)

// Names of the approval workflow (oncekey.ApprovalPolicy): its registered type, workflow IDs,
// update, signal and query.
const (
	// ApprovalWorkflowName is the registered name of the approval workflow.
	ApprovalWorkflowName = "oncekey.Approval"
	// ApprovalWorkflowIDPrefix starts every approval workflow ID.
	ApprovalWorkflowIDPrefix = "oncekey-approval-"
	// DecideUpdateName is the Workflow Update that carries a Decision to the approval workflow
	// and answers with its ApprovalOutput; a validator refuses a decision it cannot take before
	// anything is written to the workflow's history.
	DecideUpdateName = "oncekey.decide"
	// DecideSignalName is the signal that carries a Decision (one JSON object) to the approval
	// workflow. It has the update's name; Temporal keeps signal and update names apart.
	DecideSignalName = "oncekey.decide"
	// ApprovalQueryName is the query that returns the approval workflow's ApprovalReport.
	ApprovalQueryName = "oncekey.approval"
)

// ApprovalWorkflowID returns the ID of the approval workflow for an operation key:
// "oncekey-approval-" + key. The key digests the tenant, so one key has one approval however many
// calls wait on it.
func ApprovalWorkflowID(key string) string { return ApprovalWorkflowIDPrefix + key }

// DecisionKind is what a person decided on an approval request.
type DecisionKind string

const (
	// Approve lets the call run (Policy.Authorize still decides right before the effect).
	Approve DecisionKind = "approve"
	// Deny rejects the call and its repeats within the policy's retention. It needs a reason.
	Deny DecisionKind = "deny"
	// RequestChanges rejects the call as it is and asks the model for other arguments: recorded
	// as denied, with Approval.ChangesRequested. It needs a Message saying what to change.
	RequestChanges DecisionKind = "request_changes"
)

// MaxEditBytes is the most a Decision's edited Arguments may hold, in bytes of JSON.
const MaxEditBytes = 64 << 10

// Status returns the approval status the decision is recorded as.
func (k DecisionKind) Status() oncekeystore.ApprovalStatus {
	switch k {
	case Approve:
		return oncekeystore.ApprovalApproved
	case Deny, RequestChanges:
		return oncekeystore.ApprovalDenied
	}
	return ""
}

// Decision is a person's decision on an approval request: the argument of the DecideUpdateName
// update and the payload of the DecideSignalName signal, whose JSON is
//
//	{"decision":"approve"|"deny"|"request_changes","tenant":…,"episode":…,"decided_by":…,"reason":…,"request_id":…,
//	 "message":…,"arguments":{…}}
type Decision struct {
	// Decision is Approve or Deny. Required.
	Decision DecisionKind `json:"decision"`
	// Tenant is the tenant of the operation. Required: the workflow refuses a decision naming
	// another tenant.
	Tenant string `json:"tenant"`
	// Episode is the approval's episode the decision is for (oncekeystore.Approval.Episode, as `oncekey
	// approvals` prints it); 0 means the pending one. A decision for another episode is refused,
	// so one delivered late cannot land on a later request.
	Episode int64 `json:"episode,omitempty"`
	// DecidedBy names who decided (self-asserted); at most MaxResolvedByBytes bytes.
	DecidedBy string `json:"decided_by,omitempty"`
	// Reason says why; required to deny. At most MaxNoteBytes bytes.
	Reason string `json:"reason,omitempty"`
	// RequestID identifies this decision: Decide sends it as the update ID, so a decision sent
	// twice with one RequestID is taken once, and the workflow names it in
	// ApprovalReport.LastInvalidRequestID when it refuses it as a signal. Optional; Decide sets a
	// fresh one.
	RequestID string `json:"request_id,omitempty"`
	// Message is what the model reads with the call's result (oncekey.ToolResult.Message): plain
	// text, at most oncekeystore.MaxModelMessageBytes, kept apart from Reason, which may hold operator
	// detail and never reaches the model. Required to request changes; optional otherwise.
	Message string `json:"message,omitempty"`
	// Arguments, with Approve only, approves the call with these arguments instead of the
	// model's: one JSON object, at most MaxEditBytes, that the worker checks against the tool's
	// input type before the decision is recorded (approvaledit.EditArguments). The call as proposed
	// is settled as replaced (oncekeystore.ApprovalReplaced), and the edit runs as a new operation
	// (oncekey.EditKey) in its place. Tool, tenant and namespace are the approval's: an edit
	// cannot change them.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Signature is the decision's signed statement (decisionsig.Signed's JSON, made by
	// SignDecision), at most oncekeystore.MaxSignatureBytes. Optional; workers with a trust list
	// (okworker.Options.TrustList) refuse a decision without a valid one, and store it with the
	// approval.
	Signature json.RawMessage `json:"signature,omitempty"`
}

// InvalidDecisionError: a Decision is malformed. Nothing was sent or written.
type InvalidDecisionError struct {
	Field  string
	Reason string
}

func (e *InvalidDecisionError) Error() string {
	return fmt.Sprintf("reconcile: invalid decision: %s: %s", e.Field, e.Reason)
}

// Validate checks d: Approve or Deny, a tenant, an episode not below 0, a reason to deny, and
// DecidedBy, Reason and RequestID valid UTF-8 without NUL bytes within their limits
// (MaxResolvedByBytes, MaxNoteBytes, MaxResolvedByBytes). It returns an *InvalidDecisionError
// naming the bad field.
func (d Decision) Validate() error {
	if d.Decision.Status() == "" {
		return &InvalidDecisionError{Field: "Decision", Reason: fmt.Sprintf("%q is not %q, %q or %q", d.Decision, Approve, Deny, RequestChanges)}
	}
	if strings.TrimSpace(d.Tenant) == "" {
		return &InvalidDecisionError{Field: "Tenant", Reason: "must not be empty: give the operation's tenant"}
	}
	if d.Episode < 0 {
		return &InvalidDecisionError{Field: "Episode", Reason: fmt.Sprintf("%d is not an episode: give the approval's episode, or 0 for the pending one", d.Episode)}
	}
	if d.Decision == Deny && strings.TrimSpace(d.Reason) == "" {
		return &InvalidDecisionError{Field: "Reason", Reason: "a denial needs a reason"}
	}
	if d.Decision == RequestChanges && strings.TrimSpace(d.Message) == "" {
		return &InvalidDecisionError{Field: "Message", Reason: "a request for changes needs a message for the model saying what to change"}
	}
	if reason := oncekeystore.ModelMessageProblem(d.Message); reason != "" {
		return &InvalidDecisionError{Field: "Message", Reason: reason}
	}
	if err := d.ValidateArguments(); err != nil {
		return err
	}
	if len(d.Signature) > oncekeystore.MaxSignatureBytes {
		return &InvalidDecisionError{Field: "Signature", Reason: fmt.Sprintf("%d bytes is more than %d", len(d.Signature), oncekeystore.MaxSignatureBytes)}
	}
	for _, f := range []struct {
		name, v string
		limit   int
	}{
		{"Tenant", d.Tenant, MaxResolvedByBytes},
		{"DecidedBy", d.DecidedBy, MaxResolvedByBytes},
		{"Reason", d.Reason, MaxNoteBytes},
		{"RequestID", d.RequestID, MaxResolvedByBytes},
	} {
		if reason := textcheck.Problem(f.v, f.limit); reason != "" {
			return &InvalidDecisionError{Field: f.name, Reason: reason}
		}
	}
	return nil
}

// ValidateArguments checks the shape of an edit, as Validate does: with Approve only, one JSON
// object within MaxEditBytes, or an *InvalidDecisionError. Whether it fits the tool is the
// worker's to check (approvaledit.EditArguments).
func (d Decision) ValidateArguments() error {
	if len(d.Arguments) == 0 {
		return nil
	}
	if d.Decision != Approve {
		return &InvalidDecisionError{Field: "Arguments", Reason: "only an approval takes edited arguments"}
	}
	if len(d.Arguments) > MaxEditBytes {
		return &InvalidDecisionError{Field: "Arguments", Reason: fmt.Sprintf("%d bytes is more than %d", len(d.Arguments), MaxEditBytes)}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(d.Arguments, &m); err != nil || m == nil {
		return &InvalidDecisionError{Field: "Arguments", Reason: "must be one JSON object: the tool's arguments as they should run"}
	}
	return nil
}

// ApprovalOutput is the result of the approval workflow and the answer of the DecideUpdateName
// update: the approval's decision.
type ApprovalOutput struct {
	// Status is approved, denied or timed_out.
	Status  oncekeystore.ApprovalStatus `json:"status"`
	Episode int64                       `json:"episode"`
	// Created reports that the request was pending when this workflow read it, so the decision is
	// this workflow's; false when it found the approval decided already. (The worker makes the
	// request; in histories of the earlier protocol, Created reports that this workflow asked.)
	Created   bool      `json:"created,omitempty"`
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Reason    string    `json:"reason,omitempty"`
	// RequestID is the Decision.RequestID of the decision recorded; "" when the approval was
	// decided otherwise (found decided, timed out).
	RequestID string `json:"request_id,omitempty"`
	// FingerprintMismatch: the key's approval was asked for other arguments (Fingerprint is its
	// fingerprint); nothing was asked or decided, and the call is refused.
	FingerprintMismatch bool   `json:"fingerprint_mismatch,omitempty"`
	Fingerprint         string `json:"fingerprint,omitempty"`
	// Message is the message for the model recorded with the decision; ChangesRequested says a
	// denial asked for other arguments.
	Message          string `json:"message,omitempty"`
	ChangesRequested bool   `json:"changes_requested,omitempty"`
	// EditedAs is, for status replaced, the operation key of the edit that runs instead, and
	// Arguments its arguments in canonical JSON, as the worker checked them (absent when the
	// answer was read from the store: arguments are never stored).
	EditedAs  string          `json:"edited_as,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Signers and SignersRequired are, for a request whose policy asks for more than one signer
	// (oncekey.ApprovalPolicy.Signers), how many different trusted signers have approved it and
	// how many must. Status pending with them set answers a partial approval: it was recorded,
	// and the request waits for another signer (SignersText). 0 for a one-signer request.
	Signers         int `json:"signers,omitempty"`
	SignersRequired int `json:"signers_required,omitempty"`
}

// Waiting reports whether o answers a partial approval: recorded, and the request still waits
// for another signer.
func (o ApprovalOutput) Waiting() bool {
	return o.Status == oncekeystore.ApprovalPending && o.SignersRequired > 1
}

// SignersText is what the CLI, the inbox and the decision update say of a partial approval:
// "recorded; waiting for another signer (1 of 2)".
func (o ApprovalOutput) SignersText() string {
	return fmt.Sprintf("recorded; waiting for another signer (%d of %d)", o.Signers, o.SignersRequired)
}

// ApprovalState is where an approval workflow stands.
type ApprovalState string

const (
	ApprovalStateRequesting ApprovalState = "requesting"           // asking the store
	ApprovalStateWaiting    ApprovalState = "waiting_for_decision" // waiting for the update or the signal, or the deadline
	ApprovalStateDecided    ApprovalState = "decided"              // decided; the workflow is finishing
)

// ApprovalReport is the answer of the ApprovalQueryName query.
type ApprovalReport struct {
	State        ApprovalState `json:"state"`
	Tenant       string        `json:"tenant"`
	OperationKey string        `json:"operation_key"`
	Tool         string        `json:"tool"`
	WorkflowID   string        `json:"workflow_id"`
	StepID       string        `json:"step_id,omitempty"`
	Summary      string        `json:"summary"`
	// Status and Episode are the approval's, once requested; a decision names Episode.
	Status      oncekeystore.ApprovalStatus `json:"status,omitempty"`
	Episode     int64                       `json:"episode,omitempty"`
	RequestedAt time.Time                   `json:"requested_at,omitzero"`
	Deadline    time.Time                   `json:"deadline,omitzero"`
	DecidedBy   string                      `json:"decided_by,omitempty"`
	DecidedAt   time.Time                   `json:"decided_at,omitzero"`
	Reason      string                      `json:"reason,omitempty"`
	// Message and ChangesRequested are what the decision told the model (Decision.Message, and
	// whether it was RequestChanges); EditedAs is the operation key of the edit a person approved
	// in place of the call (Decision.Arguments). Empty until decided so.
	Message          string `json:"message,omitempty"`
	ChangesRequested bool   `json:"changes_requested,omitempty"`
	EditedAs         string `json:"edited_as,omitempty"`
	// LastInvalidSignal is why the last signal was refused, if one was; LastInvalidRequestID is
	// its RequestID. InvalidSignals counts them across runs continued as new.
	LastInvalidSignal    string `json:"last_invalid_signal,omitempty"`
	LastInvalidRequestID string `json:"last_invalid_request_id,omitempty"`
	InvalidSignals       int    `json:"invalid_signals,omitempty"`
	// Escalated is set once the request, undecided past its policy's Timeout, was escalated
	// (oncekey.ApprovalPolicy.Escalation): to whom, when, and why.
	Escalated *ApprovalEscalated `json:"escalated,omitempty"`
}

// ApprovalEscalated is an approval request's escalation, as the approval workflow recorded it.
type ApprovalEscalated struct {
	To     string    `json:"to"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// Application error types of the DecideUpdateName update's refusals (a *temporal.ApplicationError
// from the update's result; nothing was written to the workflow's history or the store).
const (
	// ErrTypeDecisionRefused: the decision cannot settle this approval (another tenant, another
	// episode, a denial without a reason, the store's refusal); the workflow keeps waiting.
	ErrTypeDecisionRefused = failure.TypeDecisionRefused
	// ErrTypeNotPending: the workflow is not waiting for a decision: it is still asking the store,
	// another decision is being recorded, or it has decided. The message names its state.
	ErrTypeNotPending = failure.TypeNotPending
)

// ErrNoApproval: no approval workflow is running for the key: nothing asked, or it already
// decided. Test with errors.Is.
var ErrNoApproval = errors.New("reconcile: no running approval workflow")

// DecisionRefusedError: the approval workflow received the decision and did not record it. Either
// it refused it (Reason: another tenant, another episode, the store's refusal; the workflow keeps
// waiting), or the approval was decided another way (DecidedAs is then the workflow's output:
// another decision, or the deadline), or the workflow ended without a decision. Test with
// errors.As.
type DecisionRefusedError struct {
	Key       string
	Reason    string
	DecidedAs *ApprovalOutput
	// Signature: the workflow refused the decision because of its signature (a worker with a
	// trust list; the activity's oncekey.ErrTypeSignatureRefused): sign it with a key the
	// workers' trust list holds for the call's tenant and tool. errors.Is(err,
	// decisionsig.ErrRefused) reports it too. Known from the update's refusal only: false for a
	// refusal read from the query after a signal.
	Signature bool
}

func (e *DecisionRefusedError) Error() string {
	return fmt.Sprintf("reconcile: decide %s: refused: %s", e.Key, e.Reason)
}

// Unwrap returns decisionsig.ErrRefused for a refusal because of the signature, else nil.
func (e *DecisionRefusedError) Unwrap() error { return signatureRefused(e.Signature) }

// decideTarget is the approval workflow of key, as the target of a decision.
func decideTarget(key string) target {
	return target{op: "decide", noun: "decision", key: key, id: ApprovalWorkflowID(key), update: DecideUpdateName, signal: DecideSignalName,
		query: ApprovalQueryName, queryOp: "query approval", notWaiting: failure.NotPending, none: ErrNoApproval, list: "list pending approvals with `oncekey approvals`"}
}

// Decide validates d and gives it to the approval workflow of key as the DecideUpdateName
// Workflow Update, with d.RequestID (a fresh one when empty) as the update ID, so a decision sent
// again with the same RequestID is taken once. The workflow's validator accepts or refuses it
// before anything is written to its history; an accepted one is written to the store and the
// workflow's ApprovalOutput is returned. It waits at most ConfirmWait in all, and not past ctx.
// An approval of a request that needs more signers (oncekey.ApprovalPolicy.Signers) than have
// approved it is recorded as a partial approval: the output is pending, with Waiting true and
// the signer counts (SignersText: "recorded; waiting for another signer (1 of 2)").
//
// Where the update cannot be used (as for ResolveOutput: the workflow is still asking the store,
// the server or the running workflow does not take updates, no worker took it in time) it falls
// back to the DecideSignalName signal and watches the workflow's ApprovalQueryName query and its
// result for what is left of ConfirmWait. Errors:
//   - *InvalidDecisionError: d is malformed; nothing was sent.
//   - ErrNoApproval (wrapped): no approval workflow is running for the key.
//   - *DecisionRefusedError: the workflow refused d (another tenant, another episode) and keeps
//     waiting, or the approval was decided otherwise (DecidedAs; its RequestID is not d's).
//   - ErrUnconfirmed (wrapped): delivered, but no answer in time; the workflow takes it once a
//     worker polls its task queue (the task queue of the workflow that asked).
//
// A worker must be running the approval workflow for Decide to get an answer.
func Decide(ctx context.Context, c client.Client, key string, d Decision) (*ApprovalOutput, error) {
	if strings.TrimSpace(key) == "" {
		return nil, &InvalidDecisionError{Field: "key", Reason: "must not be empty"}
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if err := fillRequestID("decide", key, &d.RequestID); err != nil {
		return nil, err
	}
	return deliver(ctx, c, decideTarget(key), d, d.RequestID, delivery[ApprovalOutput, ApprovalReport]{
		asSent: func(out *ApprovalOutput) error { return decidedAsSent(key, out, d) },
		refused: func(r refusal) error {
			return &DecisionRefusedError{Key: key, Reason: r.reason, Signature: r.signature}
		},
		ended: "the approval workflow ended without a decision: ",
	})
}

// decidedAsSent returns nil when out records d (its status and its RequestID), else a
// *DecisionRefusedError saying how the approval was decided instead.
func decidedAsSent(key string, out *ApprovalOutput, d Decision) error {
	want := d.Decision.Status()
	if len(d.Arguments) > 0 {
		want = oncekeystore.ApprovalReplaced
	}
	if out.Status == want && out.RequestID == d.RequestID {
		return nil
	}
	if want == oncekeystore.ApprovalApproved && out.Waiting() && out.RequestID == d.RequestID {
		// A partial approval: recorded, and the request waits for another signer (SignersText).
		return nil
	}
	by := out.DecidedBy
	if by == "" {
		by = "oncekey"
	}
	return &DecisionRefusedError{Key: key, DecidedAs: out,
		Reason: fmt.Sprintf("the approval was already %s by %q (another decision, or its deadline) before this one was recorded", out.Status, by)}
}

// QueryApproval asks the approval workflow of key where it stands. It returns an error wrapping
// ErrNoApproval when no such workflow exists. A finished workflow still answers (State decided)
// while its history is retained, if a worker polls its task queue.
func QueryApproval(ctx context.Context, c client.Client, key string) (*ApprovalReport, error) {
	return query[ApprovalReport](ctx, c, decideTarget(key))
}

// lastRefused is the last refused signal's request ID and reason.
func (r *ApprovalReport) lastRefused() (requestID, reason string) {
	return r.LastInvalidRequestID, r.LastInvalidSignal
}
