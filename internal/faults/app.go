package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"go.temporal.io/sdk/activity"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// Tool names. Several names share one implementation and differ in policy.
const (
	// ToolCreate creates a ticket. Effectful; Verify refuses a receipt without an ID; no receipt
	// lookup, so an unknown outcome waits for a person.
	ToolCreate = "tickets.create"
	// ToolCreateReceipt is ToolCreate with a Reconcile hook that looks the ticket up downstream
	// by operation key.
	ToolCreateReceipt = "tickets.create_with_receipt"
	// ToolCreateShared is ToolCreateReceipt keyed by the request ID alone (an explicit business
	// key), so workflows that share a request share one operation; it waits 300ms for a live
	// claim before answering in_flight.
	ToolCreateShared = "tickets.create_shared"
	// ToolCreateShortRetention is ToolCreate with the shortest retention its lease allows (oncekey.MinRetention; 2.67s with the default 2s lease) and a 1h tombstone.
	ToolCreateShortRetention = "tickets.create_short_retention"
	// ToolUpsert creates a ticket on a downstream that deduplicates by operation key. Idempotent.
	ToolUpsert = "tickets.upsert"
	// ToolRefund issues a refund. Effectful, with an Authorize hook asking the downstream's
	// authorization service about the customer before every effect and every replay.
	ToolRefund = "refunds.issue"
	// ToolExportSubmit submits an export job. Effectful, with a receipt lookup by key.
	ToolExportSubmit = "exports.submit"
	// ToolExportStatus polls the export job submitted under an operation key. ReadOnly.
	ToolExportStatus = "exports.status"
	// ToolCredit adds a credit: one row in the table CreditsTable, written in oncekey's
	// transaction. Transactional (its effects are those rows, not the downstream's).
	ToolCredit = "credits.add"
)

// CreditsTable is ToolCredit's table, created in the scenario's schema by CreditsDDL.
const (
	CreditsTable = "faults_credits"
	CreditsDDL   = `CREATE TABLE IF NOT EXISTS faults_credits (id bigserial PRIMARY KEY, op_key text NOT NULL, request_id text NOT NULL)`
)

// Registered workflow names and the signal Calls waits for.
const (
	WorkflowCalls  = "faults.Calls"
	WorkflowExport = "faults.Export"
	SignalContinue = "faults.continue"
)

// Job statuses.
const (
	JobRunning = "running"
	JobDone    = "done"
)

// Request is the argument of every create tool.
type Request struct {
	// RequestID identifies the intended operation in the test (and, for ToolCreateShared, is
	// the operation key's only part).
	RequestID   string `json:"request_id"`
	Customer    string `json:"customer"`
	Subject     string `json:"subject"`
	AmountCents int64  `json:"amount_cents,omitempty"`
	// Polls is, for exports, how many polls the job needs before it is done.
	Polls int `json:"polls,omitempty"`
}

// Receipt is the downstream's answer to a create request: its effect reference and the
// operation key it was created under.
type Receipt struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	Seq       int    `json:"seq"`
	Key       string `json:"key"`
	RequestID string `json:"request_id"`
	// Status is a job's status (running, done); empty for tickets and refunds.
	Status string `json:"status,omitempty"`
}

// Tools are the tool implementations: HTTP calls to the downstream at Base.
type Tools struct {
	Base string
	// Hooks makes the tool body call the PointBody hook before its downstream call (the worker
	// adds PointClaimed and PointCompleted).
	Hooks  bool
	Worker string
	hc     *http.Client
}

