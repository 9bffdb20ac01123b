package oncekey

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey/internal/errdetail"
	"github.com/oncekey/oncekey/internal/failure"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/oncekeystore"
)

// Next actions in ToolResult.NextAction.
const (
	NextNone      = "none"             // done; use the result
	NextPoll      = "poll"             // ask again with the same arguments after retry_after_seconds
	NextReconcile = "reconcile"        // do not repeat; the outcome is not known yet and must be checked
	NextAsk       = "ask_for_approval" // a person must decide (not approved, expired)
	NextStop      = "stop"             // a definite failure, or one a repeat cannot fix; do not repeat
	// NextFix: nothing ran, because of the call itself: the tool name or the arguments are not
	// valid, or (status conflict) the operation was made before with other arguments. The model
	// fixes the arguments; a loop that means a new operation gives the call a new step ID
	// (WithStepID).
	NextFix = "fix_arguments"
)

// Reasons in ToolResult.Reason: which of the cases a status and next action cover led to the
// answer, where the status alone does not tell. Each reason has a text of its own.
const (
	// ReasonNotRecorded: applied, and oncekey kept no record of the call (a ReadOnly tool, a tool
	// without a policy, or a result Label cannot trace): a repeat runs the tool again.
	ReasonNotRecorded = "not_recorded"
	// ReasonConfirmed: applied, after the outcome was unknown for a while: reconciliation (a
	// receipt lookup or a person) confirmed that the effect landed. This is the first call's
	// effect, not a replay.
	ReasonConfirmed = "confirmed"
	// ReasonDenied: rejected, a person reviewed the call and denied it.
	ReasonDenied = "denied"
	// ReasonNotApproved: rejected, the call needs a person's approval and was not approved in
	// time (or no approval was asked for).
	ReasonNotApproved = "not_approved"
	// ReasonNotAuthorized: rejected by Policy.Authorize.
	ReasonNotAuthorized = "not_authorized"
	// ReasonRepeat: conflict, the call repeats an operation that is already settled and the tool's
	// policy refuses repeats (Policy.OnHit OnHitFailFast).
	ReasonRepeat = "repeat"
	// ReasonEdited: applied or replayed, with arguments a person changed when approving the call
	// (ToolResult.Arguments, ToolResult.Changed).
	ReasonEdited = "edited"
	// ReasonChangesRequested: rejected, a person reviewed the call and asked for other arguments
	// (ToolResult.Message says which).
	ReasonChangesRequested = "changes_requested"
)

// ModelTextEntry is one entry of the table of texts for a model: the status, next action and
// reason of a ToolResult, and its fixed text.
type ModelTextEntry struct {
	Status Outcome
	Next   string
	Reason string
	Text   string
}

