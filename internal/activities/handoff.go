package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/failuredoc"
	"github.com/oncekey/oncekey/oncekeystore"
)

// The hand-off of an Effectful tool's result to an asynchronous completion, and how it settles.
//
// The body returned activity.ErrResultPending; the worker kept the record pending at its epoch
// with a failuredoc.HandOff naming the activity attempt (oncekeystore.HandOffStore). Whoever
// completes that attempt (client.CompleteActivity by task token or by ID, with a result, a
// failure or a cancellation) talks to the Temporal server, never to the worker, so the record is
// settled from the attempt's ending in the workflow's history, read by a worker with its own
// client: the claim of a repeat, the reconciliation's inspection, and SettleHandOff, which the
// workflow side runs when the completion reaches it. Only the result (or failure) is read from
// the completion; the key, fingerprint and tenant are the record's.

// SettleHandOffName is the registered name of SettleHandOff.
const SettleHandOffName = "oncekey.SettleHandOff"

// ResolvedByCompletion is Record.ResolvedBy of a record settled from an asynchronous completion
// after it had become unknown (a record still pending is completed at its epoch, as its owner
// would).
const ResolvedByCompletion = "temporal:asynchronous-completion"

// HandOffOf returns the hand-off of rec when rec waits for an asynchronous completion: pending or
// unknown, with the hand-off document of its epoch.
func HandOffOf(rec *oncekeystore.Record) (*failuredoc.HandOff, bool) {
	if rec == nil || (rec.Status != oncekeystore.StatusPending && rec.Status != oncekeystore.StatusUnknown) || len(rec.Failure) == 0 {
		return nil, false
	}
	d, ok := failuredoc.Decode(rec.Failure)
	if !ok || d.HandOff == nil || d.HandOff.Epoch != rec.Epoch {
		return nil, false
	}
	return d.HandOff, true
}

// EndingKind is how a handed-off attempt ended.
type EndingKind int

const (
	// Waiting: the attempt is still open; a completion may still come.
	Waiting EndingKind = iota
	// Completed: completed with a result (Ending.Result).
	Completed
	// FailedEnding: completed with a failure (Ending.Failure).
	FailedEnding
	// Canceled: reported cancelled.
	Canceled
	// NoCompletion: the attempt ended without a completion (it timed out, a later attempt runs,
	// the workflow closed, or its run is gone); Ending.Why says which.
	NoCompletion
)

// Ending is how a handed-off attempt ended, read from the workflow's history.
type Ending struct {
	Kind    EndingKind
	Result  *commonpb.Payloads
	Failure *failurepb.Failure
	// Identity is the completer's client identity, as the history has it.
	Identity string
	// Why says why an attempt ended without a completion.
	Why string
}

// ReadEnding reads how the attempt h names ended, from the workflow run's history: the ending of
// the activity scheduled at h.Scheduled (a workflow may reuse an activity ID), and for an activity
// still open, its attempt in the run's pending activities. An activity of a run that has closed
// without an ending, or of a run Temporal no longer has, is NoCompletion.
func ReadEnding(ctx context.Context, c client.Client, h *failuredoc.HandOff) (Ending, error) {
	desc, err := c.DescribeWorkflow(ctx, h.WorkflowID, h.RunID)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return Ending{Kind: NoCompletion, Why: fmt.Sprintf("Temporal no longer has run %s of workflow %s", h.RunID, h.WorkflowID)}, nil
	}
	if err != nil {
		return Ending{}, fmt.Errorf("describe workflow %s: %w", h.WorkflowID, err)
	}
	d := desc.RawResponse
	var sc scan
	it := c.GetWorkflowHistory(ctx, h.WorkflowID, h.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() && !sc.ended {
		ev, err := it.Next()
		if err != nil {
			return Ending{}, fmt.Errorf("read the history of workflow %s: %w", h.WorkflowID, err)
		}
		sc.read(ev, h)
	}
	switch {
	case sc.ended && sc.started != 0 && sc.started != h.Attempt:
		return Ending{Kind: NoCompletion, Why: fmt.Sprintf("attempt %d of activity %s ended without a completion; attempt %d ended the activity", h.Attempt, h.ActivityID, sc.started)}, nil
	case sc.ended:
		return sc.end, nil
	case sc.scheduled == 0:
		return Ending{Kind: NoCompletion, Why: fmt.Sprintf("the history of workflow %s has no activity %s scheduled at %s", h.WorkflowID, h.ActivityID, h.Scheduled.Format(time.RFC3339Nano))}, nil
	case d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		// A closed run still lists the activities it left open; none of them can be completed.
		return Ending{Kind: NoCompletion, Why: fmt.Sprintf("workflow %s closed (%s) before the activity was completed",
			h.WorkflowID, d.GetWorkflowExecutionInfo().GetStatus())}, nil
	}
	for _, pa := range d.GetPendingActivities() {
		if pa.GetActivityId() == h.ActivityID && pa.GetAttempt() > h.Attempt {
			return Ending{Kind: NoCompletion, Why: fmt.Sprintf("attempt %d of activity %s ended without a completion, and attempt %d runs now", h.Attempt, h.ActivityID, pa.GetAttempt())}, nil
		}
	}
	return Ending{Kind: Waiting}, nil
}

