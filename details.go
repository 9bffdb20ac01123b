package oncekey

import (
	"errors"

	"github.com/oncekey/oncekey/internal/errdetail"
	"github.com/oncekey/oncekey/oncekeystore"
	"go.temporal.io/sdk/temporal"
)

// Details is the detail payload of the application errors oncekey returns
// (temporal.ApplicationError.Details): which operation, and what its outcome label is.
type Details struct {
	Tenant       string  `json:"tenant,omitempty"`
	OperationKey string  `json:"operation_key,omitempty"`
	Tool         string  `json:"tool"`
	Outcome      Outcome `json:"outcome"`
	// EffectReference is what the tool recorded with SetEffectReference before it ended,
	// when it did.
	EffectReference string `json:"effect_reference,omitempty"`
	// Replay is true when the error is a stored failure given again without running the tool.
	Replay bool `json:"replay,omitempty"`
	// Reason says what made the outcome what it is (a timeout, a panic, a lost claim).
	Reason string `json:"reason,omitempty"`
	// Approval is the approval request the worker made or found for a call it refused for want of
	// an approval (ErrTypeApprovalPending, ErrTypeApproval); nil otherwise.
	Approval *ApprovalDetails `json:"approval,omitempty"`
	// Fingerprint and Version are the fingerprint and Policy.Version the worker derived for the
	// call (as MetadataFingerprint and MetadataVersion on a result), for
	// okworker.CheckIdentity; Fingerprint is "" when the call failed before it had one.
	Fingerprint string `json:"fingerprint,omitempty"`
	Version     string `json:"version,omitempty"`
	// ModelMessage is what the person who decided the call's approval said to the model
	// (oncekeystore.Approval.ModelMessage), for Label to put into ToolResult.Message.
	ModelMessage string `json:"model_message,omitempty"`
	// Message is the operator's account of the error: what happened, with the tool, the operation
	// key, the cause and what to do (an `oncekey resolve` command, a field to fix). The error's own
	// message is the text for a model (ErrorText), which carries none of it.
	Message string `json:"message,omitempty"`
}

// ApprovalDetails is the approval request behind a refusal (Details.Approval), as the worker
// wrote or found it in the store.
type ApprovalDetails struct {
	Status      oncekeystore.ApprovalStatus `json:"status"`
	Episode     int64                       `json:"episode"`
	Fingerprint string                      `json:"fingerprint"`
	// Summary is the text the person is shown, derived on the worker (ApprovalPolicy.Summary).
	Summary string `json:"summary"`
	// Created: this attempt asked the episode.
	Created bool `json:"created,omitempty"`
}

// ErrorDetails returns the Details of an oncekey application error in err's chain, and false
// when err carries none. It reads both an error that crossed Temporal (details encoded) and one
// made in the same workflow code (details held as Go values, of any type: one that is not
// Details reads as none rather than panicking in the SDK).
func ErrorDetails(err error) (Details, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.HasDetails() {
		return Details{}, false
	}
	var d Details
	if !errdetail.Into(appErr, &d) {
		return Details{}, false
	}
	if d.Tool == "" {
		return Details{}, false
	}
	return d, true
}
