package oncekey

import (
	"encoding/json"
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
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
)

// ToolResult is a structured result for handing to a model: what happened, whether repeating is
// safe, and what to do next. Label and LabelReplay build it.
//
// Its JSON form has "status", "operation_key", "effect_reference", "safe_to_repeat", "replayed",
// "next_action", "retry_after_seconds" (a number of seconds, omitted when zero), "result" and
// "error".
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
	Error      string        `json:"error,omitempty"`
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
		NextAction: NextNone, Result: result}
}

// errorDetails is the part of an oncekey application error's details Label reads: the
// interceptor's detail payload (interceptor.Details) carries the operation key and whether the
// error is a remembered failure given again.
type errorDetails struct {
	OperationKey string  `json:"operation_key"`
	Outcome      Outcome `json:"outcome"`
	Replay       bool    `json:"replay"`
}

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
//	FingerprintMismatch, Unauthorized                rejected   no    ask_for_approval
//	InFlight                                         in_flight  yes   poll (RetryAfter)
//	ExpiredOperation                                 expired    no    ask_for_approval
//	StoreUnavailable, NotApplied (retryable),        failed     yes   poll
//	  Unsettled, a schedule-to-start timeout
//	NotApplied (non-retryable)                       failed     yes   stop
//	Failed, Config, StoreSchemaError (the store's    failed     no    stop
//	  table missing or not migrated), ErrNoKey,
//	  anything else
//
// Use LabelReplay for a result known to be a replay.
func Label(result any, err error) ToolResult {
	if err == nil {
		return ToolResult{Status: OutcomeApplied, SafeToRepeat: true, NextAction: NextNone, Result: result}
	}
	tr := ToolResult{Error: err.Error()}
	var (
		ind     *IndeterminateOutcomeError
		fpm     *FingerprintMismatchError
		inf     *InFlightError
		exp     *ExpiredOperationError
		su      *StoreUnavailableError
		schema  *StoreSchemaError
		big     *ResultTooLargeError
		appErr  *temporal.ApplicationError
		timeout *temporal.TimeoutError
		cancel  *temporal.CanceledError
		details errorDetails
	)
	errType, nonRetryable := "", false
	if errors.As(err, &appErr) {
		errType, nonRetryable = appErr.Type(), appErr.NonRetryable()
		if d, ok := readDetails(appErr); ok {
			details = d
			tr.OperationKey = details.OperationKey
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
	case errors.As(err, &fpm) || errType == ErrTypeFingerprintMismatch || errType == ErrTypeUnauthorized:
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