// modelTexts are the texts for a model, one per status, next action and reason: what happened
// and what to do next, in 300 bytes at most, with no operator detail (no hosts, users, schemas,
// commands, fingerprints, Go names). The detail stays in the Go error and in the logs.
// docs/agent-loops.md lists them (TestModelTextsDocumented keeps the two the same).
var modelTexts = []ModelTextEntry{
	{OutcomeApplied, NextNone, "", "Done: the tool ran and this is its result. Do not call it again for the same purpose; " +
		"the same call with the same arguments returns this result without doing it again."},
	{OutcomeApplied, NextNone, ReasonNotRecorded, "Done: the tool ran and this is its result."},
	{OutcomeApplied, NextNone, ReasonConfirmed, "Done: its outcome was unclear at first, and a check confirmed that it " +
		"happened; this is its result. Do not call it again for the same purpose; the same call returns this result."},
	{OutcomeApplied, NextNone, ReasonEdited, "Done with changed arguments: a person approved this call after changing " +
		"some of its arguments (see changed); it ran with the arguments shown, and this is its result. Do not call it again " +
		"for the same purpose."},
	{OutcomeReplayed, NextNone, "", "Already done: this exact call was made before, so nothing was done again; this is the " +
		"stored result of that call. Do not call it again for the same purpose."},
	{OutcomeReplayed, NextNone, ReasonEdited, "Already done with changed arguments: a person approved this call after " +
		"changing some of its arguments (see changed); nothing was done again, and this is the stored result. Do not call it again."},
	{OutcomeInFlight, NextPoll, "", "Still running: the same call is in progress and nothing new was started. Wait " +
		"retry_after_seconds, then make the same call again with the same arguments to get its result."},
	{OutcomeConflict, NextFix, "", "Conflict: this operation was made before with different arguments, so nothing was " +
		"done. To get its result, call again with the earlier arguments; if you mean a separate new action, ask the user first."},
	{OutcomeConflict, NextStop, ReasonRepeat, "Refused: this exact action was already done once, and this tool must not be " +
		"repeated, so nothing was done now. Do not call it again; tell the user it had already been done."},
	{OutcomeRejected, NextStop, ReasonDenied, "Declined: a person reviewed this call and did not approve it. Nothing was " +
		"done. Do not call it again for the same purpose or try another way to do it; tell the user it was declined."},
	{OutcomeRejected, NextFix, ReasonChangesRequested, "Changes requested: a person reviewed this call and asked for " +
		"different arguments; the message says what to change. Nothing was done. Call again with the changes, or ask the user."},
	{OutcomeRejected, NextStop, ReasonEdited, "Already handled: a person approved this call with changed arguments, " +
		"and the call with those arguments was made instead; nothing more was done. Do not call it again for the same purpose."},
	{OutcomeRejected, NextAsk, ReasonNotApproved, "Not approved: this call needs a person's approval, and it was not " +
		"given in time. Nothing was done. Do not retry it as it is; ask the user how to proceed."},
	{OutcomeRejected, NextStop, ReasonNotAuthorized, "Not allowed: this call is not permitted with these arguments. " +
		"Nothing was done. Do not retry it or try another way to do it; tell the user it is not allowed."},
	{OutcomeRejected, NextFix, "", "Refused: there is no tool by this name, or its arguments are not valid JSON for it. " +
		"Nothing was done. Check the tool name and the arguments, then call again."},
	{OutcomeUnknown, NextReconcile, "", "Outcome unknown: the action may or may not have happened, and which is not " +
		"known yet. Do not repeat it and do not try another way to do the same thing; tell the user its outcome is not " +
		"confirmed and must be checked."},
	{OutcomeExpired, NextAsk, "", "Too old: this operation is past the time its outcome is kept, so it was not done again. " +
		"Ask the user before doing it as a new action."},
	{OutcomeFailed, NextPoll, "", "Not done: a temporary problem stopped the call before it took effect. It is safe to " +
		"make the same call again later."},
	{OutcomeFailed, NextStop, "", "Failed: the call did not succeed, and repeating it as it is will not help. Do not " +
		"retry it; tell the user it failed."},
}

// ModelText returns the fixed text for a model of a tool call with status, next action next and
// reason (ToolResult.Text; reason is "" where the status and next action say it all): what
// happened and what to do next, at most 300 bytes, with no operator detail. An unknown triple
// gives the text of failed/stop.
func ModelText(status Outcome, next, reason string) string {
	for _, e := range modelTexts {
		if e.Status == status && e.Next == next && e.Reason == reason {
			return e.Text
		}
	}
	return ModelText(OutcomeFailed, NextStop, "")
}

// ModelTexts returns every entry of the table of texts for a model, in a fixed order: each
// status, next action and reason a ToolResult can carry, with its text.
func ModelTexts() []ModelTextEntry { return append([]ModelTextEntry(nil), modelTexts...) }

// ToolResult is a structured result for handing to a model: what happened, whether repeating is
// safe, and what to do next. Label, LabelReplay and the agent package build it. It carries no
// operator detail: the Go error that led to it (fingerprints, hosts, commands) stays with the
// caller, for logs.
//
// Its JSON form has "status", "operation_key", "effect_reference", "safe_to_repeat", "replayed",
// "next_action", "reason" (omitted when empty), "retry_after_seconds" (a number of seconds,
// omitted when zero), "result", "text", and, when set, "message", "arguments" and "changed".
type ToolResult struct {
	Status          Outcome `json:"status"`
	OperationKey    string  `json:"operation_key,omitempty"`
	EffectReference string  `json:"effect_reference,omitempty"`
	// SafeToRepeat reports whether calling the tool again for the same operation (the same step,
	// so the same operation key) cannot produce a second effect and is worth doing: true for
	// applied and replayed (a repeat replays the stored result), in_flight, and failures that
	// provably did not apply; false for unknown, rejected, conflict, expired and definite
	// failures.
	SafeToRepeat bool `json:"safe_to_repeat"`
	// Replayed is true when no tool ran for this answer: a stored result or a remembered failure
	// was given again.
	Replayed   bool   `json:"replayed,omitempty"`
	NextAction string `json:"next_action"`
	// Reason is one of the Reason… constants where the status and next action cover several
	// cases (which text applies), else "".
	Reason string `json:"reason,omitempty"`
	// RetryAfter is how long to wait before asking again (in_flight): sized by the interceptor
	// from what it knows of the tool (see InFlightError.RetryAfter). JSON: retry_after_seconds.
	RetryAfter time.Duration `json:"-"`
	Result     any           `json:"result,omitempty"`
	// Text is the fixed text for a model of Status, NextAction and Reason (ModelText).
	Text string `json:"text"`
	// Message is what the person who decided the call's approval said to the model (a denial's
	// or a request for changes' message, at most oncekeystore.MaxModelMessageBytes of plain text), or "". It
	// is the person's words, kept apart from the reason recorded for operators.
	Message string `json:"message,omitempty"`
	// Arguments are the arguments the call ran with when a person changed them (reason edited),
	// as canonical JSON; Changed names the top-level members that differ from the model's.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Changed   []string        `json:"changed,omitempty"`
}