// scan follows one activity through a history: its scheduling, its start (the attempt), its
// ending.
type scan struct {
	scheduled int64
	started   int32
	ended     bool
	end       Ending
}

// read reads one history event for the attempt h: the scheduling of its activity (the one at
// h.Scheduled, or without it the last of that ID before h.At), its start, or its ending.
func (sc *scan) read(ev *historypb.HistoryEvent, h *failuredoc.HandOff) {
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		if ev.GetActivityTaskScheduledEventAttributes().GetActivityId() != h.ActivityID {
			return
		}
		at := ev.GetEventTime().AsTime()
		if h.Scheduled.IsZero() && !at.After(h.At) || at.Equal(h.Scheduled) {
			sc.scheduled, sc.started = ev.GetEventId(), 0
		}
		return
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
		if a := ev.GetActivityTaskStartedEventAttributes(); sc.scheduled != 0 && a.GetScheduledEventId() == sc.scheduled {
			sc.started = a.GetAttempt()
		}
		return
	}
	var id int64
	var end Ending
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		a := ev.GetActivityTaskCompletedEventAttributes()
		id, end = a.GetScheduledEventId(), Ending{Kind: Completed, Result: a.GetResult(), Identity: a.GetIdentity()}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		a := ev.GetActivityTaskFailedEventAttributes()
		id, end = a.GetScheduledEventId(), Ending{Kind: FailedEnding, Failure: a.GetFailure(), Identity: a.GetIdentity()}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
		a := ev.GetActivityTaskCanceledEventAttributes()
		id, end = a.GetScheduledEventId(), Ending{Kind: Canceled, Identity: a.GetIdentity()}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		a := ev.GetActivityTaskTimedOutEventAttributes()
		why := "the activity timed out before a completion arrived"
		if f := a.GetFailure(); f != nil {
			why += " (" + f.GetMessage() + ")"
		}
		id, end = a.GetScheduledEventId(), Ending{Kind: NoCompletion, Why: why}
	default:
		return
	}
	if sc.scheduled != 0 && id == sc.scheduled && !(h.Scheduled.IsZero() && sc.endedBefore(ev, h)) {
		sc.ended, sc.end = true, end
	}
}

// endedBefore reports, for a hand-off without its scheduling time, whether ev ended the activity
// before the hand-off was made (so it is an earlier activity of the same ID).
func (sc *scan) endedBefore(ev *historypb.HistoryEvent, h *failuredoc.HandOff) bool {
	if ev.GetEventTime().AsTime().Before(h.At) {
		sc.scheduled = 0
		return true
	}
	return false
}

