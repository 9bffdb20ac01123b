package interceptor

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	commonpb "go.temporal.io/api/common/v1"

	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporalnexus"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/wire"
)

// InterceptNexusOperation wraps a Nexus operation's handler: the claim protocol, for an operation
// whose name has a claimed policy in the Registry.
func (r *root) InterceptNexusOperation(ctx context.Context, next tinterceptor.NexusOperationInboundInterceptor) tinterceptor.NexusOperationInboundInterceptor {
	return &nexusInbound{NexusOperationInboundInterceptorBase: tinterceptor.NexusOperationInboundInterceptorBase{Next: next}, root: r}
}

type nexusInbound struct {
	tinterceptor.NexusOperationInboundInterceptorBase
	root *root
}

// errNexusAsync is what the body of a claimed Nexus operation gives when its handler started an
// asynchronous operation instead of answering: the claim is given back (see StartOperation).
var errNexusAsync = errors.New("the operation started asynchronously")

// StartOperation runs a Nexus operation's synchronous handler under the claim protocol, as
// call.run runs an activity: the operation key is derived from the caller's key
// (wire.NexusHeaderKey) or the Nexus request ID, the operation's name and its material input
// (see oncekey.StepKey), and a repeat of the operation (the caller retrying a start whose answer it
// did not get) replays the stored result instead of running the handler again. An operation
// without a claimed policy runs as it is. A handler that starts an asynchronous operation (one
// backed by a workflow, which that workflow's own tools cover) gets its claim given back and its
// answer passed on. A policy that asks for an approval is refused, non-retryable oncekey.Config:
// nothing on the handler's side would start the approval workflow.
func (n *nexusInbound) StartOperation(ctx context.Context, in tinterceptor.NexusStartOperationInput) (nexus.HandlerStartOperationResult[any], error) {
	name := nexus.ExtractHandlerInfo(ctx).Operation
	p, ok := n.root.opts.Registry.Policy(name)
	if !ok || !p.Effect.Claimed() {
		return n.Next.StartOperation(ctx, in)
	}
	key := in.Options.Header.Get(wire.NexusHeaderKey)
	if key == "" {
		key = in.Options.RequestID
	}
	info := temporalnexus.GetOperationInfo(ctx)
	c := &call{root: n.root, tool: name, start: time.Now(), nexusKey: key,
		info: activity.Info{ActivityType: activity.Type{Name: name}, Namespace: info.Namespace, TaskQueue: info.TaskQueue}}
	var async nexus.HandlerStartOperationResult[any]
	c.invoke = func(ctx context.Context, _ *tinterceptor.ExecuteActivityInput) (any, error) {
		res, err := n.Next.StartOperation(ctx, in)
		if err != nil {
			return nil, err
		}
		if sync, ok := res.(interface{ ValueAsAny() any }); ok {
			return sync.ValueAsAny(), nil
		}
		async = res
		return nil, oncekey.NotApplied(errNexusAsync)
	}
	actIn := &tinterceptor.ExecuteActivityInput{Args: []any{in.Input}}
	claimed, err := c.resolve(ctx, actIn)
	if err == nil && !claimed {
		return n.Next.StartOperation(ctx, in)
	}
	if err == nil && c.policy.Approval != nil {
		// An approval is asked and waited for by the caller's workflow side; a Nexus handler has
		// none, so nothing would ever start the approval workflow.
		err = c.configError(errors.New("a Nexus operation cannot ask for an approval (Policy.Approval): approve the call in the caller's workflow, with a tool of its own, before the Nexus call"))
	}
	var res any
	if err == nil {
		res, err = c.run(ctx, actIn)
	}
	if async != nil {
		c.logger(ctx).Warn("oncekey: a Nexus operation with a claimed policy started asynchronously; its claim was given back. "+
			"Give a policy only to synchronous operations: an asynchronous one is covered by its workflow's own tools", "operation", name)
		c.outcome = ""
		c.report(ctx, nil)
		return async, nil
	}
	c.report(ctx, err)
	if err != nil {
		return nil, err
	}
	return &nexus.HandlerStartOperationResultSync[any]{Value: n.syncValue(res)}, nil
}

// syncValue returns the result call.run gave (the result's payloads, encoded with the data
// converter and carrying oncekey's metadata; nil for none) as the value of a synchronous Nexus
// result: the first payload decoded into a converter.RawValue, which the SDK encodes again with
// the same data converter (so a codec applies once) and the caller decodes into its type.
func (n *nexusInbound) syncValue(res any) any {
	ps, ok := res.(*commonpb.Payloads)
	if !ok || len(ps.GetPayloads()) == 0 {
		return res
	}
	var raw converter.RawValue
	if err := n.root.opts.DataConverter.FromPayload(ps.Payloads[0], &raw); err != nil {
		return res
	}
	return raw
}

// nexusOperation is the Operation of a Nexus operation's synchronous handler (see
// oncekey.Operation.NexusKey); its step, as records show it, is the operation's name.
func (c *call) nexusOperation(args []any) oncekey.Operation {
	tenant := c.root.tenant(TenantInfo{Namespace: c.info.Namespace, TaskQueue: c.info.TaskQueue})
	return oncekey.Operation{
		Namespace:  c.info.Namespace,
		Tenant:     tenant,
		WorkflowID: c.nexusKey,
		NexusKey:   c.nexusKey,
		StepID:     c.tool,
		Tool:       c.tool,
		Args:       args,
		ArgsJSON:   c.args,
	}
}

// logger returns the logger of the activity, or of the Nexus operation.
func (c *call) logger(ctx context.Context) log.Logger {
	if c.nexusKey != "" {
		return temporalnexus.GetLogger(ctx)
	}
	return activity.GetLogger(ctx)
}

// metricsHandler returns the metrics handler of the activity, or of the Nexus operation.
func (c *call) metricsHandler(ctx context.Context) client.MetricsHandler {
	if c.nexusKey != "" {
		return temporalnexus.GetMetricsHandler(ctx)
	}
	return activity.GetMetricsHandler(ctx)
}

// nexusCallerKey is the wire.NexusHeaderKey value a workflow's Nexus call made with a step ID
// carries: the JSON array of the namespace, the workflow ID and the step ID.
func nexusCallerKey(ctx workflow.Context, stepID string) string {
	info := workflow.GetInfo(ctx)
	b, _ := json.Marshal([]string{info.Namespace, info.WorkflowExecution.ID, stepID})
	return string(b)
}

// ExecuteNexusOperation gives a Nexus call made with oncekey.WithStepID the caller key
// (wire.NexusHeaderKey) its handler keys the operation with, unless the call set one.
func (w *workflowOutbound) ExecuteNexusOperation(ctx workflow.Context, in tinterceptor.ExecuteNexusOperationInput) workflow.NexusOperationFuture {
	if stepID, ok := oncekey.StepID(ctx); ok && in.NexusHeader.Get(wire.NexusHeaderKey) == "" {
		if in.NexusHeader == nil {
			in.NexusHeader = nexus.Header{}
		}
		in.NexusHeader.Set(wire.NexusHeaderKey, nexusCallerKey(ctx, stepID))
	}
	return w.Next.ExecuteNexusOperation(ctx, in)
}
