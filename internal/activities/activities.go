package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/failure"
	"github.com/oncekey/oncekey/internal/failuredoc"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// Registered names of the activities. Every name starts with "oncekey." so it cannot collide
// with a tool.
const (
	InspectName             = "oncekey.Inspect"
	MarkUnknownName         = "oncekey.MarkUnknown"
	LookupReceiptName       = "oncekey.LookupReceipt"
	RecordResolutionName    = "oncekey.RecordResolution"
	AwaitReconciliationName = "oncekey.AwaitReconciliation"
)

// ErrTypeInvalid is the application error type of a request these activities refuse for good
// (a malformed resolution, a record in a status that cannot be resolved). Non-retryable.
const ErrTypeInvalid = failure.TypeInvalid

// Activities are oncekey's own activities. Build them with New and register them with Register.
type Activities struct {
	store    oncekeystore.Store
	registry *oncekey.Registry
	dc       converter.DataConverter
	sealer   oncekey.ResultSealer
	secret   []byte
	trust    *decisionsig.TrustList
}

// Options configure the activities beyond their store (NewWithOptions). Fields are alphabetical;
// zero values mean the defaults.
type Options struct {
	// DataConverter encodes results given by people or receipt lookups; it must be the data
	// converter the workers use. Defaults to converter.GetDefaultDataConverter().
	DataConverter converter.DataConverter
	// FingerprintSecret keys the fingerprints of edited arguments (okworker.Options.
	// FingerprintSecret; the same on every worker). Defaults to none.
	FingerprintSecret []byte
	// Registry supplies the tools' Reconcile hooks and result types. Defaults to none: no hooks,
	// no result type checks.
	Registry *oncekey.Registry
	// ResultSealer seals the results the activities store and opens the ones they read
	// (okworker.Options.ResultSealer; the same on every worker). Defaults to none.
	ResultSealer oncekey.ResultSealer
	// TrustList verifies the signatures of decisions and resolutions before they are recorded
	// (okworker.Options.TrustList). Defaults to none: nothing is verified.
	TrustList *decisionsig.TrustList
}

// New returns the activities over store. registry supplies the tools' Reconcile hooks (nil: no
// hooks); dc encodes results given by people or receipt lookups and must be the data converter
// the workers use (nil means converter.GetDefaultDataConverter()). It returns an error when store
// is nil.
func New(store oncekeystore.Store, registry *oncekey.Registry, dc converter.DataConverter) (*Activities, error) {
	return NewWithOptions(store, Options{DataConverter: dc, Registry: registry})
}

// NewWithOptions returns the activities over store configured by o. It returns an error when
// store is nil.
func NewWithOptions(store oncekeystore.Store, o Options) (*Activities, error) {
	if store == nil {
		return nil, errors.New("activities: Store is required")
	}
	if o.DataConverter == nil {
		o.DataConverter = converter.GetDefaultDataConverter()
	}
	return &Activities{store: store, registry: o.Registry, dc: o.DataConverter, sealer: o.ResultSealer, secret: o.FingerprintSecret, trust: o.TrustList}, nil
}

// open returns rec with its result opened by the activities' sealer (oncekey.OpenResult), or a
// non-retryable error of type oncekey.ErrTypeConfig whose cause is the *oncekey.ResultSealError
// (sealed and no ResultSealer configured, plain and one configured, or sealed for another
// record); its message says which, and what to do.
func (a *Activities) open(ctx context.Context, rec *oncekeystore.Record) (*oncekeystore.Record, error) {
	if len(rec.Result) == 0 {
		return rec, nil
	}
	plain, err := oncekey.OpenResult(ctx, a.sealer, rec.Tenant, rec.OperationKey, rec.Result)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("activities: "+err.Error(), oncekey.ErrTypeConfig, err)
	}
	out := *rec
	out.Result = plain
	return &out, nil
}

// Registry is the part of a worker (or a plugin's registry) Register needs; worker.Worker has it.
type Registry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers the activities on r under their "oncekey." names. Registering them twice
// on one worker is harmless.
func (a *Activities) Register(r Registry) {
	r.RegisterActivityWithOptions(a.Inspect, activity.RegisterOptions{DisableAlreadyRegisteredCheck: true, Name: InspectName})
	r.RegisterActivityWithOptions(a.MarkUnknown, activity.RegisterOptions{DisableAlreadyRegisteredCheck: true, Name: MarkUnknownName})
	r.RegisterActivityWithOptions(a.LookupReceipt, activity.RegisterOptions{DisableAlreadyRegisteredCheck: true, Name: LookupReceiptName})
	r.RegisterActivityWithOptions(a.RecordResolution, activity.RegisterOptions{DisableAlreadyRegisteredCheck: true, Name: RecordResolutionName})
	r.RegisterActivityWithOptions(a.AwaitReconciliation, activity.RegisterOptions{DisableAlreadyRegisteredCheck: true, Name: AwaitReconciliationName})
	r.RegisterActivityWithOptions(a.SettleHandOff, activity.RegisterOptions{DisableAlreadyRegisteredCheck: true, Name: SettleHandOffName})
	r.RegisterActivityWithOptions(a.RequestApproval, activity.RegisterOptions{DisableAlreadyRegisteredCheck: true, Name: RequestApprovalName})
	r.RegisterActivityWithOptions(a.DecideApproval, activity.RegisterOptions{DisableAlreadyRegisteredCheck: true, Name: DecideApprovalName})
}

