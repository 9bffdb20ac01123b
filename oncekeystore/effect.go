package oncekeystore

import (
	"fmt"
)

// Effect is a tool's effect class: what repeating it would do. The zero value is invalid so that
// a Policy that forgets to say is refused by Registry.Set rather than treated as harmless.
type Effect int

const (
	// ReadOnly tools change nothing. They are never claimed and are retried freely.
	ReadOnly Effect = iota + 1
	// Idempotent tools land the same state when repeated. They are claimed, replayed, and
	// retried on failure by Temporal's normal retry policy. An outcome nobody can prove (a
	// Verify rejection, a result that cannot be encoded or recorded) gives the claim back and is
	// retried the same way; it is never left unknown.
	Idempotent
	// Effectful tools perform a second effect when repeated (a second ticket, e-mail or charge).
	// They are claimed and replayed, Temporal retries are turned off for them, and an outcome
	// nobody can prove goes to reconciliation.
	Effectful
	// Transactional tools write only to the application's own Postgres, in the transaction the
	// store gives them (pgstore.Tx): oncekey commits the body's writes together with the record's
	// completion, at the claim's epoch, so the outcome is always provable. Either the transaction
	// committed (applied: every repeat replays) or it did not (nothing happened: Temporal's retry
	// runs it again). They are claimed and replayed, Temporal retries stay on, and their outcome
	// is never unknown. Only a store that implements TxStore (pgstore) runs them; an external
	// call made by the body is not covered (see docs/policies-and-keys.md#transactional-tools).
	Transactional
)

// String returns "read_only", "idempotent", "effectful" or "transactional".
func (e Effect) String() string {
	switch e {
	case ReadOnly:
		return "read_only"
	case Idempotent:
		return "idempotent"
	case Effectful:
		return "effectful"
	case Transactional:
		return "transactional"
	}
	return fmt.Sprintf("Effect(%d)", int(e))
}

// Claimed reports whether tools of this class are claimed in the store before they run.
func (e Effect) Claimed() bool { return e == Idempotent || e == Effectful || e == Transactional }

// Status is the state of a stored record.
type Status string

const (
	// StatusPending: claimed, the owner's lease is running (or ran out).
	StatusPending Status = "pending"
	// StatusApplied: the effect is done and its result is stored.
	StatusApplied Status = "applied"
	// StatusFailed: a definite failure, remembered; the effect did not and will not land.
	StatusFailed Status = "failed"
	// StatusUnknown: the effect may have landed; reconciliation decides.
	StatusUnknown Status = "unknown"
	// StatusReleased: the owner gave the claim back without an effect; the next claim acquires.
	StatusReleased Status = "released"
	// StatusExpired: a tombstone. Retention is over, only digests are kept, and late duplicates
	// are refused until the tombstone expires.
	StatusExpired Status = "expired"
)

// Valid reports whether s is one of the defined statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusApplied, StatusFailed, StatusUnknown, StatusReleased, StatusExpired:
		return true
	}
	return false
}
