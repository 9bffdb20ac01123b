package interceptor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/approvaledit"
	"github.com/oncekey/oncekey/internal/argsdoc"
	"github.com/oncekey/oncekey/internal/failure"
	"github.com/oncekey/oncekey/internal/failuredoc"
	"github.com/oncekey/oncekey/internal/httpproof"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/metrics"
	"github.com/oncekey/oncekey/oncekeystore"
)

// Metric names recorded through the activity's metrics handler, tagged with "tool" (and
// "outcome" for the counter, "tenant" with Options.MetricsTenantTag); package metrics names
// every metric oncekey records.
const (
	MetricCalls        = metrics.ToolCalls
	MetricClaimLatency = metrics.ClaimLatency
)

// storeWriteTimeout bounds each store write made after the body ran; those writes use a context
// detached from the activity's, which may already be done.
const storeWriteTimeout = 15 * time.Second

type activityInbound struct {
	tinterceptor.ActivityInboundInterceptorBase
	root *root
	// hb keeps this attempt's heartbeats; set by Init.
	hb *heartbeats
}

// Init wraps the activity outbound side, so that the user's heartbeats pass through hb.
func (a *activityInbound) Init(outbound tinterceptor.ActivityOutboundInterceptor) error {
	a.hb = &heartbeats{next: outbound}
	return a.Next.Init(&activityOutbound{ActivityOutboundInterceptorBase: tinterceptor.ActivityOutboundInterceptorBase{Next: outbound}, hb: a.hb})
}

// call is one interception of a claimed tool.
type call struct {
	root *root
	// invoke runs the tool's body: the next activity interceptor, or the next Nexus operation
	// interceptor for a Nexus operation's synchronous handler (nexus.go).
	invoke func(context.Context, *tinterceptor.ExecuteActivityInput) (any, error)
	// info is the activity's; for a Nexus operation, only its name (ActivityType), namespace and
	// task queue are set.
	info activity.Info
	// nexusKey is, for a Nexus operation, the key that names the intended effect (the caller's
	// wire.NexusHeaderKey header, or the Nexus request ID); "" for an activity.
	nexusKey string
	policy   oncekey.Policy
	// fallback: policy is the Route's Fallback (a tool nobody classified), which never uses what
	// IdempotencyKeyTransport proved.
	fallback bool
	// tool is the tool's name (the activity type, or what its Route named); args is its arguments
	// document in canonical JSON.
	tool string
	args json.RawMessage
	// doc is the call's whole arguments document (argsDocument), which a header binding digests
	// (Options.HeaderKeys); args is the part of it a Route names.
	doc json.RawMessage
	op  oncekey.Operation
	key string
	fp  string
	// version is the Policy.Version the call is claimed under: the policy's, or an older one's
	// (Policy.Previous) when the call repeats an operation of that version.
	version string
	// ids are the call's identity under its policy, then under each older version the policy
	// answers for (oncekey.Identities).
	ids   []oncekey.Identity
	start time.Time

	claimLatency time.Duration
	outcome      oncekey.Outcome
	// effectRef is what the body recorded with oncekey.SetEffectReference, read when it returned.
	effectRef string
	// httpProof is what oncekey.IdempotencyKeyTransport proved about the requests the body sent,
	// read when it returned.
	httpProof httpproof.Proof
	// epoch is the epoch of the record marked unknown, for the resolve command in messages.
	epoch int64
	// cause is the error behind the call's last application error (appError), which an OnEvent
	// hook reaches through Event.Err; nil for none.
	cause error
	// needsApproval: the policy's ApprovalPolicy.Required says the call needs a person's approval;
	// summary is then what the person is shown, derived here from the policy and the arguments.
	needsApproval bool
	summary       string
	// editOf is the operation key of the call this one was scheduled to replace, with the
	// arguments a person approved in its place (wire.HeaderEditOf); "" for any other call.
	editOf string
	// hb keeps the attempt's heartbeats, for the ones oncekey sends while the body runs (set by
	// Init, which the SDK calls before every attempt).
	hb *heartbeats
	// handOver: the call ended with the outcome unknown (the record is or will be unknown), for a
	// decision workflow to settle; a standalone activity starts it itself (standalone.go).
	handOver bool
	// confirm: a reconciliation decided the outcome applied (a standalone activity's, which
	// then reads the result through the claim), so a replay is the call's own effect confirmed.
	confirm bool
}

func (a *activityInbound) ExecuteActivity(ctx context.Context, in *tinterceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	activityType := info.ActivityType.Name
	reg := a.root.opts.Registry
	if !reg.Routed(activityType) {
		p, ok := reg.Policy(activityType)
		if !ok {
			a.root.noPolicy(ctx, info)
		}
		if !ok || !p.Effect.Claimed() {
			return a.Next.ExecuteActivity(ctx, in)
		}
	}
	c := &call{root: a.root, invoke: a.Next.ExecuteActivity, info: info, tool: activityType, start: time.Now(), hb: a.hb}
	claimed, err := c.resolve(ctx, in)
	if err == nil && !claimed {
		// A routed call whose tool is ReadOnly: nothing to claim.
		return a.Next.ExecuteActivity(ctx, in)
	}
	var res any
	if err == nil && c.standalone() {
		sctx, cancel := c.answerInTime(ctx)
		res, err = c.run(sctx, in)
		if err != nil {
			res, err = c.settleStandalone(sctx, in, err)
		}
		cancel()
	} else if err == nil {
		res, err = c.run(ctx, in)
	}
	c.report(ctx, err)
	return res, err
}

// resolve reads the call's arguments document (argsDocument) and names its tool and policy
// through the Registry (a Route, for an activity type that carries many tools). claimed is false
// when the tool's policy claims nothing.
func (c *call) resolve(ctx context.Context, in *tinterceptor.ExecuteActivityInput) (claimed bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.logger(ctx).Error("oncekey: a hook panicked before the claim; the tool did not run", "tool", c.tool,
				"hook", "Route.Tool or an argument's MarshalJSON", "stack", string(debug.Stack()))
			c.outcome = oncekey.OutcomeRejected
			err = c.appError(fmt.Sprintf("oncekey: %s did not run: Route.Tool or an argument's MarshalJSON panicked: %v; nothing was claimed, "+
				"and the call is not retried (the bug is in that code, not in the tool)", c.tool, p), oncekey.ErrTypeConfig, true, nil, "hook panicked", false)
		}
	}()
	doc, err := c.argsDocument(ctx, in.Args)
	var mismatch *oncekey.ArgsMismatchError
	if errors.As(err, &mismatch) {
		c.outcome = oncekey.OutcomeRejected
		return false, c.appError(mismatch.Error(), oncekey.ErrTypeArgsMismatch, true, nil, "arguments differ from the header", false)
	}
	if err != nil {
		return false, c.configError(err)
	}
	c.doc = doc
	reg := c.root.opts.Registry
	if name := c.info.ActivityType.Name; !reg.Routed(name) {
		// The activity type is its own tool, and doc (canonical already) its arguments: what
		// Registry.Resolve would give, without encoding the document again.
		p, ok := reg.Policy(name)
		c.tool, c.policy, c.args = name, p, doc
		return ok && p.Effect.Claimed(), nil
	}
	r, ok, err := reg.Resolve(c.info.ActivityType.Name, doc)
	var unrouted *oncekey.RouteError
	if errors.As(err, &unrouted) {
		// The Route names no tool for the call, or no arguments: nothing to key it by.
		c.outcome = oncekey.OutcomeRejected
		return false, c.appError(unrouted.Error(), oncekey.ErrTypeConfig, true, nil, reasonRouteUnresolved, false)
	}
	if err != nil {
		return false, c.configError(err)
	}
	if r.Fallback {
		c.root.fallback(c.logger(ctx), c.info.ActivityType.Name, r)
	}
	c.tool, c.policy, c.args, c.fallback = r.Tool, r.Policy, r.Args, r.Fallback
	return ok && r.Policy.Effect.Claimed(), nil
}