// RecordRef names one record.
type RecordRef struct {
	Tenant       string `json:"tenant"`
	OperationKey string `json:"operation_key"`
	// Tool, if set, is the tool the caller believes the record is of; the activities refuse a
	// record of another tool.
	Tool string `json:"tool,omitempty"`
}

// ErrTypeForeignRecord is the application error type (non-retryable) of a request for a record
// the calling workflow may not act on: the record was claimed by a workflow of another Temporal
// namespace, or is of another tool than the request names. Nothing was read out or written.
const ErrTypeForeignRecord = failure.TypeForeignRecord

// bound refuses rec to a caller that may not act on it: an activity of a workflow in another
// namespace than the one whose claim created rec (records written before the namespace was
// stored, Namespace "", are not checked), or a request naming another tool. Outside an activity
// (a direct call in a test or tool) only the tool is checked.
func bound(ctx context.Context, rec *oncekeystore.Record, tool string) error {
	return boundTo(ctx, "record", rec.OperationKey, rec.Namespace, rec.Tool, tool)
}

// boundTo is bound for what ("record", "approval") of key, made by a workflow of namespace ns
// for tool has.
func boundTo(ctx context.Context, what, key, ns, has, tool string) error {
	if activity.IsActivity(ctx) && ns != "" {
		if own := activity.GetInfo(ctx).Namespace; own != ns {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"activities: the %s of key %s belongs to a workflow of namespace %q, and this workflow runs in namespace %q: "+
					"oncekey acts on a %s only for workflows of its own namespace; nothing was read or written", what, key, ns, own, what),
				ErrTypeForeignRecord, nil)
		}
	}
	if tool != "" && tool != has {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"activities: the %s of key %s is of tool %q, not %q as the request says; nothing was read or written", what, key, has, tool),
			ErrTypeForeignRecord, nil)
	}
	return nil
}

// reconciler refuses a call of one of the reconciliation workflow's activities (Inspect,
// MarkUnknown, LookupReceipt, RecordResolution) that does not come from the reconciliation
// workflow of key: a workflow of type reconcile.WorkflowName whose ID is reconcile.WorkflowID(key),
// the one workflow the interceptor starts for that record. An activity started by another
// workflow, or by a client with no workflow at all, gets a non-retryable ErrTypeForeignRecord
// error before anything is read. Outside an activity (a direct call in a test or a tool) nothing
// is checked. Permission to start a workflow of that ID and type in the namespace remains the
// authority to act on the namespace's records (docs: Who can decide).
func reconciler(ctx context.Context, activityName, key string) error {
	return calledBy(ctx, activityName, "record", key, "reconciliation", reconcile.WorkflowID(key), reconcile.WorkflowName)
}

// approvalWorkflow is reconciler for the approval workflow's activities (RequestApproval,
// DecideApproval): they act only for the approval workflow of key (type
// reconcile.ApprovalWorkflowName, ID reconcile.ApprovalWorkflowID(key)), so that no other
// workflow of the namespace can decide an approval by calling them.
func approvalWorkflow(ctx context.Context, activityName, key string) error {
	return calledBy(ctx, activityName, "approval", key, "approval", reconcile.ApprovalWorkflowID(key), reconcile.ApprovalWorkflowName)
}

// calledBy refuses an activity of oncekey's that acts on what ("record", "approval") of key for
// one workflow only, the role workflow of ID wantID and type wantType, when another calls it (see
// reconciler).
func calledBy(ctx context.Context, activityName, what, key, role, wantID, wantType string) error {
	if !activity.IsActivity(ctx) {
		return nil
	}
	info := activity.GetInfo(ctx)
	id, typ := info.WorkflowExecution.ID, ""
	if info.WorkflowType != nil {
		typ = info.WorkflowType.Name
	}
	if id == wantID && typ == wantType {
		return nil
	}
	by := fmt.Sprintf("workflow %q of type %q", id, typ)
	if id == "" {
		by = "an activity started without a workflow"
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"activities: %s acts on the %s of key %s only for its %s workflow (%s, type %s), and was called by %s; nothing was read or written",
		activityName, what, key, role, wantID, wantType, by), ErrTypeForeignRecord, nil)
}

