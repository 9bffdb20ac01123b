package interceptor

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/oncekeystore"
)

// TenantInfo is what Options.Tenant sees of the workflow an operation belongs to.
type TenantInfo struct {
	Namespace    string
	WorkflowID   string
	WorkflowType string
	TaskQueue    string
	// ActivityID is the activity ID of a standalone activity (client.ExecuteActivity; WorkflowID
	// and WorkflowType are then empty); "" for every call a workflow makes.
	ActivityID string
}

// Event describes one claimed tool call, for Options.OnEvent. It carries no arguments and no
// results.
type Event struct {
	Tool string
	// KeyPrefix is the first 12 characters of the operation key ("ok1_" and 8 hex digits); empty
	// when no key could be derived.
	KeyPrefix string
	Tenant    string
	Effect    oncekey.Effect
	// Outcome is the outcome label: applied, replayed, in_flight, conflict, rejected, unknown,
	// expired or failed.
	Outcome oncekey.Outcome
	// Duration is the time from the start of the interception to the answer, body included.
	Duration time.Duration
	// ClaimLatency is the time spent in Store.Claim round trips, repeats included (zero if none was
	// made).
	ClaimLatency time.Duration
	// Err is the error returned to Temporal, nil on success. Its message is the text for a model
	// (oncekey.ErrorText); ErrorDetails(Err).Message is the operator's account, and errors.As also
	// reaches the error behind it (a store's, the body's) that the message leaves out.
	Err error
}

