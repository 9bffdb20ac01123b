// Package decisionsig signs and verifies the decisions that let an effect happen or settle one
// (approve, approve with edited arguments, deny, request changes, resolve an unknown outcome,
// make a standing grant):
// a Statement of exactly what is decided, its canonical JSON (package canonical) signed with
// ed25519 by a key the decider holds, and a TrustList of the public keys a worker accepts, each
// for some tenants, tools and kinds of decision. It is a leaf: it imports package canonical and
// the standard library only, never Temporal or another oncekey package.
//
// Signed decisions: https://github.com/oncekey/oncekey/blob/main/docs/approvals.md#signed-decisions
package decisionsig
