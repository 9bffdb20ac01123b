package interceptor

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/metrics"
)

// Header bindings (Options.HeaderKeys): the workflow side binds the tenant, step ID and first
// activity ID headers of every claimed call it schedules to the call, under the first key
// (bindHeaders, each time it sets or changes them); the activity side refuses, before anything
// is claimed or run, a call whose headers carry any of them without a binding that verifies
// under one of the keys (verifyBinding). Without HeaderKeys neither side does anything.

// bindHeaders sets h's wire.HeaderBinding to the binding, under the first of Options.HeaderKeys,
// of the headers h holds now (tenant, step ID, first activity ID), the call's namespace,
// workflow ID and activityType, and doc, the arguments document h's wire.HeaderArgs holds. It
// is workflow code: everything it reads is deterministic, and headers are not compared on
// replay, so it needs no version marker. Without HeaderKeys, or without h, it does nothing.
func (r *root) bindHeaders(ctx workflow.Context, h map[string]*commonpb.Payload, activityType string, doc []byte) error {
	if len(r.opts.HeaderKeys) == 0 || h == nil {
		return nil
	}
	info := workflow.GetInfo(ctx)
	s := oncekey.HeaderStatement{Namespace: info.Namespace, WorkflowID: info.WorkflowExecution.ID, ActivityType: activityType,
		ArgsDigest: sha256.Sum256(doc)}
	if err := boundHeaders(r.opts.DataConverter, h, &s); err != nil {
		return err
	}
	pl, err := r.opts.DataConverter.ToPayload(oncekey.BindHeaders(r.opts.HeaderKeys[0], &s))
	if err != nil {
		return fmt.Errorf("header %s: %w", wire.HeaderBinding, err)
	}
	h[wire.HeaderBinding] = pl
	return nil
}

// boundHeaders reads into s the headers a binding covers, as h holds them ("" for one not set).
func boundHeaders(dc converter.DataConverter, h map[string]*commonpb.Payload, s *oncekey.HeaderStatement) error {
	for _, hv := range [...]struct {
		name string
		dst  *string
	}{{wire.HeaderTenant, &s.Tenant}, {wire.HeaderStepID, &s.StepID}, {wire.HeaderFirstActivityID, &s.FirstActivityID}} {
		if p := h[hv.name]; p != nil {
			if err := dc.FromPayload(p, hv.dst); err != nil {
				return fmt.Errorf("header %s: %w", hv.name, err)
			}
		}
	}
	return nil
}

// verifyBinding returns nil when the worker has no HeaderKeys, or when the call's headers carry
// no tenant, step ID or first activity ID (tenant, stepID, firstActivityID as read, bound
// reporting whether any was present), or when the call's wire.HeaderBinding verifies under one
// of the keys over them, the call's namespace, workflow ID and activity type, and the arguments
// document the worker accepted (c.doc: the input the body receives, which the HeaderArgs header
// could only make exact). Otherwise it returns the error oncekey.VerifyHeaderBinding gave, which
// is always an *oncekey.UnboundHeadersError.
func (c *call) verifyBinding(h map[string]*commonpb.Payload, bound bool, tenant, stepID, firstActivityID string) *oncekey.UnboundHeadersError {
	keys := c.root.opts.HeaderKeys
	if len(keys) == 0 || !bound {
		return nil
	}
	var binding string
	if p := h[wire.HeaderBinding]; p != nil {
		// A binding that does not decode is no binding.
		_ = c.root.opts.DataConverter.FromPayload(p, &binding)
	}
	s := oncekey.HeaderStatement{Namespace: c.info.Namespace, WorkflowID: c.info.WorkflowExecution.ID, ActivityType: c.info.ActivityType.Name,
		Tenant: tenant, StepID: stepID, FirstActivityID: firstActivityID, ArgsDigest: sha256.Sum256(c.doc)}
	err := oncekey.VerifyHeaderBinding(keys, &s, binding)
	if err != nil {
		e := err.(*oncekey.UnboundHeadersError)
		e.Tool, e.WorkflowID = c.tool, c.info.WorkflowExecution.ID
		return e
	}
	return nil
}

// unboundHeaders refuses the call whose headers verifyBinding did not accept: logged at Warn,
// counted (metrics.HeadersRefused, never tagged with the tenant the headers chose), and failed
// non-retryably with oncekey.ErrTypeUnboundHeaders. Nothing was claimed.
func (c *call) unboundHeaders(ctx context.Context, e *oncekey.UnboundHeadersError) error {
	c.logger(ctx).Warn("oncekey: a call's tenant or step ID headers are not bound by a key this worker lists; nothing was claimed or run. "+
		"The workflow worker that scheduled it lacks okworker.Options.HeaderKeys or holds a key this worker does not list, or the call was scheduled by a workflow outside the deployment",
		"tool", c.tool, "workflow_id", e.WorkflowID, "key_id", e.KeyID, "reason", e.Reason)
	c.countUnbound(ctx, e, true)
	c.outcome = oncekey.OutcomeRejected
	return c.appError(e.Error(), oncekey.ErrTypeUnboundHeaders, true, nil, reasonHeadersUnbound, false)
}

// reportUnbound reports, under Options.HeaderKeysReportOnly, a call whose headers verifyBinding
// did not accept and which runs all the same: logged at Warn, counted with TagEnforced "false".
func (c *call) reportUnbound(ctx context.Context, e *oncekey.UnboundHeadersError) {
	c.logger(ctx).Warn("oncekey: a call's tenant or step ID headers are not bound by a key this worker lists; it runs because of okworker.Options.HeaderKeysReportOnly, "+
		"and without it would be refused. The workflow worker that scheduled it lacks okworker.Options.HeaderKeys or holds a key this worker does not list, "+
		"or the call was scheduled before the keys were given, or by a workflow outside the deployment",
		"tool", c.tool, "workflow_id", e.WorkflowID, "key_id", e.KeyID, "reason", e.Reason)
	c.countUnbound(ctx, e, false)
}

// countUnbound counts a call whose headers were not bound (metrics.HeadersRefused), enforced or
// only reported.
func (c *call) countUnbound(ctx context.Context, e *oncekey.UnboundHeadersError, enforced bool) {
	metrics.Tagged(c.metricsHandler(ctx), c.tool, "", false).
		WithTags(map[string]string{metrics.TagReason: e.Reason, metrics.TagEnforced: strconv.FormatBool(enforced)}).
		Counter(metrics.HeadersRefused).Inc(1)
}

// reasonHeadersUnbound is the Details.Reason of a call refused by unboundHeaders.
const reasonHeadersUnbound = "headers not bound"