type toolResultJSON ToolResult

type toolResultWire struct {
	toolResultJSON
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
}

// MarshalJSON writes RetryAfter as retry_after_seconds, a form a model reads without knowing Go.
func (r ToolResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(toolResultWire{toolResultJSON(r), r.RetryAfter.Seconds()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *ToolResult) UnmarshalJSON(b []byte) error {
	var w toolResultWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = ToolResult(w.toolResultJSON)
	r.RetryAfter = time.Duration(w.RetryAfterSeconds * float64(time.Second))
	return nil
}

// LabelReplay labels a result known to be a replay of an earlier effect (status replayed, safe to
// repeat, next action none), for callers that learn it from the store or an OnEvent hook: a
// workflow cannot tell a replayed result from a fresh one by the value alone.
func LabelReplay(result any, operationKey string) ToolResult {
	return ToolResult{Status: OutcomeReplayed, OperationKey: operationKey, SafeToRepeat: true, Replayed: true,
		NextAction: NextNone, Result: result, Text: ModelText(OutcomeReplayed, NextNone, "")}
}

// errorDetails is the part of an oncekey application error's details Label reads: the
// interceptor's detail payload (oncekey.Details) carries the operation key and whether the
// error is a remembered failure given again.
type errorDetails struct {
	OperationKey    string  `json:"operation_key"`
	EffectReference string  `json:"effect_reference"`
	Outcome         Outcome `json:"outcome"`
	Replay          bool    `json:"replay"`
	Reason          string  `json:"reason"`
	ModelMessage    string  `json:"model_message"`
}

// changesRequestedReason is the interceptor's Details.Reason of a call a person asked to change;
// approvalReplacedReason of a call whose approval was replaced by an edit that ran instead.
const (
	changesRequestedReason = "changes requested"
	approvalReplacedReason = "approval replaced"
)

// approvalDeniedReason is the interceptor's Details.Reason of a call a person denied.
const approvalDeniedReason = "approval denied"

// readDetails reads the first detail of appErr as errorDetails (see errdetail.Into).
func readDetails(appErr *temporal.ApplicationError) (errorDetails, bool) {
	var d errorDetails
	if !errdetail.Into(appErr, &d) {
		return errorDetails{}, false
	}
	return d, true
}

// Label turns a tool call's result and error, as the workflow (or the activity) sees them, into
// a ToolResult. err may be one of this package's typed errors, an error marked with NotApplied
// or Failed, or what reaches a workflow: a temporal.ActivityError wrapping an ApplicationError
// whose type is one of the ErrType… constants, a TimeoutError or a CanceledError.
//
//	error                                            status     safe  next (reason)
//	nil, a result with an operation key              applied    yes   none
//	nil, reconciliation confirmed it                 applied    yes   none (confirmed)
//	nil, no operation key (ReadOnly, no policy)      applied    yes   none (not_recorded)
//	IndeterminateOutcome, ResultTooLarge,            unknown    no    reconcile
//	  a timeout after the tool may have started,
//	  cancellation
//	ResultTooLarge of an Idempotent tool (the        failed     yes   stop
//	  interceptor gave its claim back)
//	FingerprintMismatch                              conflict   no    fix_arguments
//	Unauthorized                                     rejected   no    stop (not_authorized)
//	ApprovalRequired (not approved in time, none)    rejected   no    ask_for_approval (not_approved)
//	ApprovalRequired (a person denied it)            rejected   no    stop (denied)
//	InFlight                                         in_flight  yes   poll (RetryAfter)
//	ExpiredOperation                                 expired    no    ask_for_approval
//	StoreUnavailable, NotApplied (retryable),        failed     yes   poll
//	  Unsettled, a schedule-to-start timeout
//	NotApplied (non-retryable)                       failed     yes   stop
//	Failed, Config, StoreSchemaError (the store's    failed     no    stop
//	  table missing or not migrated), ErrNoKey,
//	  AsyncCompletion, ArgsMismatch,
//	  UnboundHeaders, anything else
//
// A nil error with a result read as a converter.RawValue (ExecuteActivity(...).Get(ctx, &raw))
// tells replayed from applied, and carries the operation key and effect reference, from the
// metadata the interceptor puts on a claimed tool's result (MetadataOutcome…); Result is then
// the result's JSON (a json.RawMessage) when the payload holds JSON, else the RawValue. Any other
// result is taken as applied, with no key and reason not_recorded: the value alone cannot tell.
// Use LabelReplay for a result known to be a replay. Text is ModelText of the status, next action
// and reason: the error's text, written for operators, is not in the ToolResult.
func Label(result any, err error) ToolResult {
	tr := label(result, err)
	tr.Text = ModelText(tr.Status, tr.NextAction, tr.Reason)
	return tr
}

func label(result any, err error) ToolResult {
	if err == nil {
		tr := ToolResult{Status: OutcomeApplied, SafeToRepeat: true, NextAction: NextNone, Result: result}
		var raw *converter.RawValue
		switch r := result.(type) {
		case converter.RawValue:
			raw = &r
		case *converter.RawValue:
			raw = r
		}
		if raw != nil && raw.Payload() != nil {
			md := raw.Payload().GetMetadata()
			if Outcome(md[wire.MetadataOutcome]) == OutcomeReplayed {
				tr.Status, tr.Replayed = OutcomeReplayed, true
			}
			tr.OperationKey = string(md[wire.MetadataOperationKey])
			tr.EffectReference = string(md[wire.MetadataEffectReference])
			switch reason := string(md[wire.MetadataReason]); {
			case tr.Status == OutcomeApplied && reason == ReasonConfirmed:
				tr.Reason = ReasonConfirmed
			case reason == ReasonEdited:
				tr.Reason, tr.Arguments = ReasonEdited, json.RawMessage(md[wire.MetadataArguments])
				if c := string(md[wire.MetadataChanged]); c != "" {
					tr.Changed = strings.Split(c, ",")
				}
			}
			tr.Result = payloadJSON(raw.Payload(), *raw)
		}
		if tr.OperationKey == "" {
			tr.Reason = ReasonNotRecorded
		}
		return tr
	}
	var tr ToolResult
	var (
		ind      *IndeterminateOutcomeError
		fpm      *FingerprintMismatchError
		repeat   *RepeatRefusedError
		inf      *InFlightError
		exp      *ExpiredOperationError
		su       *oncekeystore.StoreUnavailableError
		schema   *oncekeystore.StoreSchemaError
		big      *oncekeystore.ResultTooLargeError
		approval *ApprovalRequiredError
		timeout  *temporal.TimeoutError
		cancel   *temporal.CanceledError
		details  errorDetails
	)
	row, appErr := failure.Of(err)
	nonRetryable := false
	if appErr != nil {
		nonRetryable = appErr.NonRetryable()
		if d, ok := readDetails(appErr); ok {
			details = d
			tr.OperationKey = details.OperationKey
			tr.EffectReference = details.EffectReference
			tr.Replayed = details.Replay
		}
		if d := appErr.NextRetryDelay(); d > 0 {
			tr.RetryAfter = d
		}
	}
	is := func(kinds ...failure.Kind) bool { return slices.Contains(kinds, row.Kind) }
	// kind is the row of the failure table whose label the error gets: its type's, or the one
	// this package's error travels as; None for the cases after.
	var kind failure.Kind
	switch {
	case errors.As(err, &ind) || is(failure.Indeterminate):
		kind = failure.Indeterminate
		if ind != nil {
			tr.OperationKey = ind.OperationKey
		}
	case errors.As(err, &big) || is(failure.ResultTooLarge):
		kind = failure.ResultTooLarge
		if big != nil {
			tr.OperationKey = big.OperationKey
		}
	case errors.As(err, &approval) || is(failure.Approval, failure.ApprovalPending):
		kind = failure.Approval
		if approval != nil {
			tr.OperationKey = approval.OperationKey
		}
	case errors.As(err, &fpm) || is(failure.FingerprintMismatch):
		// The same operation was made before with other arguments: a conflict (the IETF
		// idempotency draft's 422). Nothing ran; the record is untouched.
		kind = failure.FingerprintMismatch
		if fpm != nil {
			tr.OperationKey = fpm.OperationKey
		}
	case errors.As(err, &repeat) || is(failure.RepeatRefused):
		// The tool's policy refuses repeats (OnHitFailFast) and this call repeats a settled
		// operation: nothing ran, and the same call is refused again.
		kind = failure.RepeatRefused
		if repeat != nil {
			tr.OperationKey = repeat.OperationKey
		}
	case is(failure.ArgsMismatch):
		// The arguments the worker received are not the ones the workflow scheduled (a workflow
		// worker without oncekey's interceptor, or a converter that changes values): nothing
		// ran, and the same call fails the same way until the deployment is fixed.
		kind = failure.ArgsMismatch
	case is(failure.UnboundHeaders):
		// The call's tenant or step ID headers are not bound by a key the worker lists (a
		// workflow outside the deployment, or a workflow worker without the key): nothing ran,
		// and the same call fails the same way until the deployment is fixed.
		kind = failure.UnboundHeaders
	case is(failure.Unauthorized):
		// Policy.Authorize refused: the same call would be refused again.
		kind = failure.Unauthorized
	case errors.As(err, &inf) || is(failure.InFlight, failure.LostClaim):
		kind = failure.InFlight
		if inf != nil {
			tr.OperationKey, tr.RetryAfter = inf.OperationKey, inf.RetryAfter
		}
	case errors.As(err, &exp) || is(failure.Expired):
		kind = failure.Expired
		if exp != nil {
			tr.OperationKey = exp.OperationKey
		}
	case errors.As(err, &su) || is(failure.StoreUnavailable, failure.Unsettled):
		kind = failure.StoreUnavailable
	case IsNotApplied(err) || is(failure.NotApplied):
		kind = failure.NotApplied
	case IsFailed(err) || is(failure.Failed, failure.Config) || errors.Is(err, ErrNoKey) || errors.As(err, &schema):
		kind = failure.Failed
	case errors.As(err, &timeout):
		if timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			// No worker picked the task up: the tool never started.
			tr.Status, tr.NextAction, tr.SafeToRepeat = OutcomeFailed, NextPoll, true
		} else {
			tr.Status, tr.NextAction = OutcomeUnknown, NextReconcile
		}
		return tr
	case errors.As(err, &cancel):
		tr.Status, tr.NextAction = OutcomeUnknown, NextReconcile
		return tr
	default:
		tr.Status, tr.NextAction = OutcomeFailed, NextStop
		return tr
	}
	r := failure.Get(kind)
	tr.Status, tr.NextAction, tr.Reason, tr.SafeToRepeat = Outcome(r.Label.Status), r.Label.Next, r.Label.Reason, r.Label.SafeToRepeat
	switch {
	case kind == failure.ResultTooLarge && details.Outcome == OutcomeFailed:
		// The tool ran and its result could not be stored: the effect may have landed. For an
		// Idempotent tool the interceptor gave the claim back (its details say failed): running
		// it again is safe but gives the same oversized result, so stop.
		tr.Status, tr.NextAction, tr.SafeToRepeat = OutcomeFailed, NextStop, true
	case kind == failure.Approval:
		// Nothing ran. A person's denial stands for the operation's repeats; a request nobody
		// decided in time, or none at all, can be asked again.
		if (approval != nil && approval.Status == oncekeystore.ApprovalDenied) || details.Reason == approvalDeniedReason {
			tr.NextAction, tr.Reason = NextStop, ReasonDenied
		}
		switch {
		case details.Reason == changesRequestedReason:
			tr.NextAction, tr.Reason = NextFix, ReasonChangesRequested
		case (approval != nil && approval.Status == oncekeystore.ApprovalReplaced) || details.Reason == approvalReplacedReason:
			tr.NextAction, tr.Reason = NextStop, ReasonEdited
		}
		if oncekeystore.ModelMessageProblem(details.ModelMessage) == "" {
			tr.Message = details.ModelMessage
		}
	case r.Class == failure.RetryIfRetryable && nonRetryable:
		tr.NextAction = NextStop // nothing happened, but the same call would be refused again
	}
	return tr
}

// payloadJSON returns the JSON a payload holds, as a json.RawMessage: its data for a "json/plain"
// or "json/protobuf" payload, null for a "binary/null" one; otherwise it returns fallback.
func payloadJSON(p *commonpb.Payload, fallback any) any {
	switch string(p.GetMetadata()[converter.MetadataEncoding]) {
	case converter.MetadataEncodingJSON, converter.MetadataEncodingProtoJSON:
		return json.RawMessage(p.GetData())
	case converter.MetadataEncodingNil:
		return json.RawMessage("null")
	}
	return fallback
}
