package oncekeystore

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oncekey/oncekey/internal/textcheck"
)

// Validate returns an *InvalidParamsError naming the first bad field, or nil. Stores call it
// before touching anything. Summary is at most MaxApprovalSummaryBytes bytes (cut a longer
// one before asking).
func (p *RequestApprovalParams) Validate() error {
	const op = "request approval"
	for _, f := range []struct {
		name, v  string
		required bool
	}{
		{"Tenant", p.Tenant, true}, {"OperationKey", p.OperationKey, true}, {"Namespace", p.Namespace, false},
		{"Tool", p.Tool, true}, {"Fingerprint", p.Fingerprint, true},
		{"WorkflowID", p.WorkflowID, false}, {"StepID", p.StepID, false}, {"Token", p.Token, false},
		{"EditOf", p.EditOf, false},
		{"SupersedeGrant", p.SupersedeGrant, false},
	} {
		if err := checkText(op, f.name, f.v, f.required); err != nil {
			return err
		}
	}
	if reason := textcheck.Problem(p.Summary, MaxApprovalSummaryBytes); reason != "" {
		return &InvalidParamsError{Op: op, Field: "Summary", Reason: reason}
	}
	return checkPositive(op, "Timeout", p.Timeout)
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *DecideApprovalParams) Validate() error {
	const op = "decide approval"
	if err := checkTarget(op, p.Tenant, p.OperationKey, "Episode", p.Episode, "is not an episode: give the episode of the approval the decision was made for"); err != nil {
		return err
	}
	if p.Status == ApprovalPending {
		return p.validatePartial(op)
	}
	if !p.Status.Decided() {
		return &InvalidParamsError{Op: op, Field: "Status", Reason: fmt.Sprintf("%q is not pending, approved, denied, timed_out or replaced", p.Status)}
	}
	if err := checkOptional(op, "Token", p.Token, "DecidedBy", p.DecidedBy, "Reason", p.Reason, "EditedAs", p.EditedAs); err != nil {
		return err
	}
	if reason := ModelMessageProblem(p.ModelMessage); reason != "" {
		return &InvalidParamsError{Op: op, Field: "ModelMessage", Reason: reason}
	}
	if p.ChangesRequested && p.Status != ApprovalDenied {
		return &InvalidParamsError{Op: op, Field: "ChangesRequested", Reason: "only a denial requests changes"}
	}
	if (p.Status == ApprovalReplaced) != (p.EditedAs != "") {
		return &InvalidParamsError{Op: op, Field: "EditedAs", Reason: "names the edit of a replaced approval, and is required with it"}
	}
	if err := checkSignature(op, p.Signature); err != nil {
		return err
	}
	return checkPositive(op, "Retention", p.Retention)
}

// validatePartial checks a partial approval (Status ApprovalPending): a signature and nothing
// a decision records.
func (p *DecideApprovalParams) validatePartial(op string) error {
	switch {
	case p.DecidedBy != "" || p.Reason != "" || p.ModelMessage != "" || p.ChangesRequested || p.EditedAs != "":
		return &InvalidParamsError{Op: op, Field: "Status", Reason: "pending records a signature only: DecidedBy, Reason, ModelMessage, ChangesRequested and EditedAs must be empty"}
	case len(p.Signature) == 0:
		return &InvalidParamsError{Op: op, Field: "Signature", Reason: "is required with status pending (a partial approval)"}
	}
	if err := checkOptional(op, "Token", p.Token); err != nil {
		return err
	}
	return checkSignature(op, p.Signature)
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil. The cursor is
// checked by the store that issued it.
func (p *ListApprovalsParams) Validate() error {
	if p.Status != "" && !p.Status.Valid() {
		return &InvalidParamsError{Op: "list approvals", Field: "Status", Reason: fmt.Sprintf("%q is not an approval status", p.Status)}
	}
	return validateListFilter("list approvals", p.Tenant, p.Tool, p.WorkflowID, p.Cursor, p.Limit)
}

// PageSize returns p.Limit, or DefaultListLimit when it is zero.
func (p *ListApprovalsParams) PageSize() int { return pageSize(p.Limit) }

// ApprovalCursor is where ListApprovals' keyset pagination resumes: the sort key (requested at,
// tenant, operation key) of the last approval of a page. Stores hand it out as
// ListApprovalsResult.Next with NextApprovalCursor and read ListApprovalsParams.Cursor with
// ParseApprovalCursor; to callers it is an opaque string.
type ApprovalCursor struct {
	RequestedAt  time.Time
	Tenant       string
	OperationKey string
}

// NextApprovalCursor returns the cursor that resumes a listing of approvals after a.
func NextApprovalCursor(a *Approval) string {
	return encodeCursor(a.RequestedAt, a.Tenant, a.OperationKey)
}

// ParseApprovalCursor reads a cursor made by NextApprovalCursor. Anything else is an
// *InvalidParamsError.
func ParseApprovalCursor(s string) (ApprovalCursor, error) {
	at, tenant, key, err := decodeCursor("list approvals", s)
	return ApprovalCursor{RequestedAt: at, Tenant: tenant, OperationKey: key}, err
}

// After returns the cursor p.Cursor names (ParseApprovalCursor), or nil when it is "" (the
// first page). A malformed cursor is an *InvalidParamsError.
func (p *ListApprovalsParams) After() (*ApprovalCursor, error) {
	return cursorAfter(p.Cursor, ParseApprovalCursor)
}

// Before reports whether c sorts before a in ListApprovals' order (requested at, tenant,
// operation key).
func (c ApprovalCursor) Before(a *Approval) bool {
	return sortsBefore(c.RequestedAt, c.Tenant, c.OperationKey, a.RequestedAt, a.Tenant, a.OperationKey)
}

// MaxModelMessageBytes is the most a message for the model (Approval.ModelMessage) may hold, in
// bytes of UTF-8.
const MaxModelMessageBytes = 500

// ModelMessageProblem returns why s cannot be a message for the model (Approval.ModelMessage),
// or "": at most MaxModelMessageBytes of valid UTF-8 plain text, without control characters
// other than a line feed.
func ModelMessageProblem(s string) string {
	if reason := textcheck.Problem(s, MaxModelMessageBytes); reason != "" {
		return reason
	}
	for _, r := range s {
		if r == utf8.RuneError || (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Sprintf("holds the control character %q: a message for the model is plain text", r)
		}
	}
	if strings.TrimSpace(s) != s {
		return "starts or ends with white space"
	}
	return ""
}
