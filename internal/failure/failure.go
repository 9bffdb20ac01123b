package failure

import (
	"errors"

	"go.temporal.io/sdk/temporal"
)

// Application error types: the Type of the temporal.ApplicationError each failure crosses Temporal
// with. They are stored (a record's failure document) and compared by users' code (the root's
// ErrType… constants, activities', workflows' and reconcile's are these): changing one is a
// breaking change.
const (
	TypeIndeterminate       = "oncekey.IndeterminateOutcome"
	TypeFingerprintMismatch = "oncekey.FingerprintMismatch"
	TypeInFlight            = "oncekey.InFlight"
	TypeExpired             = "oncekey.ExpiredOperation"
	TypeStoreUnavailable    = "oncekey.StoreUnavailable"
	TypeNotApplied          = "oncekey.NotApplied"
	TypeFailed              = "oncekey.Failed"
	TypeUnauthorized        = "oncekey.Unauthorized"
	TypeResultTooLarge      = "oncekey.ResultTooLarge"
	TypeConfig              = "oncekey.Config"
	TypeApproval            = "oncekey.ApprovalRequired"
	TypeArgsMismatch        = "oncekey.ArgsMismatch"
	TypeApprovalPending     = "oncekey.ApprovalPending"
	TypeUnsettled           = "oncekey.Unsettled"
	TypeLostClaim           = "oncekey.LostClaim"
	TypeTxMisuse            = "oncekey.TxMisuse"
	TypeRepeatRefused       = "oncekey.RepeatRefused"
	TypeAsyncCompletion     = "oncekey.AsyncCompletion"
	TypeInvalid             = "oncekey.InvalidResolution"
	TypeForeignRecord       = "oncekey.ForeignRecord"
	TypeNoWorkerRequest     = "oncekey.NoWorkerRequest"
	TypeEscalationTimeout   = "oncekey.EscalationTimeout"
	TypeRefused             = "oncekey.ResolutionRefused"
	TypeNotWaiting          = "oncekey.NotWaitingForResolution"
	TypeDecisionRefused     = "oncekey.DecisionRefused"
	TypeNotPending          = "oncekey.ApprovalNotPending"
	TypeSignatureRefused    = "oncekey.SignatureRefused"
	TypeUnboundHeaders      = "oncekey.UnboundHeaders"
)

// Kind names a row of the table: one per application error type. The zero Kind, None, is the row
// of every other error (a tool's own type, no application error at all).
type Kind int

// The rows, one per Type… constant of the same name; see the constants for what each means.
const (
	None Kind = iota
	Indeterminate
	FingerprintMismatch
	InFlight
	Expired
	StoreUnavailable
	NotApplied
	Failed
	Unauthorized
	ResultTooLarge
	Config
	Approval
	ArgsMismatch
	ApprovalPending
	Unsettled
	LostClaim
	TxMisuse
	RepeatRefused
	AsyncCompletion
	Invalid
	ForeignRecord
	NoWorkerRequest
	EscalationTimeout
	Refused
	NotWaiting
	DecisionRefused
	NotPending
	SignatureRefused
	UnboundHeaders
	kinds // the number of kinds
)

// Class is what the workflow side's loop of an Effectful tool does after an attempt that failed
// with the row's type (docs/design.md, "The workflow side").
type Class int

const (
	// Fail: the call fails as it would without oncekey. The zero Class.
	Fail Class = iota
	// Retry: nothing landed; schedule the call again, after the error's NextRetryDelay when it
	// has one.
	Retry
	// RetryIfRetryable: Retry when the application error is retryable, else Fail.
	RetryIfRetryable
	// Reconcile: the outcome is unknown; the reconciliation decides it.
	Reconcile
)

// Label is what a model is told of a failure of the row's type, as far as the type alone says
// (oncekey.Label adds what an error's details say). Status is a ToolResult.Status (an
// oncekey.Outcome), Next a ToolResult.NextAction and Reason a ToolResult.Reason: each a value of
// the root's constants, and every triple one of its table of texts (oncekey.ModelText).
type Label struct {
	Status, Next, Reason string
	// SafeToRepeat: calling the tool again with the same arguments lands at most one effect.
	SafeToRepeat bool
}

// Row is one failure type and what each reader makes of it.
type Row struct {
	Kind Kind
	// Type is the application error type.
	Type  string
	Class Class
	// Refusal: an answer the protocol gives in normal operation (a conflict, a refusal, a request
	// for approval, an operation past retention), not a fault: the worker sends it in the benign
	// category (temporal.ApplicationErrorCategoryBenign).
	Refusal bool
	// ToolCause: the error carries the tool's own error as its cause (a definite failure, a
	// not-applied refusal: the tool's words); every other type carries its cause's text in its
	// details instead.
	ToolCause bool
	// Label is what a model is told; the zero Label for a type oncekey.Label does not know (it
	// gives those what it gives any other error).
	Label Label
}

