package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/oncekeystore"
)

// History is one recorded workflow history to check with CheckIdentity.
type History struct {
	// Name says where the history came from (a file name, a workflow ID), for messages.
	Name string
	// WorkflowID is the workflow's ID, part of every operation key; "" means the one the history's
	// first event records (servers since 1.27 record it).
	WorkflowID string
	History    *historypb.History
}

// HistoryError is a history CheckIdentity or RecordedCalls cannot read: not JSON, truncated,
// not a workflow history, or holding no call of a protected tool. Nothing was compared.
type HistoryError struct {
	Name   string
	Reason string
	Err    error
}

func (e *HistoryError) Error() string {
	msg := fmt.Sprintf("oncekey: history %s: %s", e.Name, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *HistoryError) Unwrap() error { return e.Err }

// ReadHistory reads one workflow history as `temporal workflow show --output json` prints it
// (the JSON of a history.v1.History; the SDK's client.HistoryFromJSON reads it). name is for
// messages. It returns a *HistoryError for input that is not such JSON (cut off, another
// document) or whose events do not start with the workflow's start (a page from the middle).
func ReadHistory(name string, r io.Reader) (History, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return History{}, &HistoryError{Name: name, Reason: "cannot be read", Err: err}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return History{}, &HistoryError{Name: name, Reason: "is empty; want the output of `temporal workflow show --output json`"}
	}
	if !json.Valid(b) {
		return History{}, &HistoryError{Name: name, Reason: "is not JSON (cut off, or not the output of `temporal workflow show --output json`)"}
	}
	h, err := client.HistoryFromJSON(bytes.NewReader(b), client.HistoryJSONOptions{})
	if err != nil {
		return History{}, &HistoryError{Name: name, Reason: "is not a workflow history", Err: err}
	}
	out := History{Name: name, History: h}
	if _, err := started(out); err != nil {
		return History{}, err
	}
	return out, nil
}

// ReadHistoryFile reads the history in the file at path (ReadHistory).
func ReadHistoryFile(path string) (History, error) {
	f, err := os.Open(path)
	if err != nil {
		return History{}, &HistoryError{Name: path, Reason: "cannot be opened", Err: err}
	}
	defer f.Close()
	return ReadHistory(path, f)
}

// FetchHistory reads the whole history of a workflow run from Temporal through c (runID ""
// means the latest run of workflowID), as the SDK's client.GetWorkflowHistory pages it.
func FetchHistory(ctx context.Context, c client.Client, workflowID, runID string) (History, error) {
	h := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return History{}, fmt.Errorf("oncekey: history of workflow %s: %w", workflowID, err)
		}
		h.Events = append(h.Events, ev)
	}
	return History{Name: workflowID, WorkflowID: workflowID, History: h}, nil
}