// SettleHandOff settles rec, which waits for the asynchronous completion h (HandOffOf), from the
// attempt's ending (ReadEnding with c): a result makes it applied with that result (sealed by
// sealer, stored as the worker stores one); a failure of type oncekey.NotApplied releases it; any
// other failure, or a cancellation, makes it failed with that failure; an attempt that ended
// without a completion makes it unknown, keeping h, for a receipt lookup or a person. A record
// still pending is written at its epoch (Complete, Release, MarkUnknown); an unknown one is
// resolved (Store.Resolve, ResolvedByCompletion). It returns the record as it then stands
// (another writer's, when one settled it first) and the ending; an attempt still open changes
// nothing.
func SettleHandOff(ctx context.Context, store oncekeystore.Store, sealer oncekey.ResultSealer, c client.Client,
	rec *oncekeystore.Record, h *failuredoc.HandOff) (*oncekeystore.Record, Ending, error) {
	if c == nil {
		return rec, Ending{}, errors.New("no Temporal client to read the history with")
	}
	end, err := ReadEnding(ctx, c, h)
	if err != nil || end.Kind == Waiting {
		return rec, end, err
	}
	pending := rec.Status == oncekeystore.StatusPending
	// What the body recorded with oncekey.SetEffectReference before it handed off.
	had, _ := failuredoc.Decode(rec.Failure)
	ref := had.EffectReference
	resolve := &oncekeystore.ResolveParams{Tenant: rec.Tenant, OperationKey: rec.OperationKey, Epoch: rec.Epoch,
		EffectReference: ref, ResolvedBy: ResolvedByCompletion, Note: completionNote(end)}
	var out *oncekeystore.Record
	switch end.Kind {
	case Completed:
		var b []byte
		if end.Result != nil {
			if b, err = (proto.MarshalOptions{Deterministic: true}).Marshal(end.Result); err != nil {
				return rec, end, err
			}
		}
		if b, err = oncekey.SealResult(ctx, sealer, rec.Tenant, rec.OperationKey, b); err != nil {
			return rec, end, err
		}
		if pending {
			out, err = store.Complete(ctx, &oncekeystore.CompleteParams{Tenant: rec.Tenant, OperationKey: rec.OperationKey, Epoch: rec.Epoch,
				Status: oncekeystore.StatusApplied, Result: b, EffectReference: ref})
		} else {
			resolve.Status, resolve.Result = oncekeystore.StatusApplied, b
			out, err = store.Resolve(ctx, resolve)
		}
		var tooLarge *oncekeystore.ResultTooLargeError
		if errors.As(err, &tooLarge) {
			end = Ending{Kind: NoCompletion, Why: "the activity was completed, but its result is too large to store: " + tooLarge.Error()}
			return markHandOffUnknown(ctx, store, rec, h, ref, end)
		}
	case FailedEnding, Canceled:
		doc := failuredoc.Doc{Message: "the activity was reported cancelled", Type: "Canceled", NonRetryable: true, EffectReference: ref}
		if end.Kind == FailedEnding {
			doc = failuredoc.Doc{Message: end.Failure.GetMessage(), Type: end.Failure.GetApplicationFailureInfo().GetType(), NonRetryable: true, EffectReference: ref}
		}
		if !pending {
			doc.ResolvedBy = ResolvedByCompletion
		}
		switch {
		case doc.Type == oncekey.ErrTypeNotApplied && pending:
			out, err = store.Release(ctx, &oncekeystore.ReleaseParams{Tenant: rec.Tenant, OperationKey: rec.OperationKey, Epoch: rec.Epoch})
		case doc.Type == oncekey.ErrTypeNotApplied:
			resolve.Status = oncekeystore.StatusReleased
			out, err = store.Resolve(ctx, resolve)
		case pending:
			out, err = store.Complete(ctx, &oncekeystore.CompleteParams{Tenant: rec.Tenant, OperationKey: rec.OperationKey, Epoch: rec.Epoch,
				Status: oncekeystore.StatusFailed, Failure: doc.Bytes(), EffectReference: ref})
		default:
			resolve.Status, resolve.Failure = oncekeystore.StatusFailed, doc.Bytes()
			out, err = store.Resolve(ctx, resolve)
		}
	default:
		return markHandOffUnknown(ctx, store, rec, h, ref, end)
	}
	return settledOr(ctx, store, rec, out, end, err)
}

// markHandOffUnknown makes a pending rec unknown because its hand-off ended without a
// completion (end.Why), keeping h and the effect reference ref in the reason; an unknown rec
// stays as it is.
func markHandOffUnknown(ctx context.Context, store oncekeystore.Store, rec *oncekeystore.Record, h *failuredoc.HandOff, ref string, end Ending) (*oncekeystore.Record, Ending, error) {
	if rec.Status != oncekeystore.StatusPending {
		return rec, end, nil
	}
	doc := failuredoc.Doc{
		Message: fmt.Sprintf("the result was handed off to an asynchronous completion at %s, and none was recorded: %s",
			h.At.UTC().Format(time.RFC3339), end.Why),
		Reason:          "no asynchronous completion",
		EffectReference: ref,
		HandOff:         h,
	}
	out, err := store.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: rec.Tenant, OperationKey: rec.OperationKey, Epoch: rec.Epoch, Failure: doc.Bytes()})
	return settledOr(ctx, store, rec, out, end, err)
}

// settledOr returns out after a settling write; when another writer settled the record first
// (ErrLostClaim, a *StatusConflictError, a stale epoch), the record as it now stands.
func settledOr(ctx context.Context, store oncekeystore.Store, rec, out *oncekeystore.Record, end Ending, err error) (*oncekeystore.Record, Ending, error) {
	if err == nil {
		return out, end, nil
	}
	var conflict *oncekeystore.StatusConflictError
	var stale *oncekeystore.StaleDecisionError
	if !errors.Is(err, oncekeystore.ErrLostClaim) && !errors.As(err, &conflict) && !errors.As(err, &stale) {
		return rec, end, err
	}
	now, gerr := store.Get(ctx, &oncekeystore.GetParams{Tenant: rec.Tenant, OperationKey: rec.OperationKey})
	if gerr != nil {
		return rec, end, gerr
	}
	return now, end, nil
}

