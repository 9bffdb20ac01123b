package oncekey

import (
	"context"

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
)

type stepIDKey struct{}
type tenantKey struct{}
type opKeyKey struct{}

// WithStepID returns a workflow context whose activities carry the step ID id. Give every
// Effectful step an explicit, stable step ID ("create_ticket"): it keeps the operation key the
// same across workflow resets and retries. Without one the step is the default
// "<runID>/<activityID>", where activityID is the activity ID of the call's first attempt: every
// retry and every re-run the workflow side schedules for that call keeps it, but a reset, a
// workflow retry or continue-as-new (a new run ID) does not, and two calls in the workflow code
// are always two steps.
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
