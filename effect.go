package oncekey

import "github.com/oncekey/oncekey/oncekeystore"

// Outcome is what a caller (an agent) is told about one tool call.
type Outcome string

const (
	OutcomeApplied  Outcome = "applied"   // the effect happened now
	OutcomeReplayed Outcome = "replayed"  // the effect happened before; this is its stored result
	OutcomeInFlight Outcome = "in_flight" // another attempt holds the claim; poll with the same key
	OutcomeRejected Outcome = "rejected"  // refused: not authorized, denied, or not approved in time
	OutcomeConflict Outcome = "conflict"  // the operation was made before with other arguments; nothing ran
	OutcomeUnknown  Outcome = "unknown"   // the effect may have landed; reconcile, do not repeat
	OutcomeExpired  Outcome = "expired"   // the key is past retention; a new key is a new effect
	OutcomeFailed   Outcome = "failed"    // a definite failure: no effect landed
)

// Effect is a tool's effect class (Policy.Effect): what repeating it would do. It is the store
// contract's type (records keep it), named here for tool authors; the zero value is invalid.
type Effect = oncekeystore.Effect

// The effect classes; see oncekeystore.Effect for each one's promise.
const (
	// ReadOnly tools change nothing: never claimed, retried freely.
	ReadOnly = oncekeystore.ReadOnly
	// Idempotent tools land the same state when repeated: claimed, replayed, retried by Temporal.
	Idempotent = oncekeystore.Idempotent
	// Effectful tools perform a second effect when repeated: claimed, replayed, Temporal retries
	// off, an outcome nobody can prove reconciled.
	Effectful = oncekeystore.Effectful
	// Transactional tools write only to the application's own Postgres, in the store's
	// transaction (pgstore.Tx), committed with the record's completion.
	Transactional = oncekeystore.Transactional
)