// completionNote says who completed the attempt, for Record.Note.
func completionNote(end Ending) string {
	what := map[EndingKind]string{Completed: "completed", FailedEnding: "failed", Canceled: "reported cancelled"}[end.Kind]
	if end.Identity == "" {
		return "the activity was " + what + " asynchronously"
	}
	return fmt.Sprintf("the activity was %s asynchronously by %s", what, end.Identity)
}

// SettleHandOffOutput is what SettleHandOff found.
type SettleHandOffOutput struct {
	// Status is the record's status after the settling ("" when there is no record).
	Status oncekeystore.Status `json:"status,omitempty"`
	// Settled is true when this call settled the record from the completion.
	Settled bool `json:"settled,omitempty"`
	// Note says what happened, for the workflow's log.
	Note string `json:"note,omitempty"`
}

// SettleHandOff is the activity the workflow side runs when the asynchronous completion of an
// Effectful call reaches it: it settles the record of ref from the completion as Temporal's
// history has it (SettleHandOff, the function), so that a repeat replays what the workflow got
// without waiting for one. Only the workflow run that handed the result off may ask (its
// workflow and run IDs are the hand-off's; any other caller gets a non-retryable
// ErrTypeForeignRecord error and nothing is read out). A record settled before by someone else
// (a person, after it became unknown) is left as it is, and a warning says the completion came
// after that decision.
func (a *Activities) SettleHandOff(ctx context.Context, ref RecordRef) (SettleHandOffOutput, error) {
	rec, err := a.store.Get(ctx, &oncekeystore.GetParams{Tenant: ref.Tenant, OperationKey: ref.OperationKey})
	if errors.Is(err, oncekeystore.ErrNotFound) {
		return SettleHandOffOutput{Note: "no record"}, nil
	}
	if err != nil {
		return SettleHandOffOutput{}, fmt.Errorf("activities: settle the hand-off of %s: %w", ref.OperationKey, err)
	}
	if err := bound(ctx, rec, ref.Tool); err != nil {
		return SettleHandOffOutput{}, err
	}
	info := activity.GetInfo(ctx)
	h, ok := HandOffOf(rec)
	if !ok && rec.Status == oncekeystore.StatusPending && !rec.LeaseExpired {
		// The completion can reach the workflow before the worker that handed off has written
		// the hand-off (a fast completer): ask again shortly.
		return SettleHandOffOutput{}, fmt.Errorf("activities: the record of %s is pending without a hand-off yet; asking again", ref.OperationKey)
	}
	if !ok {
		if rec.ResolvedBy != "" && rec.ResolvedBy != ResolvedByCompletion {
			activity.GetLogger(ctx).Warn("oncekey: an asynchronous completion reached the workflow after the record was settled by someone else; the record keeps that decision",
				"tool", rec.Tool, "operation_key", rec.OperationKey, "status", rec.Status, "resolved_by", rec.ResolvedBy, "workflow_id", info.WorkflowExecution.ID)
			return SettleHandOffOutput{Status: rec.Status, Note: fmt.Sprintf("already settled by %s as %s; the completion changed nothing", rec.ResolvedBy, rec.Status)}, nil
		}
		return SettleHandOffOutput{Status: rec.Status, Note: "not waiting for a completion"}, nil
	}
	if h.WorkflowID != info.WorkflowExecution.ID || h.RunID != info.WorkflowExecution.RunID {
		return SettleHandOffOutput{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"activities: %s settles a hand-off only for the workflow run that made it (workflow %s, run %s), and was called by workflow %s, run %s; nothing was read or written",
			SettleHandOffName, h.WorkflowID, h.RunID, info.WorkflowExecution.ID, info.WorkflowExecution.RunID), ErrTypeForeignRecord, nil)
	}
	out, end, err := SettleHandOff(ctx, a.store, a.sealer, ActivityClient(ctx), rec, h)
	if err != nil {
		return SettleHandOffOutput{}, fmt.Errorf("activities: settle the hand-off of %s: %w", ref.OperationKey, err)
	}
	if end.Kind == Waiting {
		// The workflow got the completion, so the history has it; a read that raced it is retried.
		return SettleHandOffOutput{}, fmt.Errorf("activities: the history of workflow %s does not show the completion of activity %s yet", h.WorkflowID, h.ActivityID)
	}
	return SettleHandOffOutput{Status: out.Status, Settled: true, Note: completionNote(end)}, nil
}