// argsDocument returns the call's arguments document in canonical JSON: the document of the
// arguments as decoded here, the input the body receives, made exact by the HeaderArgs header the
// workflow side sent (oncekey.ExactArgs: integers beyond 2^53 that a generic map decoded into
// floats). A header that says anything else, or does not decode, is an *oncekey.ArgsMismatchError:
// keys, fingerprints, Authorize and approvals are decided from what the body receives, never from
// a header that whoever can write to the namespace may set.
func (c *call) argsDocument(ctx context.Context, args []any) (json.RawMessage, error) {
	var header json.RawMessage
	if h := tinterceptor.Header(ctx); h != nil {
		if p := h[wire.HeaderArgs]; p != nil {
			if err := c.root.opts.DataConverter.FromPayload(p, &header); err != nil || header == nil {
				return nil, &oncekey.ArgsMismatchError{Tool: c.tool, Path: ".", Reason: "the header does not decode as a JSON document"}
			}
		}
	}
	return oncekey.ExactArgs(c.tool, args, header)
}

func (c *call) run(ctx context.Context, in *tinterceptor.ExecuteActivityInput) (any, error) {
	if c.info.IsLocalActivity {
		return nil, c.configError(fmt.Errorf("%s is %s and cannot run as a local activity: oncekey cannot turn off local-activity retries or reconcile them; call it with workflow.ExecuteActivity", c.tool, c.policy.Effect))
	}
	if c.policy.Effect == oncekey.Transactional {
		if _, ok := c.root.opts.Store.(oncekeystore.TxStore); !ok {
			return nil, c.configError(&oncekeystore.TransactionalStoreError{Tool: c.tool, Store: fmt.Sprintf("%T", c.root.opts.Store)})
		}
	}
	if err := c.prepare(ctx, in); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		// The attempt is over (its deadline passed or it was cancelled) before any claim: claiming
		// now could start an effect nobody waits for.
		c.outcome = oncekey.OutcomeFailed
		return nil, ctx.Err()
	}
	if c.policy.KeyOnly {
		return c.keyOnly(ctx, in)
	}
	if err := c.older(ctx); err != nil {
		return nil, err
	}
	if c.policy.Effect == oncekey.Effectful && c.info.Attempt > 1 {
		// The workflow side schedules one attempt of an Effectful tool and retries in workflow
		// code; Temporal retrying it means its options were changed at run time (temporal
		// activity update-options) or the workflow's worker lacks oncekey's interceptor. The claim
		// decides as for any repeat: the body runs only on a record that proves nothing landed.
		c.logger(ctx).Warn("oncekey: Temporal retried an Effectful call; the record decides whether it runs",
			"tool", c.tool, "attempt", c.info.Attempt)
	}
	check := c.checkOnly(ctx)
	if !check {
		if err := c.approval(ctx, true); err != nil {
			return nil, err
		}
	}
	cctx, endClaim := c.span(ctx, SpanClaim)
	res, err := c.claim(cctx)
	endClaim(err)
	if err != nil {
		return nil, err
	}
	if !res.Acquired {
		rctx, endReplay := c.span(ctx, SpanReplay)
		out, acquired, err := c.existing(rctx, res)
		endReplay(err)
		if acquired == nil {
			return out, err
		}
		res = acquired
	}
	if check {
		return nil, c.checked(ctx, res.Record.Epoch)
	}
	if err := c.approvedUnderClaim(ctx, res.Record.Epoch); err != nil {
		return nil, err
	}
	return c.execute(ctx, in, res.Record.Epoch)
}

// prepare does what comes before the claim: it builds the operation, derives its key and
// fingerprint, and runs Policy.Authorize. A panic in the user's code it runs there (Options.Tenant,
// a Policy.Key function, an argument's MarshalJSON or MarshalText, Policy.Authorize) is a bad
// policy or key like an error from the same code: it is recovered into a non-retryable
// oncekey.Config error naming the tool, the hook and the panic value, rather than left to become a
// Temporal PanicError, which Temporal retries. Nothing is claimed before prepare returns, so there
// is no claim to give back.
func (c *call) prepare(ctx context.Context, in *tinterceptor.ExecuteActivityInput) (err error) {
	hook := "Options.Tenant (or the data converter reading oncekey's headers)"
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		c.logger(ctx).Error("oncekey: a hook panicked before the claim; the tool did not run", "tool", c.tool, "hook", hook,
			"key_prefix", keyPrefix(c.key), "stack", string(debug.Stack()))
		c.outcome = oncekey.OutcomeRejected
		tool := c.tool
		if c.key != "" {
			tool += " (key " + c.key + ")"
		}
		err = c.appError(fmt.Sprintf("oncekey: %s did not run: %s panicked: %v; nothing was claimed, and the call is not retried "+
			"(the bug is in that code, not in the tool)", tool, hook, p), oncekey.ErrTypeConfig, true, nil, "hook panicked", false)
	}()
	op, err := c.operation(ctx, in.Args)
	var unbound *oncekey.UnboundHeadersError
	if errors.As(err, &unbound) {
		return c.unboundHeaders(ctx, unbound)
	}
	if err != nil {
		return c.configError(err)
	}
	c.op = op
	// Key and fingerprint come from the arguments before the body can mutate them, from one
	// encoding of them (oncekey.Identities), with the identities of older versions when the
	// policy answers for them (Policy.Previous; older reads their records).
	hook = "Policy.Key (the ExplicitKey function, or an argument's MarshalJSON/MarshalText read by ArgsKey or the fingerprint) or a PreviousVersion.Args mapping"
	// The arguments document is canonical already (argsDocument, or the Route's part of it):
	// derived from as it is. Only this copy says so; hooks get op as it was built.
	derive := op
	argsdoc.MarkCanonical(&derive)
	if c.ids, err = oncekey.Identities(c.policy, derive, c.root.opts.FingerprintSecret); err != nil {
		return c.configError(err)
	}
	c.key, c.fp, c.version = c.ids[0].Key, c.ids[0].Fingerprint, c.ids[0].Version
	if c.editOf, err = c.editOfHeader(ctx); err != nil {
		return c.configError(err)
	}
	if c.editOf != "" && c.policy.Approval == nil {
		c.outcome = oncekey.OutcomeRejected
		return c.appError(fmt.Sprintf("oncekey: %s did not run: it was scheduled as the edit of %s, and the tool has no approval policy, so no edit of it was approved; nothing ran",
			c.tool, c.editOf), oncekey.ErrTypeApproval, true, nil, reasonEditNotApproved, false)
	}
	if c.policy.Authorize != nil {
		hook = "Policy.Authorize"
		if err := c.policy.Authorize(ctx, op); err != nil {
			c.outcome = oncekey.OutcomeRejected
			return c.appError(fmt.Sprintf("oncekey: %s (key %s) is not authorized: %v", c.tool, c.key, err),
				oncekey.ErrTypeUnauthorized, true, err, "not authorized", false)
		}
	}
	if a := c.policy.Approval; a != nil {
		// Whether the call needs a person's approval, and what the person is shown: both derived
		// here, from the arguments the body receives. The edit of a call (HeaderEditOf) always
		// does: it runs only on the approval of its own arguments.
		hook = "ApprovalPolicy.Required"
		c.needsApproval = c.editOf != "" || a.Required == nil || a.Required(op)
		if c.needsApproval {
			hook = "Policy.Key"
			if _, err := keyWithoutActivityID(c.policy, op); !op.Standalone && errors.Is(err, errKeyNeedsActivityID) {
				return c.configError(errors.New("approval needs a key that does not depend on the activity ID: give the call a step ID (oncekey.WithStepID)"))
			}
			hook = "ApprovalPolicy.Summary"
			c.summary = approvaledit.ApprovalSummary(c.policy.Approval, op)
		}
	}
	return nil
}

// keyOnly runs the body of a key-only tool (Policy.KeyOnly) with its operation key in the
// context and nothing else: no claim, no record, no replay; Temporal's retries run it again.
func (c *call) keyOnly(ctx context.Context, in *tinterceptor.ExecuteActivityInput) (any, error) {
	return c.invoke(oncekey.ContextWithOperationKey(ctx, c.key), in)
}