// NewTools returns tools calling the downstream at base.
func NewTools(base, worker string, hooks bool) *Tools {
	return &Tools{Base: base, Hooks: hooks, Worker: worker, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// Registrar is the part of a worker the tools are registered on.
type Registrar interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Register registers the tools under their names and the workflows Calls and Export.
func (t *Tools) Register(r Registrar) {
	for _, name := range []string{ToolCreate, ToolCreateReceipt, ToolCreateShared, ToolCreateShortRetention} {
		r.RegisterActivityWithOptions(t.CreateTicket, activity.RegisterOptions{Name: name})
	}
	r.RegisterActivityWithOptions(t.UpsertTicket, activity.RegisterOptions{Name: ToolUpsert})
	r.RegisterActivityWithOptions(t.IssueRefund, activity.RegisterOptions{Name: ToolRefund})
	r.RegisterActivityWithOptions(t.SubmitExport, activity.RegisterOptions{Name: ToolExportSubmit})
	r.RegisterActivityWithOptions(t.ExportStatus, activity.RegisterOptions{Name: ToolExportStatus})
	r.RegisterActivityWithOptions(t.AddCredit, activity.RegisterOptions{Name: ToolCredit})
	r.RegisterWorkflowWithOptions(Calls, workflow.RegisterOptions{Name: WorkflowCalls})
	r.RegisterWorkflowWithOptions(Export, workflow.RegisterOptions{Name: WorkflowExport})
}

// CreateTicket creates a ticket (POST /tickets), passing the operation key downstream.
func (t *Tools) CreateTicket(ctx context.Context, in Request) (Receipt, error) {
	return t.create(ctx, "/tickets", in)
}

// UpsertTicket creates a ticket on the deduplicating endpoint (POST /tickets/upsert).
func (t *Tools) UpsertTicket(ctx context.Context, in Request) (Receipt, error) {
	return t.create(ctx, "/tickets/upsert", in)
}

// IssueRefund issues a refund (POST /refunds).
func (t *Tools) IssueRefund(ctx context.Context, in Request) (Receipt, error) {
	return t.create(ctx, "/refunds", in)
}

// SubmitExport submits an export job (POST /jobs); the downstream answers at once with the job's
// ID and status running.
func (t *Tools) SubmitExport(ctx context.Context, in Request) (Receipt, error) {
	return t.create(ctx, "/jobs", in)
}

// ExportStatus polls the job submitted under key (GET /jobs?key=).
func (t *Tools) ExportStatus(ctx context.Context, key string) (Receipt, error) {
	var r Receipt
	status, err := t.get(ctx, "/jobs?key="+url.QueryEscape(key), &r)
	if err != nil {
		return Receipt{}, err
	}
	if status != http.StatusOK {
		return Receipt{}, fmt.Errorf("faults: poll job %s: HTTP %d", key, status)
	}
	return r, nil
}

// AddCredit writes one row of CreditsTable through the transaction oncekey gives it (pgstore.Tx),
// then calls the PointBody hook: a worker killed there has written nothing that commits.
func (t *Tools) AddCredit(ctx context.Context, in Request) (Receipt, error) {
	key, ok := oncekey.OperationKey(ctx)
	if !ok {
		return Receipt{}, oncekey.NotApplied(errors.New("faults: no operation key in the tool's context"))
	}
	tx, err := pgstore.Tx(ctx)
	if err != nil {
		return Receipt{}, oncekey.NotApplied(err)
	}
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO `+CreditsTable+` (op_key, request_id) VALUES ($1, $2) RETURNING id`, key, in.RequestID).Scan(&id); err != nil {
		return Receipt{}, err
	}
	if t.Hooks {
		if err := t.Hook(ctx, PointBody, key, in.RequestID); err != nil {
			return Receipt{}, err
		}
	}
	return Receipt{ID: fmt.Sprintf("C-%d", id), Kind: "credit", Key: key, RequestID: in.RequestID}, nil
}

// create makes one create request. Only a well-formed answer is a result; a transport error or
// an answer that does not decode says nothing about whether the downstream committed, so it is
// a plain error (for an Effectful tool: unknown). A 503 is the downstream saying it committed
// nothing: NotApplied.
func (t *Tools) create(ctx context.Context, path string, in Request) (Receipt, error) {
	key, ok := oncekey.OperationKey(ctx)
	if !ok {
		return Receipt{}, oncekey.NotApplied(errors.New("faults: no operation key in the tool's context"))
	}
	if t.Hooks {
		if err := t.Hook(ctx, PointBody, key, in.RequestID); err != nil {
			return Receipt{}, oncekey.NotApplied(err)
		}
	}
	body, err := json.Marshal(in)
	if err != nil {
		return Receipt{}, oncekey.NotApplied(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Base+path, bytes.NewReader(body))
	if err != nil {
		return Receipt{}, oncekey.NotApplied(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderOperationKey, key)
	resp, err := t.hc.Do(req)
	if err != nil {
		return Receipt{}, fmt.Errorf("faults: POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Receipt{}, fmt.Errorf("faults: POST %s: read answer: %w", path, err)
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated:
		var r Receipt
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return Receipt{}, fmt.Errorf("faults: POST %s: malformed answer (%d bytes): %w", path, len(b), err)
		}
		return r, nil // Verify judges whether it is complete
	case http.StatusServiceUnavailable:
		return Receipt{}, oncekey.NotApplied(fmt.Errorf("faults: POST %s: HTTP 503: %s", path, bytes.TrimSpace(b)))
	}
	return Receipt{}, fmt.Errorf("faults: POST %s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(b))
}

func (t *Tools) get(ctx context.Context, path string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.Base+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("faults: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return 0, fmt.Errorf("faults: GET %s: %w", path, err)
	}
	return resp.StatusCode, nil
}

// Hook calls the downstream's hook for point p; it returns when the downstream lets it go (at
// once unless a test armed p for this request).
func (t *Tools) Hook(ctx context.Context, p Point, key, requestID string) error {
	q := url.Values{"point": {string(p)}, "key": {key}, "req": {requestID}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Base+"/hook?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return fmt.Errorf("faults: hook %s: %w", p, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}

// Report sends a worker event to the downstream's event sink, without blocking the caller.
func (t *Tools) Report(e WorkerEvent) {
	go func() {
		b, _ := json.Marshal(e)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Base+"/events", bytes.NewReader(b))
		if err != nil {
			return
		}
		if resp, err := t.hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
}

// lookupReceipt is the receipt lookup of the tools that have one: the downstream's own record
// under the operation key. Not found is not proof of anything (a held request may still commit):
// a person decides then.
func (t *Tools) lookupReceipt(path string) func(context.Context, oncekey.ReconcileRequest) (oncekey.Receipt, error) {
	return func(ctx context.Context, r oncekey.ReconcileRequest) (oncekey.Receipt, error) {
		var rec Receipt
		status, err := t.get(ctx, path+"key="+url.QueryEscape(r.OperationKey), &rec)
		if err != nil {
			return oncekey.Receipt{}, err
		}
		if status != http.StatusOK {
			return oncekey.Receipt{Outcome: oncekey.ReceiptNotFound, Note: fmt.Sprintf("downstream answered %d", status)}, nil
		}
		return oncekey.Receipt{Outcome: oncekey.ReceiptApplied, Result: rec, EffectReference: rec.ID, Note: "found downstream by operation key"}, nil
	}
}

func (t *Tools) authorize(ctx context.Context, op oncekey.Operation) error {
	r, ok := firstRequest(op.Args)
	if !ok {
		return fmt.Errorf("faults: authorize: unexpected arguments %T", op.Args)
	}
	var v struct {
		Allowed bool `json:"allowed"`
	}
	status, err := t.get(ctx, "/authz?customer="+url.QueryEscape(r.Customer), &v)
	if err != nil {
		return err
	}
	if status != http.StatusOK || !v.Allowed {
		return fmt.Errorf("customer %s is not authorized (HTTP %d)", r.Customer, status)
	}
	return nil
}

func firstRequest(args []any) (Request, bool) {
	if len(args) == 0 {
		return Request{}, false
	}
	switch r := args[0].(type) {
	case Request:
		return r, true
	case *Request:
		return *r, r != nil
	}
	return Request{}, false
}

// verifyReceipt refuses a result that is not a complete receipt: an answer without an effect
// reference is never read as success.
func verifyReceipt(_ context.Context, _ oncekey.Operation, result any) error {
	r, ok := result.(Receipt)
	if !ok {
		return fmt.Errorf("faults: result is %T, not a Receipt", result)
	}
	if r.ID == "" || r.Key == "" {
		return errors.New("faults: incomplete receipt: no effect reference")
	}
	return nil
}

// NewRegistry returns the policies of the tools, with lease as every claimed tool's lease.
func NewRegistry(t *Tools, lease time.Duration) (*oncekey.Registry, error) {
	shared := oncekey.ExplicitKey(func(op oncekey.Operation) (string, error) {
		r, ok := firstRequest(op.Args)
		if !ok || r.RequestID == "" {
			return "", fmt.Errorf("faults: no request ID in %T", op.Args)
		}
		return "request:" + r.RequestID, nil
	})
	reg := oncekey.NewRegistry()
	for name, p := range map[string]oncekey.Policy{
		ToolCreate:               {Effect: oncekey.Effectful, Lease: lease, Verify: verifyReceipt},
		ToolCreateReceipt:        {Effect: oncekey.Effectful, Lease: lease, Verify: verifyReceipt, Reconcile: t.lookupReceipt("/receipts?")},
		ToolCreateShared:         {Effect: oncekey.Effectful, Lease: lease, Verify: verifyReceipt, Reconcile: t.lookupReceipt("/receipts?"), Key: shared, WaitInFlight: 300 * time.Millisecond},
		ToolCreateShortRetention: {Effect: oncekey.Effectful, Lease: lease, Verify: verifyReceipt, Retention: oncekey.MinRetention(lease), Tombstone: time.Hour},
		ToolUpsert:               {Effect: oncekey.Idempotent, Lease: lease},
		ToolRefund:               {Effect: oncekey.Effectful, Lease: lease, Verify: verifyReceipt, Authorize: t.authorize},
		ToolExportSubmit:         {Effect: oncekey.Effectful, Lease: lease, Verify: verifyReceipt, Reconcile: t.lookupReceipt("/jobs?peek=1&")},
		ToolExportStatus:         {Effect: oncekey.ReadOnly},
		ToolCredit:               {Effect: oncekey.Transactional, Lease: lease, Verify: verifyReceipt},
	} {
		if err := reg.Set(name, p); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// Call is one tool call of the Calls workflow.
type Call struct {
	Tool    string  `json:"tool"`
	StepID  string  `json:"step_id,omitempty"`
	Request Request `json:"request"`
	// WaitSignal makes the workflow wait for SignalContinue before this call.
	WaitSignal bool `json:"wait_signal,omitempty"`
	// TaskQueue is the activity's task queue; empty means the workflow's.
	TaskQueue string `json:"task_queue,omitempty"`
}

// CallsInput is the input of the Calls workflow.
type CallsInput struct {
	Calls        []Call        `json:"calls"`
	StartToClose time.Duration `json:"start_to_close"`
	// RetryInitial is the first backoff of the workflow side's retry loop. Defaults to 200ms.
	RetryInitial time.Duration `json:"retry_initial,omitempty"`
}

// CallResult is what the workflow (an agent) was told about one call.
type CallResult struct {
	Label   oncekey.ToolResult `json:"label"`
	Receipt Receipt            `json:"receipt"`
	// Error is the Go error's text (operator detail the label leaves out), "" on success.
	Error string `json:"error,omitempty"`
}

func activityContext(ctx workflow.Context, startToClose, retryInitial time.Duration, taskQueue string) workflow.Context {
	if retryInitial <= 0 {
		retryInitial = 200 * time.Millisecond
	}
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           taskQueue,
		StartToCloseTimeout: startToClose,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: retryInitial, MaximumInterval: 2 * time.Second},
	})
}

// Calls makes in.Calls one after the other and returns what each was labelled. A failed call
// does not stop the workflow: its label is the answer.
func Calls(ctx workflow.Context, in CallsInput) ([]CallResult, error) {
	sig := workflow.GetSignalChannel(ctx, SignalContinue)
	out := make([]CallResult, 0, len(in.Calls))
	for _, c := range in.Calls {
		if c.WaitSignal {
			sig.Receive(ctx, nil)
		}
		actx := activityContext(ctx, in.StartToClose, in.RetryInitial, c.TaskQueue)
		if c.StepID != "" {
			actx = oncekey.WithStepID(actx, c.StepID)
		}
		var r Receipt
		err := workflow.ExecuteActivity(actx, c.Tool, c.Request).Get(ctx, &r)
		label := oncekey.Label(nil, err)
		if err == nil {
			label.OperationKey, label.EffectReference = r.Key, r.ID
		}
		cr := CallResult{Label: label, Receipt: r}
		if err != nil {
			cr.Error = err.Error()
		}
		out = append(out, cr)
	}
	return out, nil
}

// ExportInput is the input of the Export workflow.
type ExportInput struct {
	StepID       string        `json:"step_id"`
	Request      Request       `json:"request"`
	StartToClose time.Duration `json:"start_to_close"`
	PollEvery    time.Duration `json:"poll_every"`
}

// ExportOutput is what the Export workflow saw.
type ExportOutput struct {
	// Labels are what the agent was told after the submission and after each poll: in_flight
	// (poll by the same operation key) while the job runs, applied once it is done.
	Labels []oncekey.ToolResult `json:"labels"`
	// Submits are the answers of the submission and of its repeat (a replay).
	Submits []Receipt `json:"submits"`
	Final   Receipt   `json:"final"`
}

// Export submits an export job, repeats the submission once while the job runs (as a model that
// lost track would), and polls the job by its operation key until it is done.
func Export(ctx workflow.Context, in ExportInput) (ExportOutput, error) {
	var out ExportOutput
	actx := activityContext(ctx, in.StartToClose, 0, "")
	sctx := oncekey.WithStepID(actx, in.StepID)
	submit := func() (Receipt, error) {
		var r Receipt
		err := workflow.ExecuteActivity(sctx, ToolExportSubmit, in.Request).Get(ctx, &r)
		return r, err
	}
	r, err := submit()
	if err != nil {
		return out, err
	}
	out.Submits = append(out.Submits, r)
	for polls := 0; ; polls++ {
		if r.Status == JobDone {
			out.Labels = append(out.Labels, oncekey.ToolResult{Status: oncekey.OutcomeApplied, OperationKey: r.Key,
				EffectReference: r.ID, SafeToRepeat: true, NextAction: oncekey.NextNone})
			out.Final = r
			return out, nil
		}
		out.Labels = append(out.Labels, oncekey.ToolResult{Status: oncekey.OutcomeInFlight, OperationKey: r.Key,
			EffectReference: r.ID, SafeToRepeat: true, NextAction: oncekey.NextPoll, RetryAfter: in.PollEvery})
		if polls == 1 {
			again, err := submit()
			if err != nil {
				return out, err
			}
			out.Submits = append(out.Submits, again)
		}
		if err := workflow.Sleep(ctx, in.PollEvery); err != nil {
			return out, err
		}
		var st Receipt
		if err := workflow.ExecuteActivity(actx, ToolExportStatus, r.Key).Get(ctx, &st); err != nil {
			return out, err
		}
		r = st
	}
}

// hookInterceptor calls PointClaimed between oncekey's claim and the tool body. It must be
// installed inside (after) oncekey's interceptor.
type hookInterceptor struct {
	tinterceptor.WorkerInterceptorBase
	tools *Tools
}

func (h *hookInterceptor) InterceptActivity(ctx context.Context, next tinterceptor.ActivityInboundInterceptor) tinterceptor.ActivityInboundInterceptor {
	return &hookInbound{ActivityInboundInterceptorBase: tinterceptor.ActivityInboundInterceptorBase{Next: next}, tools: h.tools}
}

type hookInbound struct {
	tinterceptor.ActivityInboundInterceptorBase
	tools *Tools
}

func (h *hookInbound) ExecuteActivity(ctx context.Context, in *tinterceptor.ExecuteActivityInput) (any, error) {
	if key, ok := oncekey.OperationKey(ctx); ok {
		r, _ := firstRequest(in.Args)
		if err := h.tools.Hook(ctx, PointClaimed, key, r.RequestID); err != nil {
			return nil, oncekey.NotApplied(err)
		}
	}
	return h.Next.ExecuteActivity(ctx, in)
}

// BeginTx begins a Transactional call's transaction in the store, whose Commit calls PointTxCommit
// before the completion and COMMIT, and PointCompleted after a COMMIT that recorded applied.
func (s *hookStore) BeginTx(ctx context.Context, p *oncekeystore.BeginTxParams) (oncekeystore.StoreTx, error) {
	txs, ok := s.Store.(oncekeystore.TxStore)
	if !ok {
		return nil, &oncekeystore.TransactionalStoreError{Tool: p.Tool, Store: fmt.Sprintf("%T", s.Store)}
	}
	tx, err := txs.BeginTx(ctx, p)
	if err != nil {
		return nil, err
	}
	return &hookTx{StoreTx: tx, tools: s.tools}, nil
}

type hookTx struct {
	oncekeystore.StoreTx
	tools *Tools
}

func (h *hookTx) Commit(ctx context.Context, p *oncekeystore.CompleteParams) (*oncekeystore.Record, error) {
	_ = h.tools.Hook(ctx, PointTxCommit, p.OperationKey, "")
	rec, err := h.StoreTx.Commit(ctx, p)
	if err == nil && p.Status == oncekeystore.StatusApplied {
		_ = h.tools.Hook(ctx, PointCompleted, p.OperationKey, "")
	}
	return rec, err
}

// hookStore calls PointCompleted after a Complete that recorded applied.
type hookStore struct {
	oncekeystore.Store
	tools *Tools
}

func (s *hookStore) Complete(ctx context.Context, p *oncekeystore.CompleteParams) (*oncekeystore.Record, error) {
	rec, err := s.Store.Complete(ctx, p)
	if err == nil && p.Status == oncekeystore.StatusApplied {
		_ = s.tools.Hook(ctx, PointCompleted, p.OperationKey, "")
	}
	return rec, err
}
