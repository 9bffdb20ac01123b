package interceptor

import (
	"errors"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/failure"
)

// newError returns the application error of type typ that oncekey returns to a workflow, with
// opts and the details d. Its message is the text for a model of the error (oncekey.ErrorText of
// its oncekey.Label), since a workflow may hand err.Error() to a model; msg, the operator's
// account, goes into d.Message. The cause is kept only where it is the tool's own error (a
// definite failure, a not-applied refusal: the tool's words, which a workflow sees without
// oncekey too); any other cause (a store's error, a child workflow's, a body's whose outcome is
// unknown) is left out of the chain, its text in d.Message.
func newError(msg, typ string, opts temporal.ApplicationErrorOptions, d oncekey.Details) error {
	if d.Message == "" {
		d.Message = msg
	}
	switch {
	case opts.Cause == nil:
	case failure.OfType(typ).ToolCause:
		opts.Cause = toolCause(opts.Cause)
	default:
		if c := operatorText(opts.Cause); !strings.Contains(d.Message, c) {
			d.Message += ": " + c
		}
		opts.Cause = nil
	}
	opts.Details = []any{d}
	probe := temporal.NewApplicationErrorWithOptions("", typ, opts)
	return temporal.NewApplicationErrorWithOptions(oncekey.ErrorText(oncekey.Label(nil, probe)), typ, opts)
}

// toolCause is the cause a definite failure or a not-applied refusal carries to the workflow: the
// tool's own application error when its error holds one (its type is the tool's), else an
// application error of no type with the error's text, so that what the workflow prints is the
// tool's words and no Go type name.
func toolCause(err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr
	}
	return temporal.NewApplicationError(err.Error(), "")
}

// workflowError is the non-retryable error of type typ the workflow side returns (newError).
func workflowError(msg, typ string, cause error, d oncekey.Details) error {
	return newError(msg, typ, temporal.ApplicationErrorOptions{NonRetryable: true, Cause: cause}, d)
}

// operatorText returns the operator's account of err: the Message of its oncekey details when it
// has one (the error's own message is the text for a model), else err.Error().
func operatorText(err error) string {
	if d, ok := oncekey.ErrorDetails(err); ok && d.Message != "" {
		return d.Message
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// causedError is the error an OnEvent hook gets (Event.Err): the error returned to Temporal, and
// through errors.As also the cause its message leaves out (newError).
type causedError struct {
	err, cause error
}

func (e *causedError) Error() string   { return e.err.Error() }
func (e *causedError) Unwrap() []error { return []error{e.err, e.cause} }