// older makes the call the older operation it repeats, for a policy that answers for older
// versions of its tool (Policy.Previous): it reads the record of each older identity
// (oncekey.Identities) and, at the first one whose record has that identity's fingerprint,
// takes its key, fingerprint and version for the claim. Without such a record the call keeps its
// own identity.
func (c *call) older(ctx context.Context) error {
	if len(c.policy.Previous) == 0 {
		return nil
	}
	for _, id := range c.ids[1:] {
		rec, err := c.root.opts.Store.Get(ctx, &oncekeystore.GetParams{Tenant: c.op.Tenant, OperationKey: id.Key})
		if errors.Is(err, oncekeystore.ErrNotFound) {
			continue
		}
		if err != nil {
			return c.storeFailed("get", err)
		}
		if rec.Fingerprint == id.Fingerprint {
			activity.GetLogger(ctx).Info("oncekey: the call repeats an operation of an older version of its tool; it is that operation",
				"tool", c.tool, "version", id.Version, "key_prefix", keyPrefix(id.Key))
			c.key, c.fp, c.version = id.Key, id.Fingerprint, id.Version
			return nil
		}
	}
	return nil
}

// followUp reports whether this attempt is the call's own follow-up rather than a repeat of it:
// a Temporal retry of the same activity, or a re-run the workflow side scheduled (it carries the
// first attempt's activity ID). Policy.OnHit applies to repeats only.
func (c *call) followUp() bool {
	return c.info.Attempt > 1 || c.op.FirstActivityID != ""
}

// refuseRepeat answers a repeat of a settled operation for a policy that says OnHitFailFast.
func (c *call) refuseRepeat(rec *oncekeystore.Record) error {
	c.outcome = oncekey.OutcomeConflict
	e := &oncekey.RepeatRefusedError{OperationKey: c.key, Tool: c.tool, Status: rec.Status}
	return c.appError(e.Error(), oncekey.ErrTypeRepeatRefused, true, nil, "repeat refused", false)
}

// operation builds the Operation from the activity info and headers.
func (c *call) operation(ctx context.Context, args []any) (oncekey.Operation, error) {
	if c.nexusKey != "" {
		return c.nexusOperation(args), nil
	}
	dc := c.root.opts.DataConverter
	var stepID, tenant, firstActivityID string
	if c.standalone() {
		if err := standaloneHeaders(ctx); err != nil {
			return oncekey.Operation{}, err
		}
	} else if h := tinterceptor.Header(ctx); h != nil {
		if p := h[wire.HeaderStepID]; p != nil {
			if err := dc.FromPayload(p, &stepID); err != nil {
				return oncekey.Operation{}, fmt.Errorf("header %s: %w", wire.HeaderStepID, err)
			}
		}
		if p := h[wire.HeaderFirstActivityID]; p != nil {
			if err := dc.FromPayload(p, &firstActivityID); err != nil {
				return oncekey.Operation{}, fmt.Errorf("header %s: %w", wire.HeaderFirstActivityID, err)
			}
		}
		if p := h[wire.HeaderTenant]; p != nil {
			if err := dc.FromPayload(p, &tenant); err != nil {
				return oncekey.Operation{}, fmt.Errorf("header %s: %w", wire.HeaderTenant, err)
			}
		}
		if len(c.root.opts.HeaderKeys) > 0 {
			// Headers that choose the key space must be bound to this call (Options.HeaderKeys).
			bound := h[wire.HeaderStepID] != nil || h[wire.HeaderFirstActivityID] != nil || h[wire.HeaderTenant] != nil
			if e := c.verifyBinding(h, bound, tenant, stepID, firstActivityID); e != nil {
				if !c.root.opts.HeaderKeysReportOnly {
					return oncekey.Operation{}, e
				}
				c.reportUnbound(ctx, e)
			}
		}
	}
	ns := c.info.Namespace
	if tenant == "" {
		tenant = c.root.tenant(TenantInfo{
			Namespace:    ns,
			WorkflowID:   c.info.WorkflowExecution.ID,
			WorkflowType: workflowTypeName(c.info.WorkflowType),
			TaskQueue:    c.info.TaskQueue,
			ActivityID:   c.standaloneActivityID(),
		})
	}
	return oncekey.Operation{
		Namespace:  ns,
		Tenant:     tenant,
		WorkflowID: c.info.WorkflowExecution.ID,
		RunID:      c.info.WorkflowExecution.RunID,
		ActivityID: c.info.ActivityID,
		// A re-run the workflow side scheduled keeps the first attempt's default step.
		FirstActivityID: firstActivityID,
		StepID:          stepID,
		Standalone:      c.standalone(),
		Tool:            c.tool,
		ActivityType:    c.info.ActivityType.Name,
		Args:            args,
		ArgsJSON:        c.args,
	}, nil
}

// claimRetries are the pauses before the repeats of a Claim that failed with an ambiguous
// *oncekeystore.StoreUnavailableError (the statement may have committed and only its response been
// lost): two repeats with the same claim token, within the attempt's context.
var claimRetries = [...]time.Duration{50 * time.Millisecond, 200 * time.Millisecond}

// newClaimToken returns a random non-zero claim token.
func newClaimToken() int64 {
	for {
		if t := rand.Int64(); t != 0 {
			return t
		}
	}
}

// claim makes one claim. A claim that fails with a *oncekeystore.StoreUnavailableError is repeated
// with the same token (see claimRetries): if the first statement committed, the repeat finds the
// record it created and reports it acquired, instead of leaving it pending with nobody running.
// Any other error (a *oncekeystore.StoreSchemaError among them) is not repeated.
func (c *call) claim(ctx context.Context) (*oncekeystore.ClaimResult, error) {
	p := &oncekeystore.ClaimParams{
		Tenant:       c.op.Tenant,
		OperationKey: c.key,
		Namespace:    c.op.Namespace,
		Tool:         c.tool,
		Version:      c.version,
		Fingerprint:  c.fp,
		WorkflowID:   c.op.WorkflowID,
		StepID:       c.op.Step(),
		Effect:       c.policy.Effect,
		ClaimToken:   newClaimToken(),
		Lease:        c.policy.Lease,
		Retention:    c.policy.Retention,
		Tombstone:    c.policy.Tombstone,
	}
	once := func() (*oncekeystore.ClaimResult, error) {
		t := time.Now()
		defer func() { c.claimLatency += time.Since(t) }()
		return c.root.opts.Store.Claim(ctx, p)
	}
	res, err := once()
	for _, pause := range claimRetries {
		var unavailable *oncekeystore.StoreUnavailableError
		if err == nil || !errors.As(err, &unavailable) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		if ctx.Err() != nil {
			break
		}
		c.logger(ctx).Warn("oncekey: claim failed with the store unreachable; repeating it with the same token",
			"tool", c.tool, "key_prefix", keyPrefix(c.key), "error", err)
		res, err = once()
	}
	if err != nil {
		var inv *oncekeystore.InvalidParamsError
		if errors.As(err, &inv) {
			return nil, c.configError(err)
		}
		return nil, c.storeFailed("claim", err)
	}
	if res == nil || res.Record == nil {
		return nil, c.storeUnavailable("claim", errors.New("the store returned no record"))
	}
	return res, nil
}

// checkOnly reports whether the attempt is a check of the record (wire.HeaderCheck): it claims
// and answers from the record, and never runs the tool. The header can only make the worker do
// less, so it is taken as it is; one that does not decode is not a check.
func (c *call) checkOnly(ctx context.Context) bool {
	h := tinterceptor.Header(ctx)
	if h == nil || h[wire.HeaderCheck] == nil {
		return false
	}
	var check bool
	return c.root.opts.DataConverter.FromPayload(h[wire.HeaderCheck], &check) == nil && check
}

// checked ends a check (checkOnly) whose claim acquired the record at epoch: the record was free,
// so the call's effect has not landed. The claim is given back at once, and the answer is a
// retryable NotApplied error: repeating the call is safe.
func (c *call) checked(ctx context.Context, epoch int64) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeWriteTimeout)
	defer cancel()
	c.release(wctx, epoch)
	c.outcome = oncekey.OutcomeFailed
	return c.appError(fmt.Sprintf("oncekey: %s (key %s) timed out, and its record shows it did not apply; nothing ran in this check, and repeating the call is safe", c.tool, c.key),
		oncekey.ErrTypeNotApplied, false, nil, "not applied, read from the record", false)
}

