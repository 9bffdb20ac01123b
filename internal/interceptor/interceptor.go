package interceptor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
)

// root holds the options; the per-activity and per-workflow wrappers point to it.
type root struct {
	tinterceptor.WorkerInterceptorBase
	opts Options
	// unpoliced holds the activity types (task queue and name) that ran without a policy and
	// were logged as such, so each is logged once.
	unpoliced sync.Map
	// fallbacks holds the routed tools (activity type and tool) that got their Route's Fallback
	// and were logged as such, so each is logged once; fallbacksSeen counts them, to bound it.
	fallbacks     sync.Map
	fallbacksSeen atomic.Int64
	// took keeps how long each tool's body takes, for the in_flight wait (pollAfter).
	took durations
}

// storeSchema returns the schema the store names for its table (pgstore's Options.Schema, through
// a Schema() string method), for the `oncekey resolve --schema` of messages; "" otherwise.
func (r *root) storeSchema() string {
	if s, ok := r.opts.Store.(interface{ Schema() string }); ok {
		return s.Schema()
	}
	return ""
}

var _ tinterceptor.WorkerInterceptor = (*root)(nil)

// New returns the worker interceptor. Install it with worker.Options.Interceptors (or use the
// worker package's plugin, which does it for you) on every worker that runs claimed tools or
// workflows that call them. It returns a *ConfigError (errors.Is ErrConfig) naming the bad field.
func New(opts Options) (tinterceptor.WorkerInterceptor, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &root{opts: opts.withDefaults()}, nil
}

// InterceptActivity wraps the activity inbound side: the claim protocol.
// IsOncekey reports whether i is an interceptor made by New. A worker must have at most one:
// the plugin uses it to refuse a worker that would get oncekey's interceptor twice, whose
// claims would wait on each other.
func IsOncekey(i tinterceptor.WorkerInterceptor) bool {
	_, ok := i.(*root)
	return ok
}

func (r *root) InterceptActivity(ctx context.Context, next tinterceptor.ActivityInboundInterceptor) tinterceptor.ActivityInboundInterceptor {
	return &activityInbound{ActivityInboundInterceptorBase: tinterceptor.ActivityInboundInterceptorBase{Next: next}, root: r}
}

// InterceptWorkflow wraps the workflow outbound side: headers, retries, reconciliation.
func (r *root) InterceptWorkflow(ctx workflow.Context, next tinterceptor.WorkflowInboundInterceptor) tinterceptor.WorkflowInboundInterceptor {
	return &workflowInbound{WorkflowInboundInterceptorBase: tinterceptor.WorkflowInboundInterceptorBase{Next: next}, root: r}
}

type workflowInbound struct {
	tinterceptor.WorkflowInboundInterceptorBase
	root *root
}

func (w *workflowInbound) Init(outbound tinterceptor.WorkflowOutboundInterceptor) error {
	return w.Next.Init(&workflowOutbound{WorkflowOutboundInterceptorBase: tinterceptor.WorkflowOutboundInterceptorBase{Next: outbound}, root: w.root})
}

func keyPrefix(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}

func payloadsOf(b []byte) (*commonpb.Payloads, error) {
	if len(b) == 0 {
		return nil, nil
	}
	ps := &commonpb.Payloads{}
	if err := proto.Unmarshal(b, ps); err != nil {
		return nil, err
	}
	return ps, nil
}

// tenant returns Options.Tenant(info), or the namespace.
func (r *root) tenant(info TenantInfo) string {
	if r.opts.Tenant != nil {
		if t := r.opts.Tenant(info); t != "" {
			return t
		}
	}
	return info.Namespace
}

// noPolicy logs, once per activity type and task queue, that an activity runs without a policy:
// nothing is claimed for it. The most common cause is an activity registered under a name of its
// own (activity.RegisterOptions.Name) whose policy was set with its function value, which gives
// the function's name. oncekey's own activities ("oncekey." names) have no policy by design.
func (r *root) noPolicy(ctx context.Context, info activity.Info) {
	name := info.ActivityType.Name
	if strings.HasPrefix(name, "oncekey.") {
		return
	}
	if _, seen := r.unpoliced.LoadOrStore(info.TaskQueue+"\x00"+name, struct{}{}); seen {
		return
	}
	activity.GetLogger(ctx).Info(fmt.Sprintf("oncekey: no policy for activity type %s; it runs without a claim. "+
		"To protect it, give it one: Registry.Set(fn, policy) for a function registered under its own name, "+
		"Registry.SetAs(%q, fn, policy) for one registered under another name", name, name),
		"activity_type", name, "task_queue", info.TaskQueue)
}

// maxFallbacksLogged bounds the routed tools fallback remembers: the names come from a model,
// which may invent any number of them.
const maxFallbacksLogged = 1024

// fallback logs at Warn, once per activity type and tool (for the first maxFallbacksLogged of
// them), that a routed call named a tool without a policy and runs under its Route's Fallback:
// a tool whose policy is registered under another spelling (get-weather for get_weather) would
// otherwise be treated as Effectful without a word.
func (r *root) fallback(logger log.Logger, activityType string, res oncekey.Resolved) {
	if _, seen := r.fallbacks.Load(activityType + "\x00" + res.Tool); seen || r.fallbacksSeen.Load() >= maxFallbacksLogged {
		return
	}
	if _, seen := r.fallbacks.LoadOrStore(activityType+"\x00"+res.Tool, struct{}{}); seen {
		return
	}
	r.fallbacksSeen.Add(1)
	tools := r.opts.Registry.Tools()
	slices.Sort(tools)
	if len(tools) > 20 {
		tools = append(tools[:20], "…")
	}
	logger.Warn(fmt.Sprintf("oncekey: %s called tool %q, which has no policy; it runs under the Route's Fallback, %s. "+
		"If its policy is registered under another name, register it under this one (oncekey.SetTool)", activityType, res.Tool, res.Policy.Effect),
		"activity_type", activityType, "tool", res.Tool, "fallback_effect", res.Policy.Effect.String(), "registered_tools", tools)
}
