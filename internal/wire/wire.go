// Package wire names what oncekey writes into Temporal's messages: the activity headers the
// workflow side sets for the worker, the Nexus header, and the metadata keys of a result payload.
// Changing a value breaks running workflows and recorded histories: each is pinned by a test.
package wire

// Header keys the workflow side writes into activity headers. Values go through the data
// converter; a missing header means "not set".
const (
	HeaderStepID = "oncekey-step-id"
	HeaderTenant = "oncekey-tenant"
	// HeaderFirstActivityID carries, on a re-run of an Effectful call made without a step ID, the
	// activity ID of the call's first attempt (a string). The worker keys the re-run with it
	// (Operation.FirstActivityID), so the re-run has the first attempt's operation key.
	HeaderFirstActivityID = "oncekey-first-activity-id"
	// HeaderArgs carries the call's arguments document (CanonicalArgs of the arguments the
	// workflow scheduled) as a json.RawMessage, so the worker keys and fingerprints the call from
	// the values the workflow scheduled rather than from its own, possibly lossy, decode (a
	// map[string]any holds numbers as float64). The arguments are in the activity's history event
	// twice, the second copy here.
	HeaderArgs = "oncekey-args"
	// HeaderCheck, set to true, asks the worker to read the call's record through the claim path
	// without running the tool: an applied record is replayed, a pending one waited for, and a
	// claim that acquires is given back at once and answered with a NotApplied error. The
	// workflow side schedules such a check after an Idempotent or Transactional call's last
	// attempt ended in a timeout, so the call's error says what the record proves. It can only
	// make the worker do less: a forged one runs nothing.
	HeaderCheck = "oncekey-check"
)

// NexusHeaderKey is the Nexus request header that carries the key a caller gives a Nexus
// operation (the caller's name for the intended effect, the like of an Idempotency-Key). Without
// it, the operation key of a Nexus operation's synchronous handler is derived from the Nexus
// request ID, which the caller keeps across its retries of one operation. The workflow side sets
// it for a workflow's Nexus call made with WithStepID, from the namespace, workflow ID and step
// ID. Nexus header keys are case-insensitive; this one is lower case.
const NexusHeaderKey = "oncekey-key"

// Metadata keys the interceptor adds to the first payload of a claimed tool's result, inside any
// codec, so the workflow learns what happened without asking the store: read them with Label or
// the agent package from a converter.RawValue. Converters ignore them, so a plain
// ExecuteActivity(...).Get(ctx, &v) decodes the result as before.
const (
	// MetadataOutcome is "applied" (the body ran now) or "replayed" (a stored result given again).
	MetadataOutcome = "oncekey-outcome"
	// MetadataOperationKey is the call's operation key.
	MetadataOperationKey = "oncekey-operation-key"
	// MetadataEffectReference is the effect reference recorded with SetEffectReference, when set.
	MetadataEffectReference = "oncekey-effect-reference"
	// MetadataReason is a ToolResult.Reason for the outcome, when one applies: "confirmed" on the
	// result of a call whose outcome was unknown and that reconciliation settled as applied.
	MetadataReason = "oncekey-reason"
	// MetadataFingerprint is the fingerprint the call was claimed with (the record's), and
	// MetadataVersion the Policy.Version ("" for none): what okworker.CheckIdentity compares a
	// recorded history with, without reading the store. Neither is on a result that
	// reconciliation handed over without a claim. The fingerprint digests the arguments the same
	// history holds, inside the same codec; with a FingerprintSecret it is keyed.
	MetadataFingerprint = "oncekey-fingerprint"
	MetadataVersion     = "oncekey-version"
)

// HeaderEditOf carries, on the call the workflow side schedules after a person approved a call
// with edited arguments, the operation key of the original call (a string). The worker runs the
// call only if the original's approval, read from the store, was replaced by an approval of
// exactly these arguments (see ApprovalReplaced): the header points at an approval, it grants
// nothing.
const HeaderEditOf = "oncekey-edit-of"

// Metadata keys the workflow side adds to the result of a call that ran with edited arguments,
// beside MetadataOutcome…: MetadataReason is then ReasonEdited.
const (
	// MetadataArguments is the arguments document the call ran with (canonical JSON).
	MetadataArguments = "oncekey-arguments"
	// MetadataChanged lists the top-level members of the arguments the person changed, added or
	// removed, comma-separated and sorted ("" when the edit changed a non-object document).
	MetadataChanged = "oncekey-changed"
)

// HeaderBinding carries, with okworker.Options.HeaderKeys, the binding of the call's
// HeaderTenant, HeaderStepID and HeaderFirstActivityID to the call (a string): the ID of the
// key that made it, ':', and the HMAC-SHA-256 under that key of the statement of the call's
// namespace, workflow ID, activity type, those headers and the SHA-256 of HeaderArgs' document,
// in unpadded base64url (oncekey.BindHeaders). An activity worker with HeaderKeys refuses a call
// whose headers carry a tenant, step ID or first activity ID without a binding that verifies.
const HeaderBinding = "oncekey-binding"