// existing handles a claim that found a record it could not acquire. It returns the answer (out
// and err), or acquired when a later claim acquired the record after all.
func (c *call) existing(ctx context.Context, res *oncekeystore.ClaimResult) (out any, acquired *oncekeystore.ClaimResult, err error) {
	wait := c.policy.WaitInFlight
	if c.checkOnly(ctx) {
		// A check after a timeout waits until the timed-out attempt's lease has run out.
		wait = checkWait(c.policy)
	}
	deadline := time.Now().Add(wait)
	backoff := 50 * time.Millisecond
	for {
		rec := res.Record
		switch {
		case res.Expired || rec.Status == oncekeystore.StatusExpired:
			return nil, nil, c.expired(rec)
		case res.FingerprintMismatch:
			c.outcome = oncekey.OutcomeConflict
			e := &oncekey.FingerprintMismatchError{OperationKey: c.key, Tool: c.tool, Stored: rec.Fingerprint, Got: c.fp}
			return nil, nil, c.appError(e.Error(), oncekey.ErrTypeFingerprintMismatch, true, nil, "fingerprint mismatch", false)
		}
		if h, ok := activities.HandOffOf(rec); ok {
			// The record waits for an asynchronous completion: settle it from the attempt's
			// ending, or answer in flight while the attempt is open. Never a second hand-off.
			var open bool
			if rec, open = c.settleHandOff(ctx, rec, h); open {
				return nil, nil, c.inFlight(rec)
			}
			if rec.Status == oncekeystore.StatusReleased {
				if res, err = c.claim(ctx); err != nil {
					return nil, nil, err
				}
				if res.Acquired {
					return nil, res, nil
				}
				continue
			}
		}
		if settled := rec.Status == oncekeystore.StatusApplied || rec.Status == oncekeystore.StatusFailed; settled &&
			c.policy.OnHit == oncekey.OnHitFailFast && !c.followUp() {
			return nil, nil, c.refuseRepeat(rec)
		}
		switch rec.Status {
		case oncekeystore.StatusApplied:
			out, err := c.replay(ctx, rec)
			return out, nil, err
		case oncekeystore.StatusFailed:
			return nil, nil, c.replayFailure(rec)
		case oncekeystore.StatusUnknown:
			return nil, nil, c.unknownExisting(rec)
		}
		// Pending (another attempt holds a live claim) or released: wait, then look again.
		if !time.Now().Before(deadline) {
			return nil, nil, c.inFlight(rec)
		}
		wait := min(backoff, time.Until(deadline))
		backoff = min(backoff*2, 2*time.Second)
		select {
		case <-ctx.Done():
			c.outcome = oncekey.OutcomeInFlight
			return nil, nil, ctx.Err()
		case <-time.After(wait):
		}
		if c.info.HeartbeatTimeout > 0 {
			c.hb.keepAlive(ctx) // keeps an earlier attempt's details where it can
		}
		rec, err := c.root.opts.Store.Get(ctx, &oncekeystore.GetParams{Tenant: c.op.Tenant, OperationKey: c.key})
		if err != nil {
			return nil, nil, c.storeFailed("get", err)
		}
		if rec.Status == oncekeystore.StatusReleased || (rec.Status == oncekeystore.StatusPending && rec.LeaseExpired) {
			// Free, or its owner is gone: claim again (the store takes over or marks unknown).
			res, err = c.claim(ctx)
			if err != nil {
				return nil, nil, err
			}
			if res.Acquired {
				return nil, res, nil
			}
			continue
		}
		res = &oncekeystore.ClaimResult{Record: rec, FingerprintMismatch: rec.Fingerprint != c.fp}
	}
}

func (c *call) replay(ctx context.Context, rec *oncekeystore.Record) (any, error) {
	plain, err := oncekey.OpenResult(ctx, c.root.opts.ResultSealer, c.op.Tenant, c.key, rec.Result)
	if err != nil {
		// A sealed result without the sealer, a plain one with it, or one sealed for another record:
		// a configuration to fix or a row to look into, not an outcome to reconcile.
		c.logger(ctx).Error("oncekey: stored result does not open; nothing was replayed", "tool", c.tool, "key_prefix", keyPrefix(c.key), "error", err)
		c.outcome = oncekey.OutcomeFailed
		return nil, c.appError(fmt.Sprintf("oncekey: %s (key %s) was applied, but its stored result cannot be given: %v", c.tool, c.key, err),
			oncekey.ErrTypeConfig, true, nil, "stored result does not open", true)
	}
	ps, err := payloadsOf(plain)
	if err != nil {
		c.outcome = oncekey.OutcomeUnknown
		return nil, c.appError(fmt.Sprintf("oncekey: stored result of %s (key %s) does not decode: %v", c.tool, c.key, err),
			oncekey.ErrTypeIndeterminate, true, nil, "stored result unreadable", false)
	}
	if c.confirm {
		c.outcome = oncekey.OutcomeApplied
		m := c.meta(oncekey.OutcomeApplied, rec.EffectReference)
		m.reason = oncekey.ReasonConfirmed
		return anyPayloads(withOutcome(c.root.opts.DataConverter, ps, m)), nil
	}
	c.outcome = oncekey.OutcomeReplayed
	return anyPayloads(withOutcome(c.root.opts.DataConverter, ps, c.meta(oncekey.OutcomeReplayed, rec.EffectReference))), nil
}

// inFlight answers a call whose record another attempt holds (rec, pending): a retryable
// oncekey.InFlight error whose next-retry delay follows the tool's typical duration and the
// holder's lease.
func (c *call) inFlight(rec *oncekeystore.Record) error {
	c.outcome = oncekey.OutcomeInFlight
	var untilLease time.Duration
	if !rec.LeaseUntil.IsZero() {
		untilLease = time.Until(rec.LeaseUntil)
	}
	retry := pollAfter(c.policy, c.root.took.typical(c.tool), untilLease)
	e := &oncekey.InFlightError{OperationKey: c.key, Tool: c.tool, RetryAfter: retry}
	return newError(e.Error(), oncekey.ErrTypeInFlight, temporal.ApplicationErrorOptions{
		NextRetryDelay: retry,
		Category:       temporal.ApplicationErrorCategoryBenign,
	}, c.details("another attempt holds the claim", false))
}

// settleHandOff settles rec, which waits for the asynchronous completion h, from how that
// attempt ended in the workflow's history (activities.SettleHandOff, with the worker's client).
// It returns the record as it then stands, and open when the attempt may still be completed (or
// its ending could not be read: the record is then left as it is, and the call answered in
// flight).
func (c *call) settleHandOff(ctx context.Context, rec *oncekeystore.Record, h *failuredoc.HandOff) (_ *oncekeystore.Record, open bool) {
	settled, end, err := activities.SettleHandOff(ctx, c.root.opts.Store, c.root.opts.ResultSealer, activities.ActivityClient(ctx), rec, h)
	if err != nil {
		c.logger(ctx).Warn("oncekey: could not read how a handed-off activity ended; answering in flight",
			"tool", c.tool, "key_prefix", keyPrefix(c.key), "workflow_id", h.WorkflowID, "activity_id", h.ActivityID, "error", err)
		return rec, true
	}
	if end.Kind == activities.Waiting {
		return rec, true
	}
	c.logger(ctx).Info("oncekey: settled a handed-off operation from its asynchronous completion",
		"tool", c.tool, "key_prefix", keyPrefix(c.key), "status", settled.Status)
	return settled, false
}

// anyPayloads returns ps as an activity result: nil (no result) for a nil ps.
func anyPayloads(ps *commonpb.Payloads) any {
	if ps == nil {
		return nil
	}
	return ps
}