// get reads the record for ref, refused (see bound) when the caller may not act on it, with its
// result opened (see open).
func (a *Activities) get(ctx context.Context, ref RecordRef) (*oncekeystore.Record, error) {
	rec, err := a.store.Get(ctx, &oncekeystore.GetParams{Tenant: ref.Tenant, OperationKey: ref.OperationKey})
	if err != nil {
		return nil, err
	}
	if err := bound(ctx, rec, ref.Tool); err != nil {
		return nil, err
	}
	return a.open(ctx, rec)
}

// output is OutputOf(rec) with rec's result opened (see open).
func (a *Activities) output(ctx context.Context, rec *oncekeystore.Record) (reconcile.Output, error) {
	rec, err := a.open(ctx, rec)
	if err != nil {
		return reconcile.Output{}, err
	}
	return OutputOf(rec), nil
}

// Inspection is what Inspect found.
type Inspection struct {
	// Found is false when no record exists: no claim was ever made for the key.
	Found        bool                `json:"found"`
	Status       oncekeystore.Status `json:"status,omitempty"`
	Epoch        int64               `json:"epoch,omitempty"`
	LeaseExpired bool                `json:"lease_expired,omitempty"`
	// LeaseRemaining estimates how long a live lease still runs (store clock, measured on the
	// worker against the record's update time). Zero when not pending or expired.
	LeaseRemaining  time.Duration `json:"lease_remaining,omitempty"`
	Result          []byte        `json:"result,omitempty"`
	Failure         string        `json:"failure,omitempty"`
	EffectReference string        `json:"effect_reference,omitempty"`
	ResolvedBy      string        `json:"resolved_by,omitempty"`
	Note            string        `json:"note,omitempty"`
}

func inspection(rec *oncekeystore.Record) Inspection {
	in := Inspection{
		Found:           true,
		Status:          rec.Status,
		Epoch:           rec.Epoch,
		LeaseExpired:    rec.LeaseExpired,
		Result:          rec.Result,
		Failure:         string(rec.Failure),
		EffectReference: rec.EffectReference,
		ResolvedBy:      rec.ResolvedBy,
		Note:            rec.Note,
	}
	if rec.Status == oncekeystore.StatusPending && !rec.LeaseExpired && !rec.LeaseUntil.IsZero() && !rec.UpdatedAt.IsZero() {
		// Both times are on the store's clock; their difference is the lease granted at the last
		// write. It over-estimates what remains, which only makes the caller wait longer.
		in.LeaseRemaining = rec.LeaseUntil.Sub(rec.UpdatedAt)
	}
	return in
}

// Inspect reads the record for ref. A missing record is Found=false, not an error; store errors
// are returned (retryable). A record the calling workflow may not act on (another namespace's,
// another tool's) is a non-retryable error of type ErrTypeForeignRecord.
func (a *Activities) Inspect(ctx context.Context, ref RecordRef) (Inspection, error) {
	if err := reconciler(ctx, InspectName, ref.OperationKey); err != nil {
		return Inspection{}, err
	}
	return a.inspect(ctx, ref)
}

func (a *Activities) inspect(ctx context.Context, ref RecordRef) (Inspection, error) {
	rec, err := a.get(ctx, ref)
	if errors.Is(err, oncekeystore.ErrNotFound) {
		return Inspection{}, nil
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return Inspection{}, err
	}
	if err != nil {
		return Inspection{}, fmt.Errorf("activities: inspect %s: %w", ref.OperationKey, err)
	}
	if h, ok := HandOffOf(rec); ok {
		// The record waits for an asynchronous completion: its ending in the history settles it
		// (or makes it unknown) before anyone is asked.
		settled, _, err := SettleHandOff(ctx, a.store, a.sealer, ActivityClient(ctx), rec, h)
		if err != nil {
			activity.GetLogger(ctx).Warn("oncekey: could not read how the handed-off activity ended; inspecting the record as it stands",
				"operation_key", ref.OperationKey, "workflow_id", h.WorkflowID, "activity_id", h.ActivityID, "error", err)
		} else if rec, err = a.open(ctx, settled); err != nil {
			return Inspection{}, err
		}
	}
	return inspection(rec), nil
}

// ActivityClient is the worker's Temporal client in an activity's ctx; nil outside an activity
// and where the activity has none: a nil one, or the SDK's test environment's, whose service is
// a gomock mock that fails the test on any call it was not told to expect.
func ActivityClient(ctx context.Context) client.Client {
	if !activity.IsActivity(ctx) {
		return nil
	}
	c := activity.GetClient(ctx)
	if c == nil {
		return nil
	}
	if v := reflect.ValueOf(c); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	if strings.Contains(fmt.Sprintf("%T", c.WorkflowService()), "workflowservicemock") {
		return nil
	}
	return c
}

