package decisionsig

import (
	"errors"
	"fmt"
)

// ErrRefused matches every *Error: a decision refused because of its signature. A worker
// refuses it with the record untouched.
var ErrRefused = errors.New("decisionsig: decision refused")

// The reasons a decision is refused, each also matched by errors.Is on an *Error of that Reason.
var (
	// ErrUnsigned: the decision carries no signature.
	ErrUnsigned = errors.New("decisionsig: unsigned")
	// ErrBadSignature: the signature does not verify (or the signed statement does not decode).
	ErrBadSignature = errors.New("decisionsig: bad signature")
	// ErrUntrusted: the key is not in the trust list, or not trusted for the decision's tenant,
	// tool or kind, or revoked, or outside its validity.
	ErrUntrusted = errors.New("decisionsig: key not trusted for this decision")
	// ErrMismatch: the signed statement is not the decision it came with (another request,
	// episode, fingerprint, outcome, decider, ...): a signature replayed onto another request.
	ErrMismatch = errors.New("decisionsig: statement does not match the decision")
)

// Reason says why an *Error refused a decision.
type Reason string

const (
	ReasonUnsigned     Reason = "unsigned"
	ReasonBadSignature Reason = "bad_signature"
	ReasonUntrusted    Reason = "untrusted"
	ReasonMismatch     Reason = "mismatch"
)

func (r Reason) sentinel() error {
	switch r {
	case ReasonUnsigned:
		return ErrUnsigned
	case ReasonBadSignature:
		return ErrBadSignature
	case ReasonUntrusted:
		return ErrUntrusted
	case ReasonMismatch:
		return ErrMismatch
	}
	return nil
}

// Error is a decision refused because of its signature. errors.Is matches it against
// ErrRefused and against its Reason's sentinel (ErrUnsigned, ErrBadSignature, ErrUntrusted,
// ErrMismatch).
type Error struct {
	Reason Reason
	// KeyID is the key that signed, when known.
	KeyID string
	// Field is, for ReasonMismatch, the Statement member (its JSON name) that differs.
	Field string
	// Detail says more, for the operator.
	Detail string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("decisionsig: decision refused (%s)", e.Reason)
	if e.KeyID != "" {
		s += ", key " + e.KeyID
	}
	if e.Field != "" {
		s += ", statement member " + e.Field
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is reports whether target is ErrRefused or e's Reason's sentinel.
func (e *Error) Is(target error) bool {
	return target == ErrRefused || (target != nil && target == e.Reason.sentinel())
}