// replayFailure answers a repeat of a call whose record holds a definite failure, without running
// the body: a non-retryable oncekey.Failed, or oncekey.AsyncCompletion when the failure is a
// refused asynchronous completion (handOffRefused), as the first answer was.
func (c *call) replayFailure(rec *oncekeystore.Record) error {
	c.outcome = oncekey.OutcomeFailed
	msg := failureMessage(rec.Failure)
	typ := oncekey.ErrTypeFailed
	if d, _ := failuredoc.Decode(rec.Failure); failure.OfType(d.Type).Kind == failure.AsyncCompletion {
		typ = oncekey.ErrTypeAsyncCompletion // a refused hand-off is given again under the type it was refused with
	}
	return c.appError(fmt.Sprintf("oncekey: %s (key %s) failed before; replaying the remembered failure without running it: %s", c.tool, c.key, msg),
		typ, true, nil, "remembered failure", true)
}

func (c *call) unknownExisting(rec *oncekeystore.Record) error {
	c.outcome, c.handOver = oncekey.OutcomeUnknown, true
	cause := errors.New(failureMessage(rec.Failure))
	e := &oncekey.IndeterminateOutcomeError{Namespace: c.op.Namespace, Tenant: c.op.Tenant, OperationKey: c.key, Tool: c.tool,
		Schema: c.root.storeSchema(), Epoch: rec.Epoch, Cause: cause}
	return c.appError(e.Error(), oncekey.ErrTypeIndeterminate, true, nil, "the outcome of an earlier attempt is unknown", true)
}

func (c *call) expired(rec *oncekeystore.Record) error {
	c.outcome = oncekey.OutcomeExpired
	e := &oncekey.ExpiredOperationError{OperationKey: c.key, Tool: c.tool, ExpiredAt: rec.ExpiresAt}
	return c.appError(e.Error(), oncekey.ErrTypeExpired, true, nil, "expired", false)
}

// execute runs the body under an acquired claim at epoch and records its outcome.
func (c *call) execute(ctx context.Context, in *tinterceptor.ExecuteActivityInput, epoch int64) (_ any, err error) {
	bodyCtx, readEffectRef := oncekey.ContextWithEffectReference(oncekey.ContextWithOperationKey(ctx, c.key))
	bodyCtx, readHTTPProof := httpproof.With(bodyCtx)
	bodyCtx, cancelBody := context.WithCancelCause(bodyCtx)
	defer cancelBody(nil)
	var tx oncekeystore.StoreTx
	if c.policy.Effect == oncekey.Transactional {
		if tx, err = c.begin(ctx, epoch); err != nil {
			return nil, err
		}
		// Rolls back whatever did not commit; does nothing after Commit.
		defer func() { _ = tx.Rollback(ctx) }()
		bodyCtx = tx.Context(bodyCtx)
	}
	lease := c.renewInBackground(ctx, epoch, cancelBody)
	bodyCtx, endBody := c.span(bodyCtx, SpanBody)
	bodyStart := time.Now()
	result, panicked, bodyErr := c.body(bodyCtx, in)
	took := time.Since(bodyStart)
	if panicked != nil && bodyErr == nil {
		endBody(fmt.Errorf("the tool panicked: %v", panicked))
	} else {
		endBody(bodyErr)
	}
	c.effectRef = readEffectRef()
	c.httpProof = readHTTPProof()
	lost := lease.stop()
	_, endComplete := c.span(ctx, SpanComplete)
	defer func() { endComplete(err) }()

	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeWriteTimeout)
	defer cancel()
	effectful := c.policy.Effect == oncekey.Effectful

	if lost != nil {
		// Another epoch owns the record now (a takeover or a resolution): this attempt may write
		// nothing, and what it did is for the record's owner or reconciliation to settle.
		if effectful {
			return nil, c.indeterminate(lost, "claim lost while the body ran")
		}
		return nil, c.lostClaim(lost)
	}
	if tx != nil && (panicked != nil || bodyErr != nil) {
		// Rolled back now, so that a transaction the body ended itself is found before the
		// claim is given back.
		var misuse *oncekeystore.TxMisuseError
		if errors.As(tx.Rollback(wctx), &misuse) || errors.As(bodyErr, &misuse) {
			return nil, c.txMisused(wctx, epoch, misuse)
		}
	}
	if panicked != nil {
		perr := fmt.Errorf("%s panicked: %v", c.tool, panicked)
		if effectful {
			return nil, c.markUnknown(wctx, epoch, perr, "panic")
		}
		c.release(wctx, epoch)
		c.outcome = oncekey.OutcomeFailed
		return nil, perr
	}
	if bodyErr != nil {
		if errors.Is(bodyErr, activity.ErrResultPending) && c.policy.Effect != oncekey.Idempotent {
			if hs, ok := c.root.opts.Store.(oncekeystore.HandOffStore); ok && effectful && !c.standalone() && c.nexusKey == "" {
				return nil, c.handOff(wctx, hs, epoch)
			}
			return nil, c.handOffRefused(wctx, epoch)
		}
		return nil, c.bodyFailed(wctx, epoch, bodyErr)
	}
	// A panic from here on (a Verify hook, the result's encoder) comes after the body returned: for
	// an Effectful tool the effect may have landed, so it is an unknown outcome, not a failure; an
	// Idempotent tool gives the claim back and runs again.
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		c.logger(ctx).Error("oncekey: panic after the tool returned", "tool", c.tool, "key_prefix", keyPrefix(c.key), "stack", string(debug.Stack()))
		perr := fmt.Errorf("%s panicked after its body returned: %v", c.tool, p)
		if effectful {
			err = c.markUnknown(wctx, epoch, perr, "panic")
			return
		}
		err = c.unsettled(wctx, epoch, perr, "panic after the body returned")
	}()
	if c.policy.Verify != nil {
		if err := c.policy.Verify(ctx, c.op, result); err != nil {
			if effectful {
				return nil, c.markUnknown(wctx, epoch, err, "verify rejected the result")
			}
			return nil, c.unsettled(wctx, epoch, err, "verify rejected the result")
		}
	}
	ps, ok := result.(*commonpb.Payloads)
	if !ok && result != nil {
		var err error
		if ps, err = c.root.opts.DataConverter.ToPayloads(result); err != nil {
			err = fmt.Errorf("oncekey: encode result of %s: %w", c.tool, err)
			if effectful {
				return nil, c.markUnknown(wctx, epoch, err, "result does not encode")
			}
			return nil, c.unsettled(wctx, epoch, err, "result does not encode")
		}
	}
	var stored []byte
	if ps != nil {
		var err error
		if stored, err = (proto.MarshalOptions{Deterministic: true}).Marshal(ps); err != nil {
			if effectful {
				return nil, c.markUnknown(wctx, epoch, err, "result does not marshal")
			}
			return nil, c.unsettled(wctx, epoch, err, "result does not marshal")
		}
	}
	if stored, err = oncekey.SealResult(wctx, c.root.opts.ResultSealer, c.op.Tenant, c.key, stored); err != nil {
		if effectful {
			return nil, c.markUnknown(wctx, epoch, err, "result does not seal")
		}
		return nil, c.unsettled(wctx, epoch, err, "result does not seal")
	}
	if len(stored) > c.policy.MaxResultBytes {
		e := &oncekeystore.ResultTooLargeError{OperationKey: c.key, Tool: c.tool, Size: len(stored), Limit: c.policy.MaxResultBytes}
		if effectful {
			// The effect happened but its result cannot be stored: the record is unknown, and the
			// IndeterminateOutcome error makes the workflow side start its reconciliation at once,
			// so the record has an owner (a person resolves it applied with a result that fits,
			// or failed) instead of waiting for a repeat.
			return nil, c.markUnknown(wctx, epoch, e, "result too large")
		}
		c.release(wctx, epoch)
		c.outcome = oncekey.OutcomeFailed
		return nil, c.appError(e.Error(), oncekey.ErrTypeResultTooLarge, true, nil, "result too large", false)
	}
	complete := &oncekeystore.CompleteParams{
		Tenant: c.op.Tenant, OperationKey: c.key, Epoch: epoch, Status: oncekeystore.StatusApplied, Result: stored,
		EffectReference: c.effectRef,
	}
	if tx != nil {
		if err := c.commit(wctx, tx, complete); err != nil {
			return nil, err
		}
		c.outcome = oncekey.OutcomeApplied
		c.root.took.observe(c.tool, took)
		return anyPayloads(withOutcome(c.root.opts.DataConverter, ps, c.meta(oncekey.OutcomeApplied, c.effectRef))), nil
	}
	_, err = c.root.opts.Store.Complete(wctx, complete)
	if err != nil {
		if effectful {
			return nil, c.markUnknown(wctx, epoch, err, "the result could not be recorded")
		}
		if errors.Is(err, oncekeystore.ErrLostClaim) {
			// Fenced: another epoch owns the record. Nothing is ours to give back.
			return nil, c.lostClaim(err)
		}
		// Idempotent: give the claim back so the retry runs the body again at once. If the
		// Complete did land (only its answer was lost), the record is applied and the release
		// changes nothing; if the release cannot be written either, the record stays pending
		// until its lease ends and the next claim takes it over.
		c.release(wctx, epoch)
		c.outcome = oncekey.OutcomeFailed
		return nil, c.storeFailed("complete", err)
	}
	c.outcome = oncekey.OutcomeApplied
	c.root.took.observe(c.tool, took)
	return anyPayloads(withOutcome(c.root.opts.DataConverter, ps, c.meta(oncekey.OutcomeApplied, c.effectRef))), nil
}