// MarkUnknownInput names a pending record whose lease has run out, at the epoch it was seen.
type MarkUnknownInput struct {
	RecordRef
	Epoch  int64  `json:"epoch"`
	Reason string `json:"reason,omitempty"`
}

// MarkUnknown marks a pending record whose owner is gone unknown, fenced by in.Epoch, and returns
// the record as it then stands (if another write won, the record as that write left it).
func (a *Activities) MarkUnknown(ctx context.Context, in MarkUnknownInput) (Inspection, error) {
	if err := reconciler(ctx, MarkUnknownName, in.OperationKey); err != nil {
		return Inspection{}, err
	}
	if _, err := a.get(ctx, in.RecordRef); err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			return Inspection{}, err
		}
		if !errors.Is(err, oncekeystore.ErrNotFound) {
			return Inspection{}, fmt.Errorf("activities: mark unknown %s: %w", in.OperationKey, err)
		}
	}
	failure, _ := json.Marshal(map[string]string{"reason": in.Reason})
	rec, err := a.store.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{
		Tenant: in.Tenant, OperationKey: in.OperationKey, Epoch: in.Epoch, Failure: failure,
	})
	if err == nil {
		if rec, err = a.open(ctx, rec); err != nil {
			return Inspection{}, err
		}
		return inspection(rec), nil
	}
	if !errors.Is(err, oncekeystore.ErrLostClaim) {
		var conflict *oncekeystore.StatusConflictError
		if !errors.As(err, &conflict) {
			return Inspection{}, fmt.Errorf("activities: mark unknown %s: %w", in.OperationKey, err)
		}
	}
	return a.inspect(ctx, in.RecordRef)
}

// ReceiptInput asks for the tool's automatic receipt lookup.
type ReceiptInput struct {
	Request oncekey.ReconcileRequest `json:"request"`
	// Epoch is the record's epoch the lookup is for (the unknown episode); a decisive receipt is
	// recorded at it only.
	Epoch int64 `json:"epoch"`
}

// ReceiptOutput is the receipt lookup's decision. Decided is false when the tool has no
// Reconcile hook or the hook could not tell (ReceiptNotFound); a person decides then.
type ReceiptOutput struct {
	Decided bool             `json:"decided"`
	Output  reconcile.Output `json:"output"`
}

// LookupReceipt runs the tool's Policy.Reconcile hook. A decisive receipt (applied, not applied,
// failed) is recorded with Store.Resolve (resolved by "receipt:<tool>") and returned. A hook
// error is returned retryable.
func (a *Activities) LookupReceipt(ctx context.Context, in ReceiptInput) (ReceiptOutput, error) {
	req := in.Request
	if err := reconciler(ctx, LookupReceiptName, req.OperationKey); err != nil {
		return ReceiptOutput{}, err
	}
	if _, err := a.get(ctx, RecordRef{Tenant: req.Tenant, OperationKey: req.OperationKey, Tool: req.Tool}); err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			return ReceiptOutput{}, err
		}
		if !errors.Is(err, oncekeystore.ErrNotFound) {
			return ReceiptOutput{}, fmt.Errorf("activities: receipt lookup for %s (key %s): %w", req.Tool, req.OperationKey, err)
		}
	}
	p, ok := a.registry.Policy(req.Tool)
	if !ok || p.Reconcile == nil {
		return ReceiptOutput{}, nil
	}
	rc, err := p.Reconcile(ctx, req)
	if err != nil {
		return ReceiptOutput{}, fmt.Errorf("activities: receipt lookup for %s (key %s): %w", req.Tool, req.OperationKey, err)
	}
	params := &oncekeystore.ResolveParams{
		Tenant:          req.Tenant,
		OperationKey:    req.OperationKey,
		Epoch:           in.Epoch,
		EffectReference: rc.EffectReference,
		ResolvedBy:      "receipt:" + req.Tool,
		Note:            rc.Note,
	}
	switch rc.Outcome {
	case oncekey.ReceiptNotFound:
		return ReceiptOutput{}, nil
	case oncekey.ReceiptApplied:
		params.Status = oncekeystore.StatusApplied
		if rc.Result != nil {
			ps, err := a.dc.ToPayloads(rc.Result)
			if err != nil {
				return ReceiptOutput{}, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("activities: receipt result of %s does not encode: %v", req.Tool, err), ErrTypeInvalid, err)
			}
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ps)
			if err != nil {
				return ReceiptOutput{}, err
			}
			if b, err = oncekey.SealResult(ctx, a.sealer, req.Tenant, req.OperationKey, b); err != nil {
				return ReceiptOutput{}, err
			}
			params.Result = b
		}
	case oncekey.ReceiptNotApplied:
		params.Status = oncekeystore.StatusReleased
	case oncekey.ReceiptFailed:
		params.Status = oncekeystore.StatusFailed
		params.Failure = failuredoc.Doc{Message: rc.Note, ResolvedBy: params.ResolvedBy}.Bytes()
	default:
		return ReceiptOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("activities: receipt lookup for %s returned unknown outcome %d", req.Tool, rc.Outcome), ErrTypeInvalid, nil)
	}
	rec, err := a.store.Resolve(ctx, params)
	if err != nil {
		out, ok, gerr := a.settled(ctx, RecordRef{Tenant: req.Tenant, OperationKey: req.OperationKey}, err)
		if gerr != nil {
			return ReceiptOutput{}, gerr
		}
		return ReceiptOutput{Decided: ok, Output: out}, nil
	}
	out, err := a.output(ctx, rec)
	if err != nil {
		return ReceiptOutput{}, err
	}
	return ReceiptOutput{Decided: true, Output: out}, nil
}

