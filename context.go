package oncekey

import (
	"context"
	"fmt"
	"sync"

	"github.com/oncekey/oncekey/internal/textcheck"
	"go.temporal.io/sdk/workflow"
)

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

type stepIDKey struct{}
type tenantKey struct{}
type opKeyKey struct{}
type effectRefKey struct{}

// WithStepID returns a workflow context whose activities carry the step ID id. The step then
// names the operation (see StepKey): its key survives resets, workflow retries and code changes
// around the call, and another tool or other arguments at the same step are a fingerprint
// mismatch, never a second effect. Use it for hand-written steps, and to say "this is a new
// operation" for a deliberate repeat of an identical call. Without a step ID the operation is
// the call itself: the workflow ID, the tool and its material arguments, so an identical call
// made again (a model re-proposing it, a reset, continue-as-new, a new run under the same
// workflow ID) is the same operation and is replayed.
func WithStepID(ctx workflow.Context, id string) workflow.Context {
	return workflow.WithValue(ctx, stepIDKey{}, id)
}

// StepID returns the step ID set on ctx with WithStepID.
func StepID(ctx workflow.Context) (string, bool) {
	s, ok := ctx.Value(stepIDKey{}).(string)
	return s, ok && s != ""
}

// WithTenant returns a workflow context whose activities are keyed under tenant. Records are
// tenant-scoped: the same step under two tenants is two operations.
func WithTenant(ctx workflow.Context, tenant string) workflow.Context {
	return workflow.WithValue(ctx, tenantKey{}, tenant)
}

// Tenant returns the tenant set on ctx with WithTenant.
func Tenant(ctx workflow.Context) (string, bool) {
	s, ok := ctx.Value(tenantKey{}).(string)
	return s, ok && s != ""
}

// OperationKey returns, inside a claimed tool, the operation key of the running call ("ok1_…").
// Pass it downstream (e.g. as an Idempotency-Key header) so the downstream can deduplicate too.
func OperationKey(ctx context.Context) (string, bool) {
	s, ok := ctx.Value(opKeyKey{}).(string)
	return s, ok
}

// ContextWithOperationKey returns ctx carrying key for OperationKey. The interceptor calls it;
// tests of tools may too.
func ContextWithOperationKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, opKeyKey{}, key)
}

// MaxEffectReferenceBytes is the longest effect reference SetEffectReference accepts: 1024 bytes
// of UTF-8, room for any downstream ID or a URL to it.
const MaxEffectReferenceBytes = 1024

// effectRefHolder is what ContextWithEffectReference puts into a tool body's context.
type effectRefHolder struct {
	mu     sync.Mutex
	ref    string
	closed bool
}

// SetEffectReference records, inside the body of a claimed tool (Idempotent or Effectful), the
// downstream's own ID for what this call did: a ticket number, a charge ID, a message ID. Call it
// once the downstream has answered. The reference is stored with the record when the call
// completes, applied or failed with Failed(err), is kept when the result is replayed, and is
// shown by `oncekey show`; when the call ends with an unknown outcome it is written into the
// record's failure description instead, for whoever resolves it. A later call replaces the
// reference; "" clears it. It is stored as given: at most MaxEffectReferenceBytes bytes of valid
// UTF-8 without NUL bytes.
//
// It returns an error wrapping ErrNotClaimed (errors.Is) when ctx is not the context of a
// claimed tool's body: a ReadOnly tool or one without a policy, workflow code, a context not
// derived from the activity's, or a call made after the body returned. It returns an
// *InvalidEffectReferenceError (errors.As) for a reference that is too long, not valid UTF-8 or
// contains a NUL byte. In both cases nothing is recorded, and the tool can carry on: the
// reference describes the effect, it is not part of the result.
func SetEffectReference(ctx context.Context, ref string) error {
	h, _ := ctx.Value(effectRefKey{}).(*effectRefHolder)
	if h == nil {
		return fmt.Errorf("oncekey: set effect reference: %w", ErrNotClaimed)
	}
	if reason := textcheck.Problem(ref, MaxEffectReferenceBytes); reason != "" {
		return &InvalidEffectReferenceError{Len: len(ref), Reason: reason}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("oncekey: set effect reference: the tool's body has returned: %w", ErrNotClaimed)
	}
	h.ref = ref
	return nil
}

// ContextWithEffectReference returns ctx carrying a holder for SetEffectReference, and a function
// that returns the reference set so far and closes the holder: SetEffectReference calls made
// after it fail with ErrNotClaimed. The interceptor calls it around a claimed tool's body; tests
// of tools may too.
func ContextWithEffectReference(ctx context.Context) (context.Context, func() string) {
	h := &effectRefHolder{}
	return context.WithValue(ctx, effectRefKey{}, h), func() string {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.closed = true
		return h.ref
	}
}
