package worker

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync/atomic"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/internal/workflows"
	"github.com/oncekey/oncekey/oncekeystore"
)

// PluginName is the name of the plugin NewPlugin returns.
const PluginName = "oncekey"

// NewPlugin returns a Temporal plugin that installs oncekey on every worker it configures: the
// interceptor (New(opts)), the reconciliation workflow and oncekey's activities. It also installs
// the interceptor on workflow replayers, so replay tests see what workers do.
//
// Give it to client.Options.Plugins: every worker made from that client gets it, and when
// opts.DataConverter is nil the plugin uses the client's data converter (codecs included) for
// stored results. Given to worker.Options.Plugins instead, it cannot see the client's data
// converter, and would store results with the SDK's default one, past any codec the client has
// (plain text at rest under an encrypting client): a worker started so, with opts.DataConverter
// nil, fails to start (Start and Run return an *ConfigError naming DataConverter).
// Set opts.DataConverter to the client's converter (converter.GetDefaultDataConverter() for a
// client without one) to use it there.
//
// While one of its workers runs, the plugin samples the store's unknown records and pending
// approvals every opts.UnknownsSampleInterval (default 1 minute) into the gauges
// metrics.UnknownsWaiting, metrics.UnknownOldestWait, metrics.ApprovalsWaiting and
// metrics.ApprovalOldestWait (see UnknownsSampler), through the client's metrics handler; given to
// worker.Options.Plugins it sees no handler and samples nothing.
//
// Given to both (client and worker), it installs once. A worker that would get oncekey's
// interceptor twice by other means (two plugins, or the plugin and interceptor.New in
// worker.Options.Interceptors) does not start: worker.New panics with an error saying which to
// remove.
//
// A worker whose Registry has a Policy.Approval and whose Store is not an oncekeystore.ApprovalStore
// does not start: Start and Run return an *ConfigError naming the store and the tool.
//
// It returns a *ConfigError for invalid options.
func NewPlugin(opts Options) (*temporal.SimplePlugin, error) {
	var lazy *lazyConverter
	if opts.DataConverter == nil {
		lazy = &lazyConverter{}
		opts.DataConverter = lazy
	}
	ic, err := NewInterceptor(opts)
	if err != nil {
		return nil, err
	}
	acts, err := activities.NewWithOptions(opts.Store, activities.Options{DataConverter: opts.DataConverter, FingerprintSecret: opts.FingerprintSecret,
		Registry: opts.Registry, ResultSealer: opts.ResultSealer, TrustList: opts.TrustList})
	if err != nil {
		return nil, err
	}
	interval := opts.UnknownsSampleInterval
	if interval == 0 {
		interval = DefaultUnknownsSampleInterval
	}
	var (
		sampler *UnknownsSampler // set once the client's metrics handler is known
		running samplerRun
		dialed  *client.Options // the client's options, for the search attribute check
	)
	return temporal.NewSimplePlugin(temporal.SimplePluginOptions{
		Name:               PluginName,
		WorkerInterceptors: []tinterceptor.WorkerInterceptor{ic},
		ConfigureWorker: func(_ context.Context, o sdkworker.PluginConfigureWorkerOptions) error {
			return installOnce(o.WorkerOptions, ic, o.TaskQueue)
		},
		ConfigureClient: func(_ context.Context, o client.PluginConfigureClientOptions) error {
			if lazy != nil {
				lazy.set(o.ClientOptions.DataConverter)
			} else {
				warnOtherConverter(o.ClientOptions, opts.DataConverter)
			}
			if opts.SearchAttributes {
				co := *o.ClientOptions
				dialed = &co
			}
			if h := o.ClientOptions.MetricsHandler; h != nil && interval > 0 {
				sampler = &UnknownsSampler{Store: opts.Store, Handler: h, WithTenant: opts.MetricsTenantTag}
			}
			return nil
		},
		ConfigureWorkflowReplayer: func(_ context.Context, o sdkworker.PluginConfigureWorkflowReplayerOptions) error {
			if lazy != nil && o.WorkflowReplayerOptions.DataConverter != nil {
				lazy.set(o.WorkflowReplayerOptions.DataConverter)
			}
			return nil
		},
		RunContextBefore: func(ctx context.Context, o temporal.SimplePluginRunContextBeforeOptions) error {
			if opts.SearchAttributes && !o.WorkflowReplayer {
				if err := checkAtStart(ctx, dialed); err != nil {
					return err
				}
			}
			if !o.WorkflowReplayer && lazy != nil && !lazy.isSet() {
				return errWorkerPlugin
			}
			if !o.WorkflowReplayer {
				if err := checkApprovalStore(opts); err != nil {
					return err
				}
			}
			workflows.RegisterWithOptions(o.Registry, workflows.Options{Registry: opts.Registry, VersioningBehavior: opts.ReconcileVersioningBehavior})
			if !o.WorkflowReplayer {
				acts.Register(o.Registry)
				if sampler != nil {
					running.start(o.InstanceKey, sampler, interval)
				}
			}
			return nil
		},
		RunContextAfter: func(_ context.Context, o temporal.SimplePluginRunContextAfterOptions) {
			running.stop(o.InstanceKey)
		},
	})
}