var (
	unknown  = Label{Status: "unknown", Next: "reconcile"}
	poll     = Label{Status: "failed", Next: "poll", SafeToRepeat: true}
	stop     = Label{Status: "failed", Next: "stop"}
	inFlight = Label{Status: "in_flight", Next: "poll", SafeToRepeat: true}
	approval = Label{Status: "rejected", Next: "ask_for_approval", Reason: "not_approved"}
)

// rows is the table, indexed by Kind.
var rows = [kinds]Row{
	{Kind: None},
	{Indeterminate, TypeIndeterminate, Reconcile, false, false, unknown},
	{FingerprintMismatch, TypeFingerprintMismatch, Fail, true, false, Label{Status: "conflict", Next: "fix_arguments"}},
	{InFlight, TypeInFlight, Retry, false, false, inFlight},
	{Expired, TypeExpired, Fail, true, false, Label{Status: "expired", Next: "ask_for_approval"}},
	{StoreUnavailable, TypeStoreUnavailable, Retry, false, false, poll},
	{NotApplied, TypeNotApplied, RetryIfRetryable, false, true, poll},
	{Failed, TypeFailed, Fail, false, true, stop},
	{Unauthorized, TypeUnauthorized, Fail, true, false, Label{Status: "rejected", Next: "stop", Reason: "not_authorized"}},
	{ResultTooLarge, TypeResultTooLarge, Fail, false, false, unknown},
	{Config, TypeConfig, Fail, false, false, stop},
	{Approval, TypeApproval, Fail, true, false, approval},
	{ArgsMismatch, TypeArgsMismatch, Fail, false, false, stop},
	{ApprovalPending, TypeApprovalPending, Fail, true, false, approval},
	{Unsettled, TypeUnsettled, Fail, false, false, poll},
	{LostClaim, TypeLostClaim, Fail, false, false, inFlight},
	{TxMisuse, TypeTxMisuse, Fail, false, false, Label{}},
	{RepeatRefused, TypeRepeatRefused, Fail, true, false, Label{Status: "conflict", Next: "stop", Reason: "repeat"}},
	{AsyncCompletion, TypeAsyncCompletion, Fail, false, false, Label{}},
	{Invalid, TypeInvalid, Fail, false, false, Label{}},
	{ForeignRecord, TypeForeignRecord, Fail, false, false, Label{}},
	{NoWorkerRequest, TypeNoWorkerRequest, Fail, false, false, Label{}},
	{EscalationTimeout, TypeEscalationTimeout, Fail, false, false, Label{}},
	{Refused, TypeRefused, Fail, false, false, Label{}},
	{NotWaiting, TypeNotWaiting, Fail, false, false, Label{}},
	{DecisionRefused, TypeDecisionRefused, Fail, false, false, Label{}},
	{NotPending, TypeNotPending, Fail, false, false, Label{}},
	{SignatureRefused, TypeSignatureRefused, Fail, false, false, Label{}},
	{UnboundHeaders, TypeUnboundHeaders, Fail, false, false, stop},
}

// byType is the table keyed by Type.
var byType = func() map[string]Kind {
	m := make(map[string]Kind, len(rows))
	for _, r := range rows[1:] {
		m[r.Type] = r.Kind
	}
	return m
}()

// Rows returns the table's rows, None's left out, in the order of the Kind constants.
func Rows() []Row { return append([]Row(nil), rows[1:]...) }

// Get returns the row of k; None's (the zero Row) for a Kind out of range.
func Get(k Kind) Row {
	if k <= None || k >= kinds {
		return Row{}
	}
	return rows[k]
}

// OfType returns the row of the application error type typ; None's (the zero Row) for a type not
// in the table.
func OfType(typ string) Row { return rows[byType[typ]] }

// Of returns the first temporal.ApplicationError in err's chain (errors.As) and the row of its
// type: None's for a type not in the table, and (None's, nil) when err holds no application
// error.
func Of(err error) (Row, *temporal.ApplicationError) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return Row{}, nil
	}
	return OfType(appErr.Type()), appErr
}

// Is reports whether the first application error in err's chain is of k's type (k not None).
func Is(err error, k Kind) bool {
	r, _ := Of(err)
	return k != None && r.Kind == k
}

// TypeIn reports whether the first application error in err's chain has one of types (a retry
// policy's NonRetryableErrorTypes, which may name any type).
func TypeIn(err error, types []string) bool {
	_, appErr := Of(err)
	if appErr == nil {
		return false
	}
	for _, t := range types {
		if t == appErr.Type() {
			return true
		}
	}
	return false
}