// RecordInput carries a Resolution to record.
type RecordInput struct {
	RecordRef
	// Tool is the operation's registered activity name, for checking an Applied result against
	// its declared result type. Empty: it is read from the record.
	Tool string `json:"tool,omitempty"`
	// ActivityType is the activity type a Route named Tool from (decision.Input.ActivityType),
	// whose result type then applies. Empty: the tool's own.
	ActivityType string               `json:"activity_type,omitempty"`
	Resolution   reconcile.Resolution `json:"resolution"`
	// SignatureRefusedType is DecideApprovalInput's: the reconciliation workflow takes a refusal
	// of type oncekey.ErrTypeSignatureRefused; without it a signature is refused as
	// ErrTypeInvalid.
	SignatureRefusedType bool `json:"signature_refused_type,omitempty"`
}

// RecordResolution writes a Resolution to the store (reconcile.Record) and returns the decision
// as the reconciliation workflow's output. When the record was meanwhile settled another way
// (applied, released or failed), that settlement is returned instead. A malformed resolution, one
// the store refuses (*oncekeystore.InvalidParamsError, *oncekeystore.ResultTooLargeError) or a record that
// cannot be resolved is a non-retryable error of type ErrTypeInvalid; a record past
// its retention (a tombstone) is a non-retryable error of type oncekey.ErrTypeExpired.
//
// An Applied result must decode (encoding/json) into the tool's result type when the registry
// knows it (oncekey.Registry.CheckResult: the routed activity's, or the tool's own function
// value's); otherwise the resolution is refused with ErrTypeInvalid and the record is left as it
// was, since a stored result the blocked workflow cannot decode would fail it for good. A tool
// whose result type is unknown (registered by name) is not checked.
func (a *Activities) RecordResolution(ctx context.Context, in RecordInput) (reconcile.Output, error) {
	if err := reconciler(ctx, RecordResolutionName, in.OperationKey); err != nil {
		return reconcile.Output{}, err
	}
	ref := in.RecordRef
	if ref.Tool == "" {
		ref.Tool = in.Tool
	}
	if _, err := a.get(ctx, ref); err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			return reconcile.Output{}, err
		}
		if !errors.Is(err, oncekeystore.ErrNotFound) {
			return reconcile.Output{}, fmt.Errorf("activities: record resolution %s: %w", in.OperationKey, err)
		}
	}
	if err := a.checkResult(ctx, in); err != nil {
		return reconcile.Output{}, err
	}
	if err := a.verifyResolution(ctx, in); err != nil {
		return reconcile.Output{}, err
	}
	rec, err := reconcile.RecordWithOptions(ctx, a.store, in.Tenant, in.OperationKey, in.Resolution,
		reconcile.RecordOptions{DataConverter: a.dc, ResultSealer: a.sealer})
	if err == nil {
		out, err := a.output(ctx, rec)
		if err != nil {
			return reconcile.Output{}, err
		}
		out.RequestID = in.Resolution.RequestID
		return out, nil
	}
	var stale *oncekeystore.StaleDecisionError
	if errors.As(err, &stale) {
		// The decision is about an earlier (or later) episode of the operation than the record's:
		// it must not settle this one.
		return reconcile.Output{}, temporal.NewNonRetryableApplicationError(stale.Error(), ErrTypeInvalid, nil)
	}
	// A malformed resolution, or one the store refuses as given (a field it cannot hold, a result
	// over its size limit), is refused for good: retrying cannot change the answer, and a retried
	// activity would keep the reconciliation workflow from reading a corrected signal.
	var inv *reconcile.InvalidResolutionError
	if errors.As(err, &inv) {
		return reconcile.Output{}, temporal.NewNonRetryableApplicationError(err.Error()+"; nothing was recorded", ErrTypeInvalid, nil)
	}
	var conflict *oncekeystore.StatusConflictError
	if errors.As(err, &conflict) && conflict.Status == oncekeystore.StatusExpired {
		// Past retention: no resolution can be recorded any more, and what happened stays unknown.
		return reconcile.Output{}, temporal.NewNonRetryableApplicationError(err.Error(), oncekey.ErrTypeExpired, nil)
	}
	out, ok, gerr := a.settled(ctx, in.RecordRef, err)
	if gerr != nil {
		return reconcile.Output{}, gerr
	}
	if !ok {
		return reconcile.Output{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalid, nil)
	}
	return out, nil
}