// resultMeta is what the interceptor writes into the metadata of a claimed tool's result.
type resultMeta struct {
	outcome oncekey.Outcome
	// key, ref and reason: wire.MetadataOperationKey, MetadataEffectReference and
	// MetadataReason ("" leaves the last two out).
	key, ref, reason string
	// fingerprint and version: wire.MetadataFingerprint and MetadataVersion, the identity the
	// call was claimed with, for okworker.CheckIdentity ("" leaves them out).
	fingerprint, version string
	versioned            bool
}

// meta returns the result metadata of the call with outcome and effect reference ref.
func (c *call) meta(outcome oncekey.Outcome, ref string) resultMeta {
	return resultMeta{outcome: outcome, key: c.key, ref: ref, fingerprint: c.fp, version: c.version, versioned: true}
}

// withOutcome returns ps with m in the metadata of its first payload (a payload of nil when ps is
// empty), added inside any codec: the payload is decoded with dc, labelled and encoded again.
// It returns ps unchanged when it cannot.
func withOutcome(dc converter.DataConverter, ps *commonpb.Payloads, m resultMeta) *commonpb.Payloads {
	var first *commonpb.Payload
	if ps != nil && len(ps.Payloads) > 0 {
		first = ps.Payloads[0]
	} else {
		p, err := dc.ToPayload(nil)
		if err != nil {
			return ps
		}
		first = p
	}
	var raw converter.RawValue
	if err := dc.FromPayload(first, &raw); err != nil || raw.Payload() == nil {
		return ps
	}
	inner := proto.Clone(raw.Payload()).(*commonpb.Payload)
	if inner.Metadata == nil {
		inner.Metadata = map[string][]byte{}
	}
	inner.Metadata[wire.MetadataOutcome] = []byte(m.outcome)
	inner.Metadata[wire.MetadataOperationKey] = []byte(m.key)
	for name, v := range map[string]string{wire.MetadataEffectReference: m.ref, wire.MetadataReason: m.reason,
		wire.MetadataFingerprint: m.fingerprint} {
		if v != "" {
			inner.Metadata[name] = []byte(v)
		} else {
			delete(inner.Metadata, name)
		}
	}
	if m.versioned {
		inner.Metadata[wire.MetadataVersion] = []byte(m.version)
	} else {
		delete(inner.Metadata, wire.MetadataVersion)
	}
	outer, err := dc.ToPayload(converter.NewRawValue(inner))
	if err != nil {
		return ps
	}
	out := &commonpb.Payloads{Payloads: []*commonpb.Payload{outer}}
	if ps != nil && len(ps.Payloads) > 1 {
		out.Payloads = append(out.Payloads, ps.Payloads[1:]...)
	}
	return out
}

// body runs the next interceptor (eventually the tool) and recovers a panic.
func (c *call) body(ctx context.Context, in *tinterceptor.ExecuteActivityInput) (result, panicked any, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
			c.logger(ctx).Error("oncekey: tool panicked", "tool", c.tool, "key_prefix", keyPrefix(c.key), "stack", string(debug.Stack()))
		}
	}()
	result, err = c.invoke(ctx, in)
	return result, nil, err
}

// bodyFailed records a body's error according to the effect class and the error's kind.
func (c *call) bodyFailed(ctx context.Context, epoch int64, bodyErr error) error {
	var appErr *temporal.ApplicationError
	innerNonRetryable := errors.As(bodyErr, &appErr) && appErr.NonRetryable()
	switch {
	case oncekey.IsFailed(bodyErr):
		// The tool asserted the effect did not and will not land. With RememberFailures the
		// failure is stored and a repeat gets it again without running; otherwise the claim is
		// given back and a repeat runs the tool again. Either is safe: nothing landed.
		c.rememberFailure(ctx, epoch, c.policy.RememberFailures, bodyErr, appErr)
		c.outcome = oncekey.OutcomeFailed
		return c.appError(bodyErr.Error(), oncekey.ErrTypeFailed, true, bodyErr, "definite failure", false)
	case oncekey.IsNotApplied(bodyErr):
		c.rememberFailure(ctx, epoch, c.policy.RememberFailures && innerNonRetryable, bodyErr, appErr)
		c.outcome = oncekey.OutcomeFailed
		return c.appError(bodyErr.Error(), oncekey.ErrTypeNotApplied, innerNonRetryable, bodyErr, "not applied", false)
	case c.policy.Effect == oncekey.Effectful && !c.policy.DisableHTTPProof && !c.fallback && c.httpProof.NotApplied:
		return c.provenNotApplied(ctx, epoch, bodyErr)
	case c.policy.Effect == oncekey.Effectful:
		reason := "the tool returned an error"
		if ctx.Err() != nil || errors.Is(bodyErr, context.DeadlineExceeded) || errors.Is(bodyErr, context.Canceled) {
			reason = "the attempt timed out or was cancelled"
		}
		return c.markUnknown(ctx, epoch, bodyErr, reason)
	default:
		c.release(ctx, epoch)
		c.outcome = oncekey.OutcomeFailed
		return bodyErr
	}
}

// provenNotApplied ends an Effectful call whose body returned bodyErr after every request it
// sent through oncekey.IdempotencyKeyTransport was proven not applied (c.httpProof): never sent,
// or refused by a status that says nothing was done. It is bodyErr marked NotApplied, retryable
// as the last request says, with the server's Retry-After as the next retry's delay; with
// RememberFailures a non-retryable one is stored as the record's failure.
func (c *call) provenNotApplied(ctx context.Context, epoch int64, bodyErr error) error {
	p := c.httpProof
	c.logger(ctx).Info("oncekey: the tool's requests prove nothing was done; its claim is given back", "tool", c.tool,
		"key_prefix", keyPrefix(c.key), "reason", p.Reason(), "retryable", p.Retryable, "requests", p.Requests)
	var typed *temporal.ApplicationError
	_ = errors.As(temporal.NewNonRetryableApplicationError(bodyErr.Error(), oncekey.ErrTypeNotApplied, nil), &typed)
	c.rememberFailure(ctx, epoch, c.policy.RememberFailures && !p.Retryable, bodyErr, typed)
	c.outcome = oncekey.OutcomeFailed
	c.cause = bodyErr
	return newError(bodyErr.Error(), oncekey.ErrTypeNotApplied, temporal.ApplicationErrorOptions{
		NonRetryable:   !p.Retryable,
		NextRetryDelay: p.RetryAfter,
		Cause:          bodyErr,
	}, c.details(p.Reason(), false))
}

// handOffGrace is how long a hand-off's lease outlasts the attempt's deadline: by then Temporal
// has timed the attempt out, so its history tells how it ended.
const handOffGrace = time.Minute

