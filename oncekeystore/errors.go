package oncekeystore

import (
	"errors"
	"fmt"
)

var // ErrLostClaim: a write carried an epoch that is no longer the record's (another owner took
// over, or the claim was released or resolved). The write changed nothing.
ErrLostClaim = errors.New("oncekey: claim lost to a newer epoch")

var // ErrNotFound: no record for the tenant and key.
ErrNotFound = errors.New("oncekey: record not found")

// StoreUnavailableError: the store could not be reached or failed. oncekey fails closed: the body
// was not entered (or its outcome could not be recorded). Retryable.
type StoreUnavailableError struct {
	Op  string
	Err error
}

func (e *StoreUnavailableError) Error() string {
	return fmt.Sprintf("oncekey: store unavailable during %s: %v", e.Op, e.Err)
}

func (e *StoreUnavailableError) Unwrap() error { return e.Err }

// StoreSchemaError: the store answered, but its table is not where the store looks for it, or
// not at the migration this version of oncekey expects (the schema was never migrated, was
// migrated under another name than the store was given, or by an older version). It is a
// configuration mistake, not an outage: retrying cannot fix it, so it is never a
// StoreUnavailableError. The interceptor fails the call non-retryably with application error
// type ErrTypeConfig, without running the tool; nothing is recorded. Unwrap returns the
// database's error, when there is one.
type StoreSchemaError struct {
	Op     string // the store call that found it: "claim", "check", …
	Table  string // the table looked for, as the store names it
	Reason string // what is wrong and where the store looked
	Fix    string // what to do about it
	// Elsewhere lists schemas of the same database that do hold a table of that name (at most
	// five, sorted), when the store could find out: where the table probably is.
	Elsewhere []string
	Err       error
}

func (e *StoreSchemaError) Error() string {
	msg := fmt.Sprintf("oncekey: store not set up (%s): %s", e.Op, e.Reason)
	if e.Err != nil {
		msg += fmt.Sprintf(" [%v]", e.Err)
	}
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
}

func (e *StoreSchemaError) Unwrap() error { return e.Err }

// Is reports whether target is ErrStoreConfig: a store not set up is a configuration mistake.
func (e *StoreSchemaError) Is(target error) bool { return target == ErrStoreConfig }

// ErrStoreConfig is matched (errors.Is) by the store errors that no retry can fix because the
// store is set up wrong: a *StoreSchemaError, and a store's own configuration errors (a
// *pgstore.PoolerError: a connection pooler refuses the pool's settings). The interceptor fails
// such a call at once, non-retryably, with ErrTypeConfig and the store's error as its cause, and
// runs nothing; it never reports it as the store unavailable.
var ErrStoreConfig = errors.New("oncekey: the store is set up wrong")

// ResultTooLargeError: the encoded result is larger than Policy.MaxResultBytes. It is never
// truncated.
type ResultTooLargeError struct {
	OperationKey string
	Tool         string
	Size, Limit  int
}

func (e *ResultTooLargeError) Error() string {
	return fmt.Sprintf("oncekey: result of %s (key %s) is %d bytes, over the %d-byte limit (Policy.MaxResultBytes)", e.Tool, e.OperationKey, e.Size, e.Limit)
}

// StatusConflictError: a write (Resolve, for instance) is not allowed from the record's status.
type StatusConflictError struct {
	OperationKey string
	Status       Status
	Want         string
}

func (e *StatusConflictError) Error() string {
	return fmt.Sprintf("oncekey: key %s is %s; %s", e.OperationKey, e.Status, e.Want)
}

// StaleDecisionError: a decision (Store.Resolve, a resolution) was made for an epoch of the record
// that is no longer its own: the operation moved on (the decision's episode was settled and a later
// attempt claimed the key), so the decision is not about what the record now says. Nothing was
// written. Read the record again and decide on its current epoch.
type StaleDecisionError struct {
	OperationKey string
	// Epoch is the epoch the decision was made on; Current is the record's epoch now, with
	// Status its status.
	Epoch, Current int64
	Status         Status
}

func (e *StaleDecisionError) Error() string {
	if e.Epoch == e.Current && e.Status == Status(ApprovalPending) {
		return fmt.Sprintf("oncekey: the decision on key %s names another request than the one pending at episode %d: "+
			"nothing was written; decide on the request the store holds (`oncekey approvals`)", e.OperationKey, e.Current)
	}
	return fmt.Sprintf("oncekey: the decision on key %s was made for epoch %d, but the operation has moved on to epoch %d (%s): "+
		"nothing was written; look at the record again and decide for epoch %d if it still needs a decision",
		e.OperationKey, e.Epoch, e.Current, e.Status, e.Current)
}