// checkApprovalStore refuses a Registry with a Policy.Approval over a Store that keeps no
// approvals: the call would wait for an approval nobody can record.
func checkApprovalStore(opts Options) error {
	if _, ok := opts.Store.(oncekeystore.ApprovalStore); ok {
		return nil
	}
	tools := opts.Registry.Tools()
	slices.Sort(tools)
	for _, tool := range tools {
		if p, ok := opts.Registry.Policy(tool); ok && p.Approval != nil {
			return &ConfigError{Field: "Store", Reason: fmt.Sprintf(
				"the policy of %s asks for approval (Policy.Approval), and the store (%T) keeps no approvals (oncekeystore.ApprovalStore): "+
					"use a store that does (pgstore, memstore, redisstore), or drop Policy.Approval", tool, opts.Store)}
		}
	}
	return nil
}

// installOnce keeps the plugin's interceptor ic once in o.Interceptors: the same plugin given to
// both client.Options.Plugins and worker.Options.Plugins configures the worker twice, and two
// copies of the interceptor would each claim every call, the inner one waiting on the outer's
// claim. Another oncekey interceptor (a second NewPlugin, or interceptor.New in
// worker.Options.Interceptors beside the plugin) is an error that says which to remove.
func installOnce(o *sdkworker.Options, ic tinterceptor.WorkerInterceptor, taskQueue string) error {
	kept := o.Interceptors[:0:0]
	seen := false
	for _, i := range o.Interceptors {
		switch {
		case i == ic && seen:
			continue // the same plugin twice: install it once
		case i == ic:
			seen = true
		case interceptor.IsOncekey(i):
			return fmt.Errorf("oncekey: the worker for task queue %q would get oncekey's interceptor twice (its claims would wait on each other): "+
				"keep the oncekey plugin in client.Options.Plugins and remove the other copy: a second oncekey plugin (worker.NewPlugin) in worker.Options.Plugins, "+
				"or interceptor.New / worker.Options in worker.Options.Interceptors", taskQueue)
		}
		kept = append(kept, i)
	}
	o.Interceptors = kept
	return nil
}

// Register registers oncekey's reconciliation workflow and activities on w (a worker.Worker).
// It does not install the interceptor, which Temporal only accepts at worker construction: pass
// NewInterceptor(opts) in worker.Options.Interceptors (or use NewPlugin, which does both).
// Every worker on a task queue that runs reconciliation workflows (Options.ReconcileTaskQueue,
// by default the workflows' own) needs this registration. It returns a *ConfigError
// for invalid options, and for a Registry with a Policy.Approval over a Store that is not an
// oncekeystore.ApprovalStore.
func Register(w sdkworker.Registry, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	if err := checkApprovalStore(opts); err != nil {
		return err
	}
	acts, err := activities.NewWithOptions(opts.Store, activities.Options{DataConverter: opts.DataConverter, FingerprintSecret: opts.FingerprintSecret,
		Registry: opts.Registry, ResultSealer: opts.ResultSealer, TrustList: opts.TrustList})
	if err != nil {
		return err
	}
	workflows.RegisterWithOptions(w, workflows.Options{Registry: opts.Registry, VersioningBehavior: opts.ReconcileVersioningBehavior})
	acts.Register(w)
	return nil
}

