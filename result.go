package oncekey

import (
	"encoding/json"
	"errors"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey/internal/errdetail"
)

// Next actions in ToolResult.NextAction.
const (
	NextNone      = "none"             // done; use the result
	NextPoll      = "poll"             // ask again with the same key (after RetryAfter, if set)
	NextReconcile = "reconcile"        // do not repeat; the outcome is being (or must be) established
	NextAsk       = "ask_for_approval" // a person must decide (rejected, expired)
	NextStop      = "stop"             // a definite failure, or one a repeat cannot fix; do not repeat
	NextFix       = "fix_arguments"    // nothing ran: the tool name or the arguments are not valid
)

// modelTexts are the texts for a model, one per status and next action: what happened and what
// to do next, in a few hundred bytes at most, with no operator detail (no hosts, users, schemas,
// commands, fingerprints, Go names). The detail stays in the Go error and in the logs.
var modelTexts = map[Outcome]map[string]string{
	OutcomeApplied: {NextNone: "Done: the tool ran and this is its result. Do not call it again for the same purpose; " +
		"the same call with the same arguments returns this result without doing it again."},
	OutcomeReplayed: {NextNone: "Already done: this exact call was made before, so nothing was done again; this is the " +
		"stored result of that call. Do not call it again for the same purpose."},
	OutcomeInFlight: {NextPoll: "Still running: the same call is in progress and nothing new was started. Wait " +
		"retry_after_seconds, then make the same call again with the same arguments to get its result."},
	OutcomeRejected: {
		NextAsk: "Refused: this call is not allowed, was not approved in time, or the same operation was made before with " +
			"different arguments. Nothing was done. Do not retry it as it is; ask the user how to proceed.",
		NextStop: "Declined: a person reviewed this call and did not approve it. Nothing was done. Do not call it again " +
			"for the same purpose or try another way to do it; tell the user it was declined.",
		NextFix: "Refused: there is no tool by this name, or its arguments are not valid JSON for it. Nothing was done. " +
			"Check the tool name and the arguments, then call again.",
	},
	OutcomeUnknown: {NextReconcile: "Outcome unknown: the action may or may not have happened. Do not repeat it and do " +
		"not try another way to do the same thing; it is being checked, and the user will be told the outcome."},
	OutcomeExpired: {NextAsk: "Too old: this operation is past the time its outcome is kept, so it was not done again. " +
		"Ask the user before doing it as a new action."},
	OutcomeFailed: {
		NextPoll: "Not done: a temporary problem stopped the call before it took effect. It is safe to make the same " +
			"call again later.",
		NextStop: "Failed: the call did not succeed, and repeating it as it is will not help. Do not retry it; tell the " +
			"user it failed.",
	},
}

// ModelText returns the fixed text for a model of a tool call with status and next action next
// (ToolResult.Text): what happened and what to do next, at most 300 bytes, with no operator
// detail. An unknown pair gives the text of failed/stop.
func ModelText(status Outcome, next string) string {
	if t, ok := modelTexts[status][next]; ok {
		return t
	}
	return modelTexts[OutcomeFailed][NextStop]
}

// ToolResult is a structured result for handing to a model: what happened, whether repeating is
// safe, and what to do next. Label, LabelReplay and the agent package build it. It carries no
// operator detail: the Go error that led to it (fingerprints, hosts, commands) stays with the
// caller, for logs.
//
// Its JSON form has "status", "operation_key", "effect_reference", "safe_to_repeat", "replayed",
// "next_action", "retry_after_seconds" (a number of seconds, omitted when zero), "result" and
// "text".
type ToolResult struct {
	Status          Outcome `json:"status"`
	OperationKey    string  `json:"operation_key,omitempty"`
	EffectReference string  `json:"effect_reference,omitempty"`
	// SafeToRepeat reports whether calling the tool again for the same operation (the same step,
	// so the same operation key) cannot produce a second effect and is worth doing: true for
	// applied and replayed (a repeat replays the stored result), in_flight, and failures that
	// provably did not apply; false for unknown, rejected, expired and definite failures.
	SafeToRepeat bool `json:"safe_to_repeat"`
	// Replayed is true when no tool ran for this answer: a stored result or a remembered failure
	// was given again.
	Replayed   bool          `json:"replayed,omitempty"`
	NextAction string        `json:"next_action"`
	RetryAfter time.Duration `json:"-"` // JSON: retry_after_seconds
	Result     any           `json:"result,omitempty"`
	// Text is the fixed text for a model of Status and NextAction (ModelText).
	Text string `json:"text"`
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
		NextAction: NextNone, Result: result, Text: ModelText(OutcomeReplayed, NextNone)}
}