// handOff ends an Effectful call whose body returned activity.ErrResultPending: the result is
// handed off to whoever completes the activity (client.CompleteActivity). The record stays
// pending at epoch, its lease running to the attempt's deadline and handOffGrace, with a
// failuredoc.HandOff naming the attempt, so that whatever reads it next settles it from the
// attempt's ending in the workflow's history (activities.SettleHandOff): the workflow side when
// the completion reaches it, a repeat's claim, or the reconciliation after a timeout. The SDK
// gets activity.ErrResultPending and waits for the completion. A hand-off the store cannot keep
// marks the record unknown: the completion still reaches the workflow, and a repeat is
// reconciled instead of run again.
func (c *call) handOff(ctx context.Context, hs oncekeystore.HandOffStore, epoch int64) error {
	now := time.Now()
	h := &failuredoc.HandOff{
		Epoch: epoch, Namespace: c.info.Namespace, WorkflowID: c.info.WorkflowExecution.ID, RunID: c.info.WorkflowExecution.RunID,
		ActivityID: c.info.ActivityID, Attempt: c.info.Attempt, Scheduled: c.info.ScheduledTime.UTC(), At: now.UTC(), Deadline: c.info.Deadline.UTC(),
	}
	lease := time.Until(c.info.Deadline) + handOffGrace
	if c.info.Deadline.IsZero() || lease < handOffGrace {
		lease = handOffGrace
	}
	doc := failuredoc.Doc{
		Message: fmt.Sprintf("the result was handed off to an asynchronous completion at %s; waiting for it until the activity's deadline, %s",
			h.At.Format(time.RFC3339), h.Deadline.Format(time.RFC3339)),
		Reason:          "handed off",
		EffectReference: c.effectRef,
		HandOff:         h,
	}
	if _, err := hs.HandOff(ctx, &oncekeystore.HandOffParams{Tenant: c.op.Tenant, OperationKey: c.key, Epoch: epoch, Lease: lease, HandOff: doc.Bytes()}); err != nil {
		c.logger(ctx).Error("oncekey: the hand-off to an asynchronous completion could not be recorded; the record is marked unknown",
			"tool", c.tool, "key_prefix", keyPrefix(c.key), "error", err)
		c.markUnknownOnly(ctx, epoch, "the result was handed off to an asynchronous completion, and the hand-off could not be recorded: "+err.Error())
	} else {
		c.logger(ctx).Info("oncekey: the result was handed off to an asynchronous completion; the record waits for it",
			"tool", c.tool, "key_prefix", keyPrefix(c.key), "deadline", h.Deadline)
	}
	c.outcome = oncekey.OutcomeInFlight
	return activity.ErrResultPending
}

// handOffRefused ends an Effectful or Transactional call whose body returned
// activity.ErrResultPending (see oncekey.AsyncCompletionError): an Effectful tool's record keeps
// the refusal as its definite failure, so a repeat gives it again without running the body; a
// Transactional tool's claim is given back (its transaction is rolled back). An Idempotent tool's
// ErrResultPending goes to bodyFailed, which gives the claim back and passes it on to the SDK.
func (c *call) handOffRefused(ctx context.Context, epoch int64) error {
	e := &oncekey.AsyncCompletionError{OperationKey: c.key, Tool: c.tool, Effect: c.policy.Effect}
	c.logger(ctx).Error("oncekey: an asynchronous completion was refused", "tool", c.tool, "key_prefix", keyPrefix(c.key), "error", e)
	var typed *temporal.ApplicationError
	_ = errors.As(temporal.NewNonRetryableApplicationError(e.Error(), oncekey.ErrTypeAsyncCompletion, nil), &typed)
	c.rememberFailure(ctx, epoch, c.policy.Effect == oncekey.Effectful, e, typed)
	c.outcome = oncekey.OutcomeFailed
	return c.appError(e.Error(), oncekey.ErrTypeAsyncCompletion, true, nil, "asynchronous completion refused", false)
}

// release gives the claim back, retrying briefly: a release that never lands leaves the record
// pending until its lease runs out.
// rememberFailure, when remember, stores bodyErr as the record's definite failure (a
// failuredoc.Doc, its type appErr's when appErr is not nil), so a repeat gets it again without
// running; otherwise, or when the store refuses the write, it gives the claim back.
func (c *call) rememberFailure(ctx context.Context, epoch int64, remember bool, bodyErr error, appErr *temporal.ApplicationError) {
	if remember {
		doc := failuredoc.Doc{Message: bodyErr.Error(), NonRetryable: true}
		if appErr != nil {
			doc.Type = appErr.Type()
		}
		if _, err := c.root.opts.Store.Complete(ctx, &oncekeystore.CompleteParams{
			Tenant: c.op.Tenant, OperationKey: c.key, Epoch: epoch, Status: oncekeystore.StatusFailed, Failure: doc.Bytes(),
			EffectReference: c.effectRef,
		}); err == nil {
			return
		}
	}
	c.release(ctx, epoch)
}

func (c *call) release(ctx context.Context, epoch int64) {
	var err error
	for i := range 3 {
		_, err = c.root.opts.Store.Release(ctx, &oncekeystore.ReleaseParams{Tenant: c.op.Tenant, OperationKey: c.key, Epoch: epoch})
		if err == nil || errors.Is(err, oncekeystore.ErrLostClaim) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(50<<i) * time.Millisecond)
	}
	if err != nil {
		c.logger(ctx).Warn("oncekey: release failed; the claim stays pending until its lease ends",
			"tool", c.tool, "key_prefix", keyPrefix(c.key), "error", err)
	}
}

// unsettled ends an Idempotent call whose body returned but whose outcome could not be settled
// (a Verify rejection, a panic after the body, a result that does not encode): it gives the
// claim back and returns a retryable oncekey.Unsettled error, so Temporal's retry runs the body
// again, which for an Idempotent tool lands the same state. Nothing is marked unknown. If the
// release cannot be written, the record stays pending until its lease ends and the next claim
// takes it over.
func (c *call) unsettled(ctx context.Context, epoch int64, cause error, reason string) error {
	c.release(ctx, epoch)
	c.outcome = oncekey.OutcomeFailed
	return c.appError(fmt.Sprintf("oncekey: %s (key %s) ran but its outcome was not settled (%s: %v); the claim was given back so that a retry runs it again",
		c.tool, c.key, reason, cause), oncekey.ErrTypeUnsettled, false, cause, reason, false)
}

// markUnknownOnly marks the record unknown; failures are logged (the record then stays pending
// and becomes unknown on the next claim after its lease ends).
func (c *call) markUnknownOnly(ctx context.Context, epoch int64, reason string) {
	_, err := c.root.opts.Store.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{
		Tenant: c.op.Tenant, OperationKey: c.key, Epoch: epoch,
		Failure: failuredoc.Doc{Message: reason, Reason: reason, EffectReference: c.effectRef}.Bytes(),
	})
	if err != nil {
		c.logger(ctx).Warn("oncekey: mark unknown failed; the record becomes unknown when its lease ends",
			"tool", c.tool, "key_prefix", keyPrefix(c.key), "error", err)
	}
}

// markUnknown marks the record unknown and returns the IndeterminateOutcome error.
func (c *call) markUnknown(ctx context.Context, epoch int64, cause error, reason string) error {
	c.markUnknownOnly(ctx, epoch, reason+": "+cause.Error())
	c.epoch = epoch
	return c.indeterminate(cause, reason)
}

func (c *call) indeterminate(cause error, reason string) error {
	c.outcome, c.handOver = oncekey.OutcomeUnknown, true
	e := &oncekey.IndeterminateOutcomeError{Namespace: c.op.Namespace, Tenant: c.op.Tenant, OperationKey: c.key, Tool: c.tool,
		Schema: c.root.storeSchema(), Epoch: c.epoch, Cause: cause}
	return c.appError(e.Error(), oncekey.ErrTypeIndeterminate, true, cause, reason, false)
}