// Options configure the interceptor. Store and Registry are required; every other field has a
// default. Fields are alphabetical.
type Options struct {
	// DataConverter encodes stored results, header values and resolved results. It must be the
	// data converter of the client the workers use (codecs included), or stored results will not
	// decode. worker.NewPlugin captures the client's automatically when the plugin is given to
	// client.Options.Plugins (leave this nil then); a plugin given one that is not the client's,
	// while the client has its own, logs a warning on the client's logger. Without the plugin
	// (worker.Options, worker.Register, worker.NewInterceptor), nothing can see the client: set it to the client's
	// converter whenever the client has one (a payload codec, e.g. encryption). Defaults to
	// converter.GetDefaultDataConverter().
	DataConverter converter.DataConverter

	// DisableBodyHeartbeat turns off the heartbeats oncekey sends while a claimed (Effectful or
	// Idempotent) body runs. Temporal tells a running activity it was paused (`temporal activity
	// pause`), reset or cancelled only in a heartbeat's answer; oncekey heartbeats with the lease
	// renewal (every Lease/3, or every half of the activity's HeartbeatTimeout when shorter)
	// whenever the body has not heartbeated since the last time, repeating the details of the
	// body's latest activity.RecordHeartbeat, so the body's progress details are kept; before the
	// body's first, an attempt that started with an earlier attempt's heartbeat details gets them
	// again, unchanged (as converter.RawValue; where they cannot be read so, no heartbeat from
	// oncekey until the body heartbeats itself, as one would clear them). The heartbeats also
	// keep a body that never heartbeats itself from timing out on HeartbeatTimeout while its
	// worker lives.
	// Defaults to false: oncekey heartbeats.
	DisableBodyHeartbeat bool

	// EscalationTimeout bounds how long a reconciliation workflow waits for a person; when it
	// passes, the reconciliation fails with an error saying nobody resolved the operation, and
	// the workflow blocked on it gets an IndeterminateOutcome error (label unknown) and goes on:
	// an agent loop's model tells the user the outcome is not known. The record stays unknown,
	// listed by `oncekey list --status unknown` and counted by metrics.UnknownsWaiting; running
	// the step again starts a new reconciliation, and `oncekey resolve --direct` settles it
	// without one. Defaults to DefaultEscalationTimeout (10 minutes); negative waits forever.
	EscalationTimeout time.Duration

	// FingerprintSecret, if set, keys the fingerprints of claimed calls with HMAC-SHA-256
	// (oncekey.KeyedFingerprint; stored as "k1_" and 64 hex digits), so that a stored fingerprint,
	// a tombstone or a log cannot be tested against guessed arguments (an e-mail address and an
	// amount) without it. At least MinFingerprintSecretBytes bytes. It must be the same on every
	// worker of the deployment and must not change: a record made under another secret (or none)
	// does not match, so its repeats are refused as fingerprint mismatches until it expires.
	// Defaults to none: unkeyed SHA-256 (oncekey.Fingerprint). It keys fingerprints only: the
	// operation key of a call without a step ID (or an ArgsKey) digests its arguments unkeyed,
	// so calls whose guessable arguments must not be recoverable take a step ID or an ExplicitKey
	// of an opaque identifier (docs/policies-and-keys.md, "Fingerprints").
	FingerprintSecret []byte

	// HeaderKeys, if set, binds the tenant, step ID and first activity ID headers a workflow sets
	// for a claimed call (oncekey.WithTenant, Options.Tenant, oncekey.WithStepID, the re-runs of
	// an Effectful call) to the call, so that someone who can write to the namespace but holds no
	// key cannot choose another tenant's key space or another call's step ID by scheduling the
	// tool from a workflow of their own (docs/approvals.md, "The trust rule"). Each key is an ID
	// (1 to oncekey.MaxHeaderKeyIDLen characters of A-Z, a-z, 0-9, '.', '_', '-') and a secret of
	// at least oncekey.MinHeaderKeyBytes random bytes; oncekey.LoadHeaderKeys reads them from a
	// file, `oncekey keys header-gen` makes one. A bad key or an ID listed twice is a
	// *ConfigError.
	//
	// On the workflow side, the first key binds: every claimed call it schedules carries, in the
	// oncekey-binding header, an HMAC-SHA-256 under it of the call's namespace, workflow ID,
	// activity type, tenant, step ID, first activity ID and the digest of its arguments document
	// (oncekey.BindHeaders). On the activity side, every listed key verifies: a call of a
	// claimed tool whose headers carry a tenant, step ID or first activity ID is refused before
	// anything is claimed or run unless its binding verifies under one of them
	// (oncekey.UnboundHeaders, non-retryable; logged at Warn and counted in
	// metrics.HeadersRefused). A call without those headers (scheduled by a workflow without
	// oncekey's interceptor) keeps the tenant Options.Tenant gives, as before: a namespace writer
	// can still schedule calls in the worker's own default tenant, not choose another (unless
	// Options.Tenant derives it from the workflow ID, type or task queue, which they choose).
	// Standalone activities (which refuse these headers) and Nexus operations (keyed from the
	// caller's oncekey-key header or the request ID) are not covered.
	//
	// Give every worker of the deployment, workflow and activity workers alike, the same list.
	// The list is read when the worker starts; rotate by rolling deploys: add the new key second
	// everywhere, then move it first, then drop the old one. A history recorded before the option
	// was on replays unchanged (headers are not compared on replay, and the binding is computed
	// from deterministic inputs); its calls scheduled from then on carry a binding, while calls
	// scheduled before and still waiting or retried by Temporal carry none and are refused by a
	// worker that verifies: turn it on in a running deployment with HeaderKeysReportOnly first.
	// oncekey's workflow side sends the tenant header on every claimed call, so a workflow worker
	// with oncekey's interceptor and without the keys has every such call refused by a worker
	// that has them.
	// Defaults to none: the headers are believed as sent.
	HeaderKeys []oncekey.HeaderKey

	// HeaderKeysReportOnly, with HeaderKeys, binds the headers on the workflow side and checks
	// them on the activity side as HeaderKeys does, but runs a call whose headers are not bound as
	// it would run without header keys (the headers believed as sent), logged at Warn and counted
	// in metrics.HeadersRefused with metrics.TagEnforced "false". It is for turning header keys
	// on in a deployment that runs: deploy every worker with HeaderKeys and HeaderKeysReportOnly,
	// wait until the calls scheduled before have ended and the count stays flat, then deploy them
	// without HeaderKeysReportOnly (docs/approvals.md, "Turning header keys on"). Without
	// HeaderKeys it is a *ConfigError. Defaults to false: unbound headers are refused.
	HeaderKeysReportOnly bool

	// MetricsTenantTag adds a "tenant" tag to oncekey's metrics (package metrics), on the
	// activity side and in the reconciliation workflow. Defaults to false: one series per tenant
	// can be many series, and metric backends keep tag values in the clear.
	MetricsTenantTag bool

	// OnEvent, if set, is called once per claimed tool call (never for pass-through calls) on the
	// activity worker, after the outcome is known. It must not block.
	OnEvent func(Event)

	// ReconcileTaskQueue is the task queue of the reconciliation workflows the interceptor starts;
	// a worker there must have oncekey's workflow and activities registered (worker.Register or
	// worker.NewPlugin). Defaults to the task queue of the workflow that blocked.
	ReconcileTaskQueue string

	// ReconcileVersioningBehavior is the Worker Deployment Versioning behavior the plugin and
	// worker.Register register the reconciliation workflow with (a worker with deployment
	// versioning on and no DefaultVersioningBehavior requires one). Defaults to
	// workflow.VersioningBehaviorAutoUpgrade: a reconciliation can wait for days, and Pinned would
	// keep its deployment alive that long. oncekey's workflow changes go behind workflow.GetVersion.
	ReconcileVersioningBehavior workflow.VersioningBehavior

	// Registry maps tools (activity type names) to policies. A tool without a policy passes
	// through untouched; the first call of each such activity type on a task queue is logged at
	// Info level through the activity logger. Required.
	Registry *oncekey.Registry

	// ResultSealer, if set, seals every result oncekey stores to its record (tenant and operation
	// key) and opens it before a replay or a reconciliation reads it (oncekey.SealResult,
	// oncekey.OpenResult): a stored result moved or copied to another row or tenant does not open,
	// and a plain one (written around the sealer) is refused. It must be the same on every worker
	// of the deployment, and hold every key a stored result may be sealed under: a worker without it
	// fails a replay of a sealed result with an error saying to configure it. Failures are not
	// sealed. Defaults to none: results are stored as the data converter encoded them.
	ResultSealer oncekey.ResultSealer

	// SearchAttributes makes the reconciliation and approval workflows carry the typed search
	// attributes of package reconcile (OncekeyStatus, OncekeyTool, OncekeyTenant,
	// OncekeyWaitingSince), set at start and on every change, so the Temporal UI can list what
	// waits (reconcile.WaitingQuery, reconcile.ApprovalWaitingQuery).
	// They must be registered on the namespace first (`oncekey setup search-attributes`):
	// worker.NewPlugin checks at worker start and refuses to start without them, since a
	// workflow that sets an unregistered attribute fails its workflow task until it is
	// registered. Their values (tools, tenants) are stored unencrypted by Temporal. Defaults to
	// false.
	SearchAttributes bool

	// Store keeps the records. Required.
	Store oncekeystore.Store

	// Tenant, if set, names the tenant of a workflow that did not set one with oncekey.WithTenant.
	// It must be deterministic (it runs in workflow code). Defaults to the namespace.
	Tenant func(TenantInfo) string

	// Tracer, if set, gets a span for each phase of a claimed call: the claim, the body, and the
	// completion or the replay (SpanClaim, SpanBody, SpanComplete, SpanReplay), children of the
	// span in the activity's context. oncekeyotel.NewTracer gives one on OpenTelemetry. Defaults to
	// none.
	Tracer Tracer

	// TrustList, if set, turns on signed decisions (docs/approvals.md, "Signed decisions"): every
	// person's decision on an approval (approve, with edited arguments too, deny, request
	// changes) and every resolution of an unknown outcome must carry a signature
	// (reconcile.SignDecision, reconcile.SignResolution, `oncekey approve --sign-key`) by a key
	// the list trusts for the call's tenant, tool and kind of decision, made for exactly that
	// request. The workers' oncekey.DecideApproval and oncekey.RecordResolution activities refuse
	// any other (the decision is refused as invalid, non-retryable, and nothing is written;
	// logged and counted in metrics.DecisionsRefused), and the worker runs a call that needs
	// approval only on an approval whose stored signature still verifies, checked before the claim
	// and under it. A standing grant covers calls only while the signature of its making
	// (reconcile.SignGrant, `oncekey grants add --sign-key`) verifies. Load
	// it with decisionsig.LoadTrustList, which re-reads its file when it changes. Give every
	// worker of the namespace the same list. Defaults to none: decisions are not verified.
	TrustList *decisionsig.TrustList

	// UnknownsSampleInterval is how often worker.NewPlugin samples the store's unknown records
	// and pending approvals for the gauges metrics.UnknownsWaiting, metrics.UnknownOldestWait,
	// metrics.ApprovalsWaiting and metrics.ApprovalOldestWait, through the
	// client's metrics handler (the plugin must be given to client.Options.Plugins to see it).
	// Defaults to 1 minute; negative turns sampling off.
	UnknownsSampleInterval time.Duration
}

