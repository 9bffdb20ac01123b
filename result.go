package oncekey

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
)

// Next actions in ToolResult.NextAction.
const (
	NextNone      = "none"             // done; use the result
	NextPoll      = "poll"             // ask again with the same key after RetryAfter
	NextReconcile = "reconcile"        // do not repeat; ask for the operation's status
	NextAsk       = "ask_for_approval" // a person must decide (rejected, expired)
	NextStop      = "stop"             // a definite failure; do not repeat
)

// ToolResult is a structured result for handing to a model: what happened, whether repeating is
// safe, and what to do next.
type ToolResult struct {
	Status          Outcome       `json:"status"`
	OperationKey    string        `json:"operation_key,omitempty"`
	EffectReference string        `json:"effect_reference,omitempty"`
	SafeToRepeat    bool          `json:"safe_to_repeat"`
	NextAction      string        `json:"next_action"`
	RetryAfter      time.Duration `json:"retry_after,omitempty"`
	Result          any           `json:"result,omitempty"`
	Error           string        `json:"error,omitempty"`
}

// Label turns a tool call's result and error (as the workflow or the activity sees them) into a
// ToolResult.
func Label(result any, err error) ToolResult {
	if err == nil {
		return ToolResult{Status: OutcomeApplied, SafeToRepeat: true, NextAction: NextNone, Result: result}
	}
	tr := ToolResult{Error: err.Error()}
	var (
		ind  *IndeterminateOutcomeError
		fpm  *FingerprintMismatchError
		inf  *InFlightError
		exp  *ExpiredOperationError
		su   *StoreUnavailableError
		appE *temporal.ApplicationError
	)
	errType := ""
	if errors.As(err, &appE) {
		errType = appE.Type()
	}
	switch {
	case errors.As(err, &ind) || errType == ErrTypeIndeterminate:
		tr.Status, tr.NextAction = OutcomeUnknown, NextReconcile
		if ind != nil {
			tr.OperationKey = ind.OperationKey
		}
	case errors.As(err, &fpm) || errType == ErrTypeFingerprintMismatch || errType == ErrTypeUnauthorized:
		tr.Status, tr.NextAction = OutcomeRejected, NextAsk
		if fpm != nil {
			tr.OperationKey = fpm.OperationKey
		}
	case errors.As(err, &inf) || errType == ErrTypeInFlight:
		tr.Status, tr.NextAction, tr.SafeToRepeat = OutcomeInFlight, NextPoll, true
		if inf != nil {
			tr.OperationKey, tr.RetryAfter = inf.OperationKey, inf.RetryAfter
		}
	case errors.As(err, &exp) || errType == ErrTypeExpired:
		tr.Status, tr.NextAction = OutcomeExpired, NextAsk
		if exp != nil {
			tr.OperationKey = exp.OperationKey
		}
	case errors.As(err, &su) || errType == ErrTypeStoreUnavailable || IsNotApplied(err) || errType == ErrTypeNotApplied:
		tr.Status, tr.NextAction, tr.SafeToRepeat = OutcomeFailed, NextPoll, true
	default:
		tr.Status, tr.NextAction = OutcomeFailed, NextStop
	}
	return tr
}