// WorkerOptions returns base with the interceptor appended to its Interceptors, for
// worker.New(c, taskQueue, opts) when not using the plugin. Call Register on the new worker too,
// with the same opts. Without the plugin oncekey cannot see the client's data converter: when the
// client has one (a payload codec, e.g. encryption), set opts.DataConverter to it, or stored
// results are encoded with the SDK's default converter, past the codec.
func WorkerOptions(opts Options, base sdkworker.Options) (sdkworker.Options, error) {
	ic, err := NewInterceptor(opts)
	if err != nil {
		return base, err
	}
	base.Interceptors = append(append([]tinterceptor.WorkerInterceptor(nil), base.Interceptors...), ic)
	return base, nil
}

// warnOtherConverter logs one warning (on the client's logger) when the plugin was given a
// DataConverter that is not the client's and the client has one of its own: stored results are
// then encoded past the client's codec (plain text at rest under an encrypting client), and a
// resolution's result, encoded by the client, may not decode.
func warnOtherConverter(co *client.Options, dc converter.DataConverter) {
	if co.DataConverter == nil || sameConverter(co.DataConverter, dc) {
		return
	}
	logger := co.Logger
	if logger == nil {
		logger = log.NewStructuredLogger(slog.Default())
	}
	logger.Warn("oncekey: worker.Options.DataConverter is not the client's data converter: oncekey stores results "+
		"with the one in its options, past the client's payload codec (plain text at rest if the client encrypts). "+
		"Leave worker.Options.DataConverter nil (the plugin then uses the client's) or set it to the client's",
		"OptionsDataConverter", fmt.Sprintf("%T", dc), "ClientDataConverter", fmt.Sprintf("%T", co.DataConverter))
}

// sameConverter reports whether a and b are the same data converter value (false when their
// type cannot be compared).
func sameConverter(a, b converter.DataConverter) (same bool) {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || !ta.Comparable() {
		return false
	}
	defer func() {
		if recover() != nil { // a comparable type holding an incomparable value
			same = false
		}
	}()
	return a == b
}

// errWorkerPlugin refuses a worker that got the plugin without its client: it would store
// results with a converter other than the client's.
var errWorkerPlugin = &ConfigError{Field: "DataConverter", Reason: "the oncekey plugin was given to worker.Options.Plugins, " +
	"where it cannot see the client's data converter: it would store results with the SDK's default converter, " +
	"past any payload codec the client has (plain text at rest under an encrypting client). Give the plugin to " +
	"client.Options.Plugins instead (every worker of that client gets it), or set oncekey's worker.Options.DataConverter " +
	"to the client's data converter (converter.GetDefaultDataConverter() for a client without one)"}

// lazyConverter is a data converter whose target is set when the plugin learns the client's; until
// then (and when set to nil) it is converter.GetDefaultDataConverter().
type lazyConverter struct {
	dc atomic.Pointer[converter.DataConverter]
}

func (l *lazyConverter) set(dc converter.DataConverter) {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	l.dc.Store(&dc)
}

// isSet reports whether the plugin has learnt a client's (or replayer's) data converter.
func (l *lazyConverter) isSet() bool { return l.dc.Load() != nil }

func (l *lazyConverter) get() converter.DataConverter {
	if p := l.dc.Load(); p != nil {
		return *p
	}
	return converter.GetDefaultDataConverter()
}

func (l *lazyConverter) ToPayload(value any) (*commonpb.Payload, error) {
	return l.get().ToPayload(value)
}
func (l *lazyConverter) FromPayload(p *commonpb.Payload, valuePtr any) error {
	return l.get().FromPayload(p, valuePtr)
}
func (l *lazyConverter) ToPayloads(values ...any) (*commonpb.Payloads, error) {
	return l.get().ToPayloads(values...)
}
func (l *lazyConverter) FromPayloads(ps *commonpb.Payloads, valuePtrs ...any) error {
	return l.get().FromPayloads(ps, valuePtrs...)
}
func (l *lazyConverter) ToString(p *commonpb.Payload) string { return l.get().ToString(p) }
func (l *lazyConverter) ToStrings(ps *commonpb.Payloads) []string {
	return l.get().ToStrings(ps)
}