// WriteHistory writes h's events as `temporal workflow show --output json` prints them (the
// protojson of a history.v1.History, indented), which ReadHistory reads.
func WriteHistory(w io.Writer, h History) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h.History)
	if err != nil {
		return fmt.Errorf("oncekey: encode history %s: %w", h.Name, err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// started returns the start event's attributes of h, or a *HistoryError.
func started(h History) (*historypb.WorkflowExecutionStartedEventAttributes, error) {
	events := h.History.GetEvents()
	if len(events) == 0 {
		return nil, &HistoryError{Name: h.Name, Reason: "has no events"}
	}
	a := events[0].GetWorkflowExecutionStartedEventAttributes()
	if a == nil {
		return nil, &HistoryError{Name: h.Name, Reason: fmt.Sprintf(
			"does not start with the workflow's start (its first event is #%d %s): it is cut off or a page of a longer history; export the whole history",
			events[0].GetEventId(), events[0].GetEventType())}
	}
	return a, nil
}

// RecordedCall is one call of a protected tool in a history: what the workflow scheduled (the
// ActivityTaskScheduled event and the headers oncekey's workflow side wrote) and the operation
// key the worker recorded for it.
type RecordedCall struct {
	// History is the Name of the history it is in.
	History    string
	WorkflowID string
	RunID      string
	// EventID is the ID of the ActivityTaskScheduled event.
	EventID      int64
	ActivityID   string
	ActivityType string
	// Tenant, StepID and FirstActivityID are the oncekey headers of the call ("" when absent).
	Tenant          string
	StepID          string
	FirstActivityID string
	// Args is the arguments document the workflow side sent (wire.HeaderArgs), canonical JSON;
	// for a call recorded before that header, the document of its input.
	Args json.RawMessage
	// Input is the activity's input as scheduled.
	Input *commonpb.Payloads
	// Key is the operation key the worker recorded: in the metadata of the result
	// (wire.MetadataOperationKey) or in the details of oncekey's failure. "" when the history
	// holds none (the attempt timed out, was cancelled or has not ended).
	Key string
	// Fingerprint and Version are the fingerprint and version the worker derived for the call, as
	// its result's metadata (wire.MetadataFingerprint, MetadataVersion) or its failure's
	// details (oncekey.Details) record them; Versioned is false when the history does not
	// record them (a timeout, a result from before they were recorded), and Fingerprint is then "".
	Fingerprint string
	Version     string
	Versioned   bool
	// Ended says how the history ends the call: "completed", "failed", "timed out", "canceled" or
	// "not ended".
	Ended string
}

// RecordedCalls returns the calls in h that oncekey's workflow side scheduled for a protected
// tool (those whose headers carry wire.HeaderTenant), in history order. dc is the client's data
// converter (nil: the SDK's default). It returns a *HistoryError when h has no such call: the
// history holds no protected activity, or was recorded without oncekey's interceptor on the
// workflow worker, and checking it would prove nothing.
func RecordedCalls(h History, dc converter.DataConverter) ([]RecordedCall, error) {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	start, err := started(h)
	if err != nil {
		return nil, err
	}
	wfID := h.WorkflowID
	if wfID == "" {
		wfID = start.GetWorkflowId()
	}
	var calls []RecordedCall
	bySchedule := map[int64]int{}
	for _, ev := range h.History.GetEvents() {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			fields := a.GetHeader().GetFields()
			if fields[wire.HeaderTenant] == nil {
				continue
			}
			c := RecordedCall{History: h.Name, WorkflowID: wfID, RunID: start.GetOriginalExecutionRunId(), EventID: ev.GetEventId(),
				ActivityID: a.GetActivityId(), ActivityType: a.GetActivityType().GetName(), Input: a.GetInput(), Ended: "not ended"}
			if p := fields[wire.HeaderArgs]; p != nil {
				if err := dc.FromPayload(p, &c.Args); err != nil || len(c.Args) == 0 {
					return nil, &HistoryError{Name: h.Name, Reason: fmt.Sprintf("event #%d: header %s does not decode", ev.GetEventId(), wire.HeaderArgs), Err: err}
				}
			} else {
				// Recorded before the workflow side sent the arguments document: it is the input's.
				doc, err := inputDocument(dc, a.GetInput())
				if err != nil {
					return nil, &HistoryError{Name: h.Name, Reason: fmt.Sprintf("event #%d: the input of %s does not decode as JSON", ev.GetEventId(), c.ActivityType), Err: err}
				}
				c.Args = doc
			}
			for name, dst := range map[string]*string{wire.HeaderTenant: &c.Tenant, wire.HeaderStepID: &c.StepID,
				wire.HeaderFirstActivityID: &c.FirstActivityID} {
				if p := fields[name]; p != nil {
					if err := dc.FromPayload(p, dst); err != nil {
						return nil, &HistoryError{Name: h.Name, Reason: fmt.Sprintf("event #%d: header %s does not decode", ev.GetEventId(), name), Err: err}
					}
				}
			}
			bySchedule[ev.GetEventId()] = len(calls)
			calls = append(calls, c)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := ev.GetActivityTaskCompletedEventAttributes()
			if i, ok := bySchedule[a.GetScheduledEventId()]; ok {
				calls[i].Ended = "completed"
				if ps := a.GetResult().GetPayloads(); len(ps) > 0 {
					var raw converter.RawValue
					if dc.FromPayload(ps[0], &raw) == nil && raw.Payload() != nil {
						md := raw.Payload().GetMetadata()
						calls[i].Key = string(md[wire.MetadataOperationKey])
						v, versioned := md[wire.MetadataVersion]
						calls[i].Fingerprint, calls[i].Version, calls[i].Versioned = string(md[wire.MetadataFingerprint]), string(v), versioned
					}
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			a := ev.GetActivityTaskFailedEventAttributes()
			if i, ok := bySchedule[a.GetScheduledEventId()]; ok {
				calls[i].Ended = "failed"
				if ps := a.GetFailure().GetApplicationFailureInfo().GetDetails().GetPayloads(); len(ps) > 0 {
					var d oncekey.Details
					if dc.FromPayload(ps[0], &d) == nil {
						calls[i].Key = d.OperationKey
						calls[i].Fingerprint, calls[i].Version, calls[i].Versioned = d.Fingerprint, d.Version, d.Fingerprint != ""
					}
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			if i, ok := bySchedule[ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()]; ok {
				calls[i].Ended = "timed out"
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			if i, ok := bySchedule[ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()]; ok {
				calls[i].Ended = "canceled"
			}
		}
	}
	if len(calls) == 0 {
		return nil, &HistoryError{Name: h.Name, Reason: "holds no call of a protected tool (no activity carries the " + wire.HeaderTenant +
			" header): it proves nothing about identity. Export a history of a workflow that calls protected tools, " +
			"run by workers with oncekey's interceptor"}
	}
	if wfID == "" {
		return nil, &HistoryError{Name: h.Name, Reason: "does not record its workflow ID (a server before 1.27): give it in History.WorkflowID"}
	}
	return calls, nil
}

// inputDocument returns the arguments document of an activity's input payloads, shaped as
// oncekey.CanonicalArgs shapes it: the single argument, or an array of them.
func inputDocument(dc converter.DataConverter, in *commonpb.Payloads) (json.RawMessage, error) {
	ps := in.GetPayloads()
	args := make([]any, len(ps))
	for i, p := range ps {
		var raw json.RawMessage
		if err := dc.FromPayload(p, &raw); err != nil {
			return nil, err
		}
		args[i] = raw
	}
	return oncekey.CanonicalArgs(args)
}

// IdentityOptions configures CheckIdentity. The zero value checks keys only, in namespace
// "default", with the SDK's default data converter.
type IdentityOptions struct {
	// DataConverter decodes the histories' payloads: the client's converter, codec included.
	// Defaults to converter.GetDefaultDataConverter().
	DataConverter converter.DataConverter
	// FingerprintSecret is Options.FingerprintSecret of the workers that made the
	// records, for comparing fingerprints with Store. Defaults to none.
	FingerprintSecret []byte
	// Namespace is the Temporal namespace the histories ran in (part of every operation key).
	// Defaults to "default".
	Namespace string
	// Store, if set, is read for the record of a call whose history does not record the
	// fingerprint and version it was derived with (a history from before oncekey recorded them in
	// the result's metadata and the failure's details), so that they are compared too. Without either,
	// only the call's key is compared: a changed Policy.Version, or an argument change under a
	// step ID (which keeps the key), is then not seen.
	Store oncekeystore.Store
}

// IdentityStatus is what CheckIdentity found for one call.
type IdentityStatus string

const (
	// IdentitySame: the new code derives the recorded identity (or one of Policy.Previous's).
	IdentitySame IdentityStatus = "same"
	// IdentityChanged: a repeat of the call would be another operation, or a fingerprint mismatch.
	IdentityChanged IdentityStatus = "changed"
	// IdentityUnverified: the history records no key for the call (it timed out, was cancelled,
	// or has not ended), so there is nothing to compare with.
	IdentityUnverified IdentityStatus = "unverified"
)

// IdentityResult is CheckIdentity's finding for one recorded call.
type IdentityResult struct {
	RecordedCall
	Status IdentityStatus
	// Tool is the tool the new code names for the call (ActivityType, or what its Route names).
	Tool string
	// Field names what made the difference: an argument path ("recipient"), "Version",
	// "policy", "input", "key" (the key strategy, Exclude, namespace or tenant) or "fingerprint"
	// (Exclude or FingerprintSecret); "" when Status is not IdentityChanged.
	Field string
	// Was and Now are the field's recorded and new values ("absent" for a missing argument).
	Was, Now string
	// NewKey is the key the new code derives ("" when it derives none).
	NewKey string
	// Note says more: other differing fields, a record that was not found.
	Note string
}

// IdentityReport is the outcome of CheckIdentity: one result per recorded call.
type IdentityReport struct {
	Results []IdentityResult
}

// Changed returns the results whose identity changed.
func (r *IdentityReport) Changed() []IdentityResult {
	var out []IdentityResult
	for _, res := range r.Results {
		if res.Status == IdentityChanged {
			out = append(out, res)
		}
	}
	return out
}

// IdentityChangedError is IdentityReport.Err's error: calls whose identity the new code changes.
type IdentityChangedError struct {
	Changed []IdentityResult
}

func (e *IdentityChangedError) Error() string {
	tools := map[string]bool{}
	for _, c := range e.Changed {
		tools[c.Tool] = true
	}
	names := make([]string, 0, len(tools))
	for t := range tools {
		names = append(names, t)
	}
	sort.Strings(names)
	return fmt.Sprintf("oncekey: the new code changes the identity of %d recorded call(s) of %s: their repeats would be new operations "+
		"(a second effect) or fingerprint mismatches. Undo the change, or declare the older version in Policy.Previous "+
		"(see \"Changing a tool safely\" in docs/policies-and-keys.md)", len(e.Changed), strings.Join(names, ", "))
}

// Err returns an *IdentityChangedError when any call's identity changed, else nil.
func (r *IdentityReport) Err() error {
	if ch := r.Changed(); len(ch) > 0 {
		return &IdentityChangedError{Changed: ch}
	}
	return nil
}

// WriteTable writes one line per call whose identity changed or could not be verified (tool,
// field, recorded and new value, history and event), then a summary line.
func (r *IdentityReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var same, changed, unverified int
	var rows []IdentityResult
	for _, res := range r.Results {
		switch res.Status {
		case IdentitySame:
			same++
			continue
		case IdentityChanged:
			changed++
		default:
			unverified++
		}
		rows = append(rows, res)
	}
	if len(rows) > 0 {
		fmt.Fprintln(tw, "STATUS\tTOOL\tFIELD\tWAS\tNOW\tHISTORY\tEVENT\tNOTE")
		for _, res := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t#%d\t%s\n", res.Status, res.Tool, dash(res.Field), dash(clip(res.Was)), dash(clip(res.Now)),
				res.History, res.EventID, res.Note)
		}
	}
	fmt.Fprintf(tw, "%d call(s): %d same, %d changed, %d unverified\n", len(r.Results), same, changed, unverified)
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip shortens a value for the table.
func clip(s string) string {
	const max = 48
	if len(s) > max {
		return s[:max-1] + "…"
	}
	return s
}

// CheckIdentityFiles reads the histories in the files at paths (ReadHistoryFile) and checks
// them with CheckIdentity.
func CheckIdentityFiles(ctx context.Context, reg *oncekey.Registry, opts IdentityOptions, paths ...string) (*IdentityReport, error) {
	if len(paths) == 0 {
		return nil, errors.New("oncekey: check identity: no history files given")
	}
	hs := make([]History, 0, len(paths))
	for _, p := range paths {
		h, err := ReadHistoryFile(p)
		if err != nil {
			return nil, err
		}
		hs = append(hs, h)
	}
	return CheckIdentity(ctx, reg, opts, hs...)
}

// CheckIdentity derives, with reg (the new code's Registry), the operation key, fingerprint and
// version of every call of a protected tool in the recorded histories, from the call's input as
// the new code's worker decodes it, and compares them with what the call recorded: the key, and
// the fingerprint and version in its result's metadata (or, for a call whose history does not
// hold them, in the record under its key in opts.Store). A call the new code gives another
// identity, accepting one of Policy.Previous's, is IdentityChanged, with the field that made the
// difference; report.Err() is then non-nil. Run it before a deploy against a sample of
// production histories, beside the SDK's WorkflowReplayer (which checks the workflow side).
//
// It returns a *HistoryError, and no report, for no histories or a history that holds no call of
// a protected tool (RecordedCalls); and the store's error when opts.Store fails.
func CheckIdentity(ctx context.Context, reg *oncekey.Registry, opts IdentityOptions, histories ...History) (*IdentityReport, error) {
	if len(histories) == 0 {
		return nil, &HistoryError{Name: "(none)", Reason: "no histories given: a check of nothing would pass"}
	}
	if opts.DataConverter == nil {
		opts.DataConverter = converter.GetDefaultDataConverter()
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	rep := &IdentityReport{}
	for _, h := range histories {
		calls, err := RecordedCalls(h, opts.DataConverter)
		if err != nil {
			return nil, err
		}
		for _, c := range calls {
			res, err := checkCall(ctx, reg, opts, c)
			if err != nil {
				return nil, err
			}
			rep.Results = append(rep.Results, res)
		}
	}
	return rep, nil
}

// checkCall compares one recorded call with what reg derives for it.
func checkCall(ctx context.Context, reg *oncekey.Registry, opts IdentityOptions, c RecordedCall) (IdentityResult, error) {
	res := IdentityResult{RecordedCall: c, Tool: c.ActivityType}
	changed := func(field, was, now, note string) (IdentityResult, error) {
		res.Status, res.Field, res.Was, res.Now, res.Note = IdentityChanged, field, was, now, note
		return res, nil
	}
	received, doc, err := asReceived(reg, opts.DataConverter, c)
	if err != nil {
		return changed("input", "decoded", "does not decode", err.Error())
	}
	r, ok, err := reg.Resolve(c.ActivityType, doc)
	if err != nil {
		return changed("input", "canonical JSON", "none", err.Error())
	}
	res.Tool = r.Tool
	if !ok || !r.Policy.Effect.Claimed() {
		now := "no policy"
		if ok {
			now = r.Policy.Effect.String()
		}
		return changed("policy", "claimed", now, "a repeat would run with no claim")
	}
	old, _, err := reg.Resolve(c.ActivityType, c.Args)
	if err != nil {
		old = oncekey.Resolved{Tool: c.ActivityType, Args: c.Args}
	}
	op := oncekey.Operation{Namespace: opts.Namespace, Tenant: c.Tenant, WorkflowID: c.WorkflowID, RunID: c.RunID, ActivityID: c.ActivityID,
		FirstActivityID: c.FirstActivityID, StepID: c.StepID, Tool: r.Tool, ActivityType: c.ActivityType, Args: received, ArgsJSON: r.Args}
	ids, err := oncekey.Identities(r.Policy, op, opts.FingerprintSecret)
	if err != nil {
		return changed("key", "a key", "none", err.Error())
	}
	res.NewKey = ids[0].Key
	if c.Key == "" {
		res.Status, res.Note = IdentityUnverified, "the history records no key for the call ("+c.Ended+")"
		return res, nil
	}
	if old.Tool != r.Tool {
		return changed("tool", old.Tool, r.Tool, "the Route names another tool for the same call")
	}
	i := slices.IndexFunc(ids, func(id oncekey.Identity) bool { return id.Key == c.Key })
	if i < 0 {
		// Which part moved: the arguments (the recorded document keys to the recorded key under
		// the new policy), or the key's other parts.
		oldOp := op
		oldOp.ArgsJSON = old.Args
		if k, err := oncekey.Key(r.Policy, oldOp); err == nil && k == c.Key {
			field, was, now, note := argsDiff(old.Args, r.Args, r.Policy.Exclude)
			return changed(field, was, now, note)
		}
		return changed("key", c.Key, ids[0].Key, "the key strategy, Exclude, tenant or namespace differs (IdentityOptions.Namespace)")
	}
	rec, note, err := recordedIdentity(ctx, opts, c)
	if err != nil {
		return res, err
	}
	res.Note = note
	if rec == nil {
		res.Status = IdentitySame
		return res, nil
	}
	keyed := strings.HasPrefix(rec.Fingerprint, oncekey.KeyedFingerprintPrefix)
	if slices.ContainsFunc(ids, func(id oncekey.Identity) bool {
		return id.Key == c.Key && (id.Fingerprint == rec.Fingerprint || keyed && len(opts.FingerprintSecret) == 0 && id.Version == rec.Version)
	}) {
		res.Status = IdentitySame
		if keyed && len(opts.FingerprintSecret) == 0 {
			res.Note = "fingerprint keyed: give IdentityOptions.FingerprintSecret to compare it"
		}
		return res, nil
	}
	if rec.Version != ids[i].Version {
		return changed("Version", quoteVersion(rec.Version), quoteVersion(ids[i].Version),
			"records of the older version are refused as fingerprint mismatches; declare it in Policy.Previous")
	}
	oldOp := op
	oldOp.ArgsJSON = old.Args
	p := r.Policy
	p.Version = rec.Version
	if fp, err := oncekey.KeyedFingerprint(p, oldOp, opts.FingerprintSecret); err == nil && fp == rec.Fingerprint {
		field, was, now, note := argsDiff(old.Args, r.Args, r.Policy.Exclude)
		return changed(field, was, now, note)
	}
	return changed("fingerprint", "recorded", "other", "Exclude or the fingerprint secret differs (IdentityOptions.FingerprintSecret)")
}

// recordedIdentity returns the fingerprint and version c was claimed with: from the history when
// it records them, else from the record in opts.Store; nil (with a note) when neither has them.
func recordedIdentity(ctx context.Context, opts IdentityOptions, c RecordedCall) (*oncekey.Identity, string, error) {
	if c.Versioned && c.Fingerprint != "" {
		return &oncekey.Identity{Key: c.Key, Fingerprint: c.Fingerprint, Version: c.Version}, "", nil
	}
	if opts.Store == nil {
		return nil, "the history records no fingerprint for the call: key compared only (IdentityOptions.Store compares the record's)", nil
	}
	rec, err := opts.Store.Get(ctx, &oncekeystore.GetParams{Tenant: c.Tenant, OperationKey: c.Key})
	if errors.Is(err, oncekeystore.ErrNotFound) {
		return nil, "key matches; no record under it (past retention?), fingerprint not compared", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("oncekey: check identity: read the record of %s: %w", c.Key, err)
	}
	return &oncekey.Identity{Key: c.Key, Fingerprint: rec.Fingerprint, Version: rec.Version}, "", nil
}

func quoteVersion(v string) string { return fmt.Sprintf("%q", v) }

// asReceived returns the call's input as the new code's worker decodes it (into the tool's input
// type, when the Registry knows it) and its arguments document, made exact by the recorded
// header where the two agree.
func asReceived(reg *oncekey.Registry, dc converter.DataConverter, c RecordedCall) ([]any, json.RawMessage, error) {
	ps := c.Input.GetPayloads()
	t, ok := reg.InputType(c.ActivityType)
	if !ok || len(ps) != 1 {
		// The input type is unknown here (registered by name, or several arguments): the
		// document the workflow sent is what the worker would key.
		return nil, c.Args, nil
	}
	v := reflect.New(t)
	if err := dc.FromPayload(ps[0], v.Interface()); err != nil {
		return nil, nil, fmt.Errorf("the recorded input does not decode into %s: %w", t, err)
	}
	received := []any{v.Elem().Interface()}
	doc, err := oncekey.ExactArgs(c.ActivityType, received, c.Args)
	var mismatch *oncekey.ArgsMismatchError
	if errors.As(err, &mismatch) {
		doc, err = oncekey.CanonicalArgs(received)
	}
	if err != nil {
		return nil, nil, err
	}
	return received, doc, nil
}

// argsDiff names the first argument path (in sorted order) whose value differs between the
// recorded document was and the new one now, leaving out the excluded paths, with both values,
// and a note counting the other differences.
func argsDiff(was, now json.RawMessage, exclude []string) (field, wasV, nowV, note string) {
	var a, b any
	_ = json.Unmarshal(was, &a)
	_ = json.Unmarshal(now, &b)
	var diffs []jsonDiff
	diffJSON("", a, b, &diffs)
	diffs = slices.DeleteFunc(diffs, func(d jsonDiff) bool {
		return slices.ContainsFunc(exclude, func(x string) bool { return d.path == x || strings.HasPrefix(d.path, x+".") })
	})
	if len(diffs) == 0 {
		return "arguments", string(was), string(now), ""
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].path < diffs[j].path })
	d := diffs[0]
	if len(diffs) > 1 {
		others := make([]string, 0, len(diffs)-1)
		for _, o := range diffs[1:] {
			others = append(others, o.path)
		}
		note = "also: " + strings.Join(others, ", ")
	}
	return d.path, d.was, d.now, note
}

type jsonDiff struct{ path, was, now string }

// diffJSON appends the paths where a and b (decoded JSON) differ.
func diffJSON(path string, a, b any, out *[]jsonDiff) {
	am, aObj := a.(map[string]any)
	bm, bObj := b.(map[string]any)
	if aObj && bObj {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			av, aok := am[k]
			bv, bok := bm[k]
			switch {
			case !aok:
				*out = append(*out, jsonDiff{p, "absent", jsonText(bv)})
			case !bok:
				*out = append(*out, jsonDiff{p, jsonText(av), "absent"})
			default:
				diffJSON(p, av, bv, out)
			}
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		p := path
		if p == "" {
			p = "arguments"
		}
		*out = append(*out, jsonDiff{p, jsonText(a), jsonText(b)})
	}
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