// errorDetails is the part of an oncekey application error's details Label reads: the
// interceptor's detail payload (interceptor.Details) carries the operation key and whether the
// error is a remembered failure given again.
type errorDetails struct {
	OperationKey    string  `json:"operation_key"`
	EffectReference string  `json:"effect_reference"`
	Outcome         Outcome `json:"outcome"`
	Replay          bool    `json:"replay"`
	Reason          string  `json:"reason"`
}

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
//	error                                            status     safe  next
//	nil                                              applied    yes   none
//	IndeterminateOutcome, ResultTooLarge,            unknown    no    reconcile
//	  a timeout after the tool may have started,
//	  cancellation
//	ResultTooLarge of an Idempotent tool (the        failed     yes   stop
//	  interceptor gave its claim back)
//	FingerprintMismatch, Unauthorized,               rejected   no    ask_for_approval
//	  ApprovalRequired (not approved in time, none)
//	ApprovalRequired (a person denied it)            rejected   no    stop
//	InFlight                                         in_flight  yes   poll (RetryAfter)
//	ExpiredOperation                                 expired    no    ask_for_approval
//	StoreUnavailable, NotApplied (retryable),        failed     yes   poll
//	  Unsettled, a schedule-to-start timeout
//	NotApplied (non-retryable)                       failed     yes   stop
//	Failed, Config, StoreSchemaError (the store's    failed     no    stop
//	  table missing or not migrated), ErrNoKey,
//	  anything else
//
// A nil error with a result read as a converter.RawValue (ExecuteActivity(...).Get(ctx, &raw))
// tells replayed from applied, and carries the operation key and effect reference, from the
// metadata the interceptor puts on a claimed tool's result (MetadataOutcome…); Result is then
// the result's JSON (a json.RawMessage) when the payload holds JSON, else the RawValue. Any other
// result is taken as applied, with no key: the value alone cannot tell. Use LabelReplay for a
// result known to be a replay. Text is ModelText of the status and next action: the error's
// text, written for operators, is not in the ToolResult.
func Label(result any, err error) ToolResult {
	tr := label(result, err)
	tr.Text = ModelText(tr.Status, tr.NextAction)
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
			if Outcome(md[MetadataOutcome]) == OutcomeReplayed {
				tr.Status, tr.Replayed = OutcomeReplayed, true
			}
			tr.OperationKey = string(md[MetadataOperationKey])
			tr.EffectReference = string(md[MetadataEffectReference])
			tr.Result = PayloadJSON(raw.Payload(), *raw)
		}
		return tr
	}
	var tr ToolResult
	var (
		ind      *IndeterminateOutcomeError
		fpm      *FingerprintMismatchError
		inf      *InFlightError
		exp      *ExpiredOperationError
		su       *StoreUnavailableError
		schema   *StoreSchemaError
		big      *ResultTooLargeError
		approval *ApprovalRequiredError
		appErr   *temporal.ApplicationError
		timeout  *temporal.TimeoutError
		cancel   *temporal.CanceledError
		details  errorDetails
	)
	errType, nonRetryable := "", false
	if errors.As(err, &appErr) {
		errType, nonRetryable = appErr.Type(), appErr.NonRetryable()
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
	switch {
	case errors.As(err, &ind) || errType == ErrTypeIndeterminate:
		tr.Status, tr.NextAction = OutcomeUnknown, NextReconcile
		if ind != nil {
			tr.OperationKey = ind.OperationKey
		}
	case errors.As(err, &big) || errType == ErrTypeResultTooLarge:
		// The tool ran and its result could not be stored: the effect may have landed. For an
		// Idempotent tool the interceptor gave the claim back (its details say failed): running
		// it again is safe but gives the same oversized result, so stop.
		tr.Status, tr.NextAction = OutcomeUnknown, NextReconcile
		if details.Outcome == OutcomeFailed {
			tr.Status, tr.NextAction, tr.SafeToRepeat = OutcomeFailed, NextStop, true
		}
		if big != nil {
			tr.OperationKey = big.OperationKey
		}
	case errors.As(err, &approval) || errType == ErrTypeApproval || errType == ErrTypeApprovalPending:
		// Nothing ran. A person's denial stands for the operation's repeats; a request nobody
		// decided in time, or none at all, can be asked again.
		tr.Status, tr.NextAction = OutcomeRejected, NextAsk
		if (approval != nil && approval.Status == ApprovalDenied) || details.Reason == approvalDeniedReason {
			tr.NextAction = NextStop
		}
		if approval != nil {
			tr.OperationKey = approval.OperationKey
		}
	case errors.As(err, &fpm) || errType == ErrTypeFingerprintMismatch || errType == ErrTypeUnauthorized ||
		errType == ErrTypeArgsMismatch:
		tr.Status, tr.NextAction = OutcomeRejected, NextAsk
		if fpm != nil {
			tr.OperationKey = fpm.OperationKey
		}
	case errors.As(err, &inf) || errType == ErrTypeInFlight || errType == ErrTypeLostClaim:
		tr.Status, tr.NextAction, tr.SafeToRepeat = OutcomeInFlight, NextPoll, true
		if inf != nil {
			tr.OperationKey, tr.RetryAfter = inf.OperationKey, inf.RetryAfter
		}
	case errors.As(err, &exp) || errType == ErrTypeExpired:
		tr.Status, tr.NextAction = OutcomeExpired, NextAsk
		if exp != nil {
			tr.OperationKey = exp.OperationKey
		}
	case errors.As(err, &su) || errType == ErrTypeStoreUnavailable || errType == ErrTypeUnsettled:
		tr.Status, tr.NextAction, tr.SafeToRepeat = OutcomeFailed, NextPoll, true
	case IsNotApplied(err) || errType == ErrTypeNotApplied:
		tr.Status, tr.NextAction, tr.SafeToRepeat = OutcomeFailed, NextPoll, true
		if nonRetryable {
			tr.NextAction = NextStop // nothing happened, but the same call would be refused again
		}
	case IsFailed(err) || errType == ErrTypeFailed || errType == ErrTypeConfig || errors.Is(err, ErrNoKey) ||
		errors.As(err, &schema):
		tr.Status, tr.NextAction = OutcomeFailed, NextStop
	case errors.As(err, &timeout):
		if timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			// No worker picked the task up: the tool never started.
			tr.Status, tr.NextAction, tr.SafeToRepeat = OutcomeFailed, NextPoll, true
		} else {
			tr.Status, tr.NextAction = OutcomeUnknown, NextReconcile
		}
	case errors.As(err, &cancel):
		tr.Status, tr.NextAction = OutcomeUnknown, NextReconcile
	default:
		tr.Status, tr.NextAction = OutcomeFailed, NextStop
	}
	return tr
}

// PayloadJSON returns the JSON a payload holds, as a json.RawMessage: its data for a "json/plain"
// or "json/protobuf" payload, null for a "binary/null" one; otherwise it returns fallback.
func PayloadJSON(p *commonpb.Payload, fallback any) any {
	switch string(p.GetMetadata()[converter.MetadataEncoding]) {
	case converter.MetadataEncodingJSON, converter.MetadataEncodingProtoJSON:
		return json.RawMessage(p.GetData())
	case converter.MetadataEncodingNil:
		return json.RawMessage("null")
	}
	return fallback
}