// checkResult refuses an Applied result that does not decode into the tool's declared result
// type (a non-retryable error of type ErrTypeInvalid). It passes when there is no result or the
// type is unknown; a store error reading the tool's name is returned retryable.
func (a *Activities) checkResult(ctx context.Context, in RecordInput) error {
	r := in.Resolution
	if r.Outcome != reconcile.Applied || len(bytes.TrimSpace(r.Result)) == 0 || !json.Valid(r.Result) {
		return nil // nothing to check, or Record refuses it itself
	}
	tool := in.Tool
	if tool == "" {
		rec, err := a.store.Get(ctx, &oncekeystore.GetParams{Tenant: in.Tenant, OperationKey: in.OperationKey})
		if errors.Is(err, oncekeystore.ErrNotFound) {
			return nil // Record reports it
		}
		if err != nil {
			return fmt.Errorf("activities: record resolution %s: %w", in.OperationKey, err)
		}
		tool = rec.Tool
	}
	if err := a.registry.CheckResult(in.ActivityType, tool, r.Result); err != nil {
		inv := &reconcile.InvalidResolutionError{Field: "Result", Reason: err.Error() + "; nothing was recorded", Err: err}
		return temporal.NewNonRetryableApplicationError(inv.Error(), ErrTypeInvalid, nil)
	}
	return nil
}

// settled handles a failed Store.Resolve: when the record is already applied, released or
// failed it returns that settlement; other conflicts report ok=false; store trouble is returned
// as an error (retryable).
func (a *Activities) settled(ctx context.Context, ref RecordRef, resolveErr error) (reconcile.Output, bool, error) {
	var conflict *oncekeystore.StatusConflictError
	if !errors.As(resolveErr, &conflict) && !errors.Is(resolveErr, oncekeystore.ErrNotFound) {
		return reconcile.Output{}, false, resolveErr
	}
	rec, err := a.get(ctx, ref)
	if errors.Is(err, oncekeystore.ErrNotFound) {
		return reconcile.Output{}, false, nil
	}
	if err != nil {
		return reconcile.Output{}, false, err
	}
	switch rec.Status {
	case oncekeystore.StatusApplied, oncekeystore.StatusReleased, oncekeystore.StatusFailed:
		return OutputOf(rec), true, nil
	}
	return reconcile.Output{}, false, nil
}

// OutputOf maps a settled record (applied, released, failed) to the reconciliation output.
func OutputOf(rec *oncekeystore.Record) reconcile.Output {
	out := reconcile.Output{
		EffectReference: rec.EffectReference,
		Note:            rec.Note,
		ResolvedBy:      rec.ResolvedBy,
		Epoch:           rec.Epoch,
	}
	switch rec.Status {
	case oncekeystore.StatusApplied:
		out.Outcome = reconcile.Applied
		out.Result = rec.Result
	case oncekeystore.StatusReleased:
		out.Outcome = reconcile.NotApplied
	default:
		out.Outcome = reconcile.Failed
		out.Failure = FailureText(rec.Failure)
	}
	return out
}

// FailureText returns the message of a stored failure (a JSON object with "message" or
// "reason"), or the bytes as text.
func FailureText(b []byte) string { return failuredoc.Text(b) }