// storeFailed turns a store error met during op into the call's error. A store set up wrong
// (errors.Is oncekeystore.ErrStoreConfig: a table missing or not at the expected migration, a
// *oncekeystore.StoreSchemaError; a pooler refusing the pool's settings) is a configuration
// mistake that no retry can fix: the call fails non-retryably with ErrTypeConfig and the
// store's error as the cause (so errors.As finds it on the worker, and its message, which
// says what to do, reaches the workflow). Any other error is the store unavailable.
func (c *call) storeFailed(op string, err error) error {
	if !errors.Is(err, oncekeystore.ErrStoreConfig) {
		return c.storeUnavailable(op, err)
	}
	var schema error = err
	if se := (*oncekeystore.StoreSchemaError)(nil); errors.As(err, &se) {
		schema = se
	}
	c.outcome = oncekey.OutcomeFailed
	msg := fmt.Sprintf("oncekey: %s (key %s) did not run", c.tool, c.key)
	if op == "complete" {
		msg = fmt.Sprintf("oncekey: %s (key %s) ran, but its result could not be recorded", c.tool, c.key)
	}
	return c.appError(msg, oncekey.ErrTypeConfig, true, schema, "store not set up", false)
}

func (c *call) storeUnavailable(op string, err error) error {
	if c.outcome == "" {
		c.outcome = oncekey.OutcomeFailed
	}
	e := &oncekeystore.StoreUnavailableError{Op: op, Err: err}
	return c.appError(e.Error(), oncekey.ErrTypeStoreUnavailable, false, nil, "store unavailable", false)
}

// lostClaim ends an Idempotent attempt whose claim another epoch took while it ran: a
// retryable ErrTypeLostClaim error (the store answered; nothing was written by this attempt).
func (c *call) lostClaim(err error) error {
	c.outcome = oncekey.OutcomeFailed
	return c.appError(fmt.Sprintf("oncekey: %s (key %s) lost its claim while running (another attempt owns the operation now): %v", c.tool, c.key, err),
		oncekey.ErrTypeLostClaim, false, err, "claim lost", false)
}

func (c *call) configError(err error) error {
	c.outcome = oncekey.OutcomeRejected
	return c.appError(fmt.Sprintf("oncekey: %s: %v", c.tool, err), oncekey.ErrTypeConfig, true, nil, "configuration", false)
}

func (c *call) details(reason string, replay bool) oncekey.Details {
	return oncekey.Details{Tenant: c.op.Tenant, OperationKey: c.key, Tool: c.tool, Outcome: c.outcome, EffectReference: c.effectRef,
		Replay: replay, Reason: reason, Fingerprint: c.fp, Version: c.version}
}

func (c *call) appError(msg, typ string, nonRetryable bool, cause error, reason string, replay bool) error {
	c.cause = cause
	return detailedError(msg, typ, nonRetryable, cause, c.details(reason, replay))
}

// detailedError is the call's application error of type typ with details d (newError: msg, the
// operator's account, goes into d.Message), in the benign category when typ is an expected
// refusal.
func detailedError(msg, typ string, nonRetryable bool, cause error, d oncekey.Details) error {
	opts := temporal.ApplicationErrorOptions{NonRetryable: nonRetryable, Cause: cause}
	if expectedRefusal(typ) {
		opts.Category = temporal.ApplicationErrorCategoryBenign
	}
	return newError(msg, typ, opts, d)
}

// expectedRefusal reports whether an error of type typ is an answer the protocol gives in normal
// operation (a conflict, a refusal, a request for approval, an operation past retention), not a fault: such errors carry
// temporal.ApplicationErrorCategoryBenign, so the SDK logs them at Debug rather than as an
// "Activity error." at Error and counts no failure, and the one line oncekey logs (report) says
// what happened; `oncekey show` holds the explanation.
func expectedRefusal(typ string) bool { return failure.OfType(typ).Refusal }

// report emits the metrics, the log line and the OnEvent event for the call.
func (c *call) report(ctx context.Context, err error) {
	if c.outcome == "" {
		c.outcome = oncekey.OutcomeFailed
		if err == nil {
			c.outcome = oncekey.OutcomeApplied
		}
	}
	mh := metrics.Tagged(c.metricsHandler(ctx), c.tool, c.op.Tenant, c.root.opts.MetricsTenantTag)
	mh.WithTags(map[string]string{metrics.TagOutcome: string(c.outcome)}).Counter(MetricCalls).Inc(1)
	if c.claimLatency > 0 {
		mh.Timer(MetricClaimLatency).Record(c.claimLatency)
	}
	kv := []any{"tool", c.tool, "key_prefix", keyPrefix(c.key), "tenant", c.op.Tenant, "outcome", string(c.outcome)}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		kv = append(kv, "error_type", appErr.Type())
	}
	if d, ok := oncekey.ErrorDetails(err); ok && d.Message != "" {
		// The error's message is the text for a model; the operator's account is here.
		kv = append(kv, "detail", d.Message)
	}
	logger := c.logger(ctx)
	if c.outcome == oncekey.OutcomeConflict {
		// Expected, but usually a caller's mistake (a field the key misses, a field to Exclude):
		// worth a look, one line; `oncekey show` explains the record.
		logger.Warn("oncekey: tool call", kv...)
	} else {
		logger.Info("oncekey: tool call", kv...)
	}
	if f := c.root.opts.OnEvent; f != nil {
		f(Event{
			Tool: c.tool, KeyPrefix: keyPrefix(c.key), Tenant: c.op.Tenant, Effect: c.policy.Effect,
			Outcome: c.outcome, Duration: time.Since(c.start), ClaimLatency: c.claimLatency, Err: c.eventErr(err),
		})
	}
}

// eventErr is Event.Err for the call's error err: err, through which errors.As also reaches the
// cause its message leaves out (newError), when there is one.
func (c *call) eventErr(err error) error {
	if err == nil || c.cause == nil {
		return err
	}
	return &causedError{err: err, cause: c.cause}
}

// leaseRenewer renews a claim's lease every Lease/3 while the body runs, until the attempt's
// context is done; beside it, heartbeatForBody heartbeats for the body (see heartbeats).
type leaseRenewer struct {
	done chan struct{}
	// endHeartbeats cancels the context of oncekey's heartbeats for the body (nil: none run).
	endHeartbeats context.CancelFunc
	wg            sync.WaitGroup
	mu            sync.Mutex
	lost          error
}

func (l *leaseRenewer) stop() error {
	close(l.done)
	if l.endHeartbeats != nil {
		l.endHeartbeats()
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

func (c *call) renewInBackground(ctx context.Context, epoch int64, cancelBody context.CancelCauseFunc) *leaseRenewer {
	l := &leaseRenewer{done: make(chan struct{})}
	every := c.policy.Lease / 3
	if !c.root.opts.DisableBodyHeartbeat && c.hb != nil {
		var hctx context.Context
		hctx, l.endHeartbeats = context.WithCancel(ctx)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			c.heartbeatForBody(hctx, l.done)
		}()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		lastOK := time.Now()
		for {
			select {
			case <-l.done:
				return
			case <-ctx.Done():
				// The attempt is over (deadline or cancellation): nobody waits for this body any
				// more. Let the lease run out so that reconciliation can act, rather than keep a body
				// that ignores its context alive as a live claim forever.
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), every)
			_, err := c.root.opts.Store.Renew(rctx, &oncekeystore.RenewParams{Tenant: c.op.Tenant, OperationKey: c.key, Epoch: epoch, Lease: c.policy.Lease})
			cancel()
			switch {
			case err == nil:
				lastOK = time.Now()
				continue
			case errors.Is(err, oncekeystore.ErrLostClaim):
			case time.Since(lastOK) < c.policy.Lease:
				c.logger(ctx).Warn("oncekey: lease renewal failed; retrying", "tool", c.tool, "key_prefix", keyPrefix(c.key), "error", err)
				continue
			default:
				err = fmt.Errorf("lease not renewed for %s: %w", c.policy.Lease, err)
			}
			l.mu.Lock()
			l.lost = err
			l.mu.Unlock()
			cancelBody(fmt.Errorf("oncekey: %s lost its claim: %w", c.tool, err))
			return
		}
	}()
	return l
}

// failureMessage is the message of a stored failure (failuredoc.Text), or "no reason recorded".
func failureMessage(b []byte) string {
	if len(b) == 0 {
		return "no reason recorded"
	}
	return failuredoc.Text(b)
}