// ConfigError: Options are invalid. Field names the bad field.
type ConfigError struct {
	Field  string
	Reason string
	// Err is the typed error behind Reason, when there is one (a *oncekeystore.TransactionalStoreError
	// for a Transactional tool over a store that cannot run it); Unwrap returns it.
	Err error
}

// Unwrap returns Err.
func (e *ConfigError) Unwrap() error { return e.Err }

func (e *ConfigError) Error() string {
	return fmt.Sprintf("oncekey: worker.Options.%s: %s", e.Field, e.Reason)
}

// ErrConfig is matched by every *ConfigError (errors.Is).
var ErrConfig = errors.New("oncekey: invalid worker options")

// Is makes errors.Is(err, ErrConfig) hold for a *ConfigError.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// Validate returns a *ConfigError naming the first bad field, or nil.
func (o Options) Validate() error { return o.validate() }

func (o *Options) validate() error {
	if o.Store == nil {
		return &ConfigError{Field: "Store", Reason: "is required"}
	}
	if o.Registry == nil {
		return &ConfigError{Field: "Registry", Reason: "is required (oncekey.NewRegistry())"}
	}
	if n := len(o.FingerprintSecret); n > 0 && n < MinFingerprintSecretBytes {
		return &ConfigError{Field: "FingerprintSecret", Reason: fmt.Sprintf("is %d bytes; give at least %d random bytes", n, MinFingerprintSecretBytes)}
	}
	if err := oncekey.CheckHeaderKeys(o.HeaderKeys); err != nil {
		return &ConfigError{Field: "HeaderKeys", Reason: err.Error(), Err: err}
	}
	if o.HeaderKeysReportOnly && len(o.HeaderKeys) == 0 {
		return &ConfigError{Field: "HeaderKeysReportOnly", Reason: "is set without HeaderKeys: there is nothing to check; give HeaderKeys too, or leave it false"}
	}
	if err := o.checkSigners(); err != nil {
		return err
	}
	if _, ok := o.Store.(oncekeystore.TxStore); !ok {
		tools := o.Registry.Tools()
		slices.Sort(tools)
		for _, tool := range tools {
			if p, ok := o.Registry.Policy(tool); ok && p.Effect == oncekey.Transactional {
				e := &oncekeystore.TransactionalStoreError{Tool: tool, Store: fmt.Sprintf("%T", o.Store)}
				return &ConfigError{Field: "Store", Reason: e.Error(), Err: e}
			}
		}
	}
	return nil
}

