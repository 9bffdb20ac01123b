package oncekey

import (
	"context"
	"fmt"
	"sync"

	"github.com/oncekey/oncekey/internal/textcheck"
	"go.temporal.io/sdk/workflow"
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