// AwaitInput names a reconciliation (or approval) workflow to wait for.
type AwaitInput struct {
	WorkflowID string `json:"workflow_id"`
	// Record, if its OperationKey is set, is the record the awaited workflow reconciles. The
	// answer is then read from the record once the workflow has closed, not taken from the
	// workflow's output: whoever started a workflow under that ID, its output decides nothing.
	Record RecordRef `json:"record,omitzero"`
	// Approval, if its OperationKey is set, makes the awaited workflow that key's approval
	// workflow: the answer (AwaitOutput.Approval) is read from the store's approval once the
	// workflow has closed, for the same reason.
	Approval RecordRef `json:"approval,omitzero"`
	// Fingerprint, with Approval set, is the waiting call's fingerprint. An approval the store
	// holds for another fingerprint (the key's approval was asked for other arguments) is answered
	// at once, while the workflow still waits, as AwaitOutput.Approval with FingerprintMismatch
	// set: the call is refused without waiting for a decision that cannot be its. "" (an input
	// from before the field existed) waits for the workflow to close.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// AwaitOutput is what AwaitReconciliation saw. Done is false when the activity's own time ran
// out first: call it again.
type AwaitOutput struct {
	Done   bool             `json:"done"`
	Output reconcile.Output `json:"output"`
	// Approval is the approval's decision, for an AwaitInput with Approval set.
	Approval *reconcile.ApprovalOutput `json:"approval,omitempty"`
	// Err is the reconciliation workflow's failure (an escalation timeout, a termination).
	Err string `json:"err,omitempty"`
}

// awaited answers for the record of a reconciliation workflow that has completed: its settlement;
// NotApplied (run the step again, the claim path decides) when no record exists or it is pending
// or unknown, whatever the workflow returned; an Err for a tombstone.
func (a *Activities) awaited(ctx context.Context, in AwaitInput) (AwaitOutput, error) {
	rec, err := a.get(ctx, in.Record)
	if errors.Is(err, oncekeystore.ErrNotFound) {
		return AwaitOutput{Done: true, Output: reconcile.Output{Outcome: reconcile.NotApplied, ResolvedBy: "oncekey",
			Note: "no claim was recorded for the key; the tool never ran"}}, nil
	}
	if err != nil {
		return AwaitOutput{}, err
	}
	switch rec.Status {
	case oncekeystore.StatusApplied, oncekeystore.StatusReleased, oncekeystore.StatusFailed:
		return AwaitOutput{Done: true, Output: OutputOf(rec)}, nil
	case oncekeystore.StatusExpired:
		return AwaitOutput{Done: true, Err: fmt.Sprintf("the record of key %s is past its retention (a tombstone): its outcome is unknown and can no longer be resolved", rec.OperationKey)}, nil
	}
	// Pending or unknown: another attempt claimed the key after the decision, or the workflow
	// settled nothing. The step runs again, and the claim path decides what the record allows.
	return AwaitOutput{Done: true, Output: reconcile.Output{Outcome: reconcile.NotApplied, ResolvedBy: "oncekey", Epoch: rec.Epoch,
		Note: fmt.Sprintf("the reconciliation workflow %s completed with the record %s at epoch %d; running the step again", in.WorkflowID, rec.Status, rec.Epoch)}}, nil
}

// awaitable refuses, non-retryably with ErrTypeForeignRecord, a wait on a workflow that is not
// the one oncekey started for what in names: with in.Approval set, in.WorkflowID must be
// reconcile.ApprovalWorkflowID of its key and the workflow of type reconcile.ApprovalWorkflowName;
// otherwise reconcile.WorkflowID of in.Record's key (with no Record, an input from before the field
// existed, an ID starting with reconcile.WorkflowIDPrefix) and of type reconcile.WorkflowName. The
// type is checked once the workflow exists (DescribeWorkflow; a missing one is left to
// the wait, which reports it gone). The record or approval itself is bound to the caller's
// namespace and the tool when the answer is read from it (see bound). A server error is returned
// retryable.
func awaitable(ctx context.Context, c client.Client, in AwaitInput) error {
	refuse := func(msg string) error {
		return temporal.NewNonRetryableApplicationError("activities: "+msg+"; nothing was read", ErrTypeForeignRecord, nil)
	}
	what, wantType := "reconciliation", reconcile.WorkflowName
	switch key := in.Approval.OperationKey; {
	case key != "":
		what, wantType = "approval", reconcile.ApprovalWorkflowName
		if in.WorkflowID != reconcile.ApprovalWorkflowID(key) {
			return refuse(fmt.Sprintf("the call waits on workflow %q for the approval of key %s, whose approval workflow is %s", in.WorkflowID, key, reconcile.ApprovalWorkflowID(key)))
		}
	case in.Record.OperationKey != "":
		if key := in.Record.OperationKey; in.WorkflowID != reconcile.WorkflowID(key) {
			return refuse(fmt.Sprintf("the call waits on workflow %q for the record of key %s, whose reconciliation workflow is %s", in.WorkflowID, key, reconcile.WorkflowID(key)))
		}
	case !strings.HasPrefix(in.WorkflowID, reconcile.WorkflowIDPrefix):
		return refuse(fmt.Sprintf("the call waits on workflow %q, which is not a reconciliation workflow (IDs start with %s)", in.WorkflowID, reconcile.WorkflowIDPrefix))
	}
	if c == nil {
		return nil
	}
	d, err := c.DescribeWorkflow(ctx, in.WorkflowID, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return nil
	case err != nil:
		return fmt.Errorf("activities: describe %s: %w", in.WorkflowID, err)
	}
	if typ := d.RawResponse.GetWorkflowExecutionInfo().GetType().GetName(); typ != wantType {
		return refuse(fmt.Sprintf("workflow %s is of type %q, not oncekey's %s workflow (%s): someone started it under the ID oncekey gives its %s. "+
			"Terminate it, then run the step again", in.WorkflowID, typ, what, wantType, what))
	}
	return nil
}

// AwaitReconciliation waits, through the worker's client, for another workflow's
// reconciliation workflow to finish and returns its output (with in.Record set, the record's
// settlement instead: see AwaitInput; with in.Approval set, the approval's decision): the way a
// second workflow blocked on the same key is released by the same resolution, and a call
// re-proposed while its approval is pending by the same decision. It heartbeats while it waits
// and returns Done=false shortly before its start-to-close deadline.
func (a *Activities) AwaitReconciliation(ctx context.Context, in AwaitInput) (AwaitOutput, error) {
	if err := awaitable(ctx, activity.GetClient(ctx), in); err != nil {
		return AwaitOutput{}, err
	}
	var out reconcile.Output
	var into any = &out
	if in.Approval.OperationKey != "" {
		into = nil // the store answers
	}
	var mismatch *AwaitOutput
	var before func(context.Context) (bool, error)
	if in.Approval.OperationKey != "" && in.Fingerprint != "" {
		check := a.fingerprintCheck(in)
		before = func(ctx context.Context) (bool, error) {
			out, err := check(ctx)
			mismatch = out
			return out != nil, err
		}
	}
	done, failure, err := awaitWorkflow(ctx, in.WorkflowID, into, before)
	if mismatch != nil {
		return *mismatch, nil
	}
	switch {
	case err != nil || !done:
		return AwaitOutput{}, err
	case failure != "":
		return AwaitOutput{Done: true, Err: failure}, nil
	case in.Approval.OperationKey != "":
		return a.awaitedApproval(ctx, in)
	case in.Record.OperationKey != "":
		return a.awaited(ctx, in)
	}
	return AwaitOutput{Done: true, Output: out}, nil
}

// awaitWorkflow waits for workflow id to close, decoding its result into out (nil: not read).
// done is false when the activity's own time ran out first; failure is the workflow's failure
// when it closed without a result (failed, timed out, terminated), except a run an operator's
// reset ended, whose reset run it waits for instead (resetRunning). A workflow the server does
// not have yet is waited for up to notStartedGrace from the activity's start: a sibling call's
// start of it may still be on its way. It heartbeats while it waits.
//
// before, if not nil, runs before each wait; when it reports stop, awaitWorkflow returns done at
// once (or its error).
func awaitWorkflow(ctx context.Context, id string, out any, before func(context.Context) (stop bool, err error)) (done bool, failure string, err error) {
	c := activity.GetClient(ctx)
	info := activity.GetInfo(ctx)
	budget := 5 * time.Minute
	if !info.Deadline.IsZero() {
		budget = time.Until(info.Deadline) - 5*time.Second
	}
	began := time.Now()
	end := began.Add(budget)
	for time.Now().Before(end) {
		if before != nil {
			if stop, err := before(ctx); stop || err != nil {
				return stop, "", err
			}
		}
		wait := min(time.Until(end), 20*time.Second)
		if info.HeartbeatTimeout > 0 {
			wait = min(wait, info.HeartbeatTimeout/2)
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		err := c.GetWorkflow(wctx, id, "").Get(wctx, out)
		// Read before cancel, which would set it: only a wait that ran out is no answer.
		waitOver := wctx.Err() != nil
		cancel()
		if err == nil {
			return true, "", nil
		}
		if ctx.Err() != nil {
			return false, "", ctx.Err()
		}
		var notFound *serviceerror.NotFound
		if !waitOver && errors.As(err, &notFound) && time.Since(began) < notStartedGrace {
			// Not started yet: a call that joins an approval or reconciliation another call of
			// the same workflow starts learns of it (the SDK's "already started") in the same
			// workflow task as the start is sent, and so may ask before the server has it.
			activity.RecordHeartbeat(ctx)
			if err := sleepCtx(ctx, notStartedPoll); err != nil {
				return false, "", err
			}
			continue
		}
		if !waitOver {
			// The run finished without an output: it failed, timed out or was terminated. An
			// operator's reset ends a run so too and goes on in a new run of the ID: wait for that.
			if resetRunning(ctx, c, id) {
				activity.RecordHeartbeat(ctx)
				continue
			}
			return true, err.Error(), nil
		}
		activity.RecordHeartbeat(ctx)
	}
	return false, "", nil
}

// notStartedGrace is how long awaitWorkflow waits for a workflow the server does not have yet,
// polling every notStartedPoll, before it reports it as ended without a result (its start failed:
// the call that started it says why, and a call again asks anew).
const (
	notStartedGrace = time.Minute
	notStartedPoll  = 250 * time.Millisecond
)

// sleepCtx sleeps for d or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resetRunning reports whether workflow id goes on in a run that an operator's reset started: its
// current run is running and is not the first of its chain (a reset keeps the chain's first run
// ID). A new start of the ID after a termination is a chain of its own, and not followed.
func resetRunning(ctx context.Context, c client.Client, id string) bool {
	d, err := c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return false
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	return info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && info.GetExecution().GetRunId() != info.GetFirstRunId()
}