// checkSigners refuses a Registry with an ApprovalPolicy.Signers of 2 or more on a worker
// without a trust list: nobody could tell its signers apart, and it must never run on one
// approval.
func (o *Options) checkSigners() error {
	if o.TrustList != nil {
		return nil
	}
	tools := o.Registry.Tools()
	slices.Sort(tools)
	for _, tool := range tools {
		if p, ok := o.Registry.Policy(tool); ok && p.Approval != nil && p.Approval.RequiredSigners() > 1 {
			e := &oncekey.SignersNeedTrustListError{Tool: tool, Signers: p.Approval.RequiredSigners()}
			return &ConfigError{Field: "TrustList", Reason: e.Error(), Err: e}
		}
	}
	return nil
}

// DefaultEscalationTimeout is Options.EscalationTimeout's default: long enough for the person on
// call to answer a page, short enough that a workflow waiting on the decision (an agent loop, a
// user at the other end of it) is not blocked for good and can say that the outcome is unknown.
const DefaultEscalationTimeout = 10 * time.Minute

// MinFingerprintSecretBytes is the shortest Options.FingerprintSecret accepted.
const MinFingerprintSecretBytes = 16

// withDefaults returns o with zero fields set to their defaults.
func (o Options) withDefaults() Options {
	o.FingerprintSecret = slices.Clone(o.FingerprintSecret)
	if o.HeaderKeys != nil {
		keys := make([]oncekey.HeaderKey, len(o.HeaderKeys))
		for i, k := range o.HeaderKeys {
			keys[i] = oncekey.HeaderKey{ID: k.ID, Secret: slices.Clone(k.Secret)}
		}
		o.HeaderKeys = keys
	}
	if o.DataConverter == nil {
		o.DataConverter = converter.GetDefaultDataConverter()
	}
	switch {
	case o.EscalationTimeout == 0:
		o.EscalationTimeout = DefaultEscalationTimeout
	case o.EscalationTimeout < 0:
		o.EscalationTimeout = 0 // decision.Input: 0 waits forever
	}
	return o
}
