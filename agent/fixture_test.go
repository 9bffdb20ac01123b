package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/agent"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// books is the fake downstream: it counts its own effects per tool, apart from anything oncekey
// reports.
type books struct {
	mu      sync.Mutex
	effects map[string]int
	bodies  map[string]int
	gate    chan struct{}
	once    sync.Once
}

func newBooks() *books {
	return &books{effects: map[string]int{}, bodies: map[string]int{}, gate: make(chan struct{})}
}

func (b *books) effect(tool string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bodies[tool]++
	b.effects[tool]++
	return b.effects[tool]
}

func (b *books) body(tool string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bodies[tool]++
}

func (b *books) count(tool string) (effects, bodies int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.effects[tool], b.bodies[tool]
}

func (b *books) open() { b.once.Do(func() { close(b.gate) }) }

// InvoiceRequest is what a model proposes for SendInvoice; TraceID is new in every proposal.
type InvoiceRequest struct {
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
	TraceID     string `json:"trace_id"`
}

type Invoice struct {
	ID          string `json:"id"`
	AmountCents int64  `json:"amount_cents"`
}

// SendInvoice is Effectful: every body run is an invoice sent.
func (b *books) SendInvoice(ctx context.Context, in InvoiceRequest) (Invoice, error) {
	id := fmt.Sprintf("INV-%d", b.effect("SendInvoice"))
	_ = oncekey.SetEffectReference(ctx, id)
	return Invoice{ID: id, AmountCents: in.AmountCents}, nil
}

// ChargeOrder takes its input as map[string]any, as agent tools often do.
func (b *books) ChargeOrder(ctx context.Context, in map[string]any) (string, error) {
	return fmt.Sprintf("CH-%d", b.effect("ChargeOrder")), nil
}

// ChargeAny and ChargeRaw take their input as any and as json.RawMessage; ChargeTyped as a struct.
func (b *books) ChargeAny(ctx context.Context, in any) (string, error) {
	return fmt.Sprintf("CA-%d", b.effect("ChargeAny")), nil
}

func (b *books) ChargeRaw(ctx context.Context, in json.RawMessage) (string, error) {
	return fmt.Sprintf("CR-%d", b.effect("ChargeRaw")), nil
}

type ChargeInput struct {
	Order int64 `json:"order"`
}

func (b *books) ChargeTyped(ctx context.Context, in ChargeInput) (string, error) {
	return fmt.Sprintf("CT-%d", b.effect("ChargeTyped")), nil
}

type OrderInput struct {
	OrderID string `json:"order_id"`
}

// RefundOrder and CancelOrder are keyed by the order ID (ExplicitKey).
func (b *books) RefundOrder(ctx context.Context, in OrderInput) (string, error) {
	return fmt.Sprintf("RF-%d", b.effect("RefundOrder")), nil
}

func (b *books) CancelOrder(ctx context.Context, in OrderInput) (string, error) {
	return fmt.Sprintf("CX-%d", b.effect("CancelOrder")), nil
}

// SlowReport (Idempotent) waits for the gate, so a second identical call finds it in flight.
func (b *books) SlowReport(ctx context.Context, in OrderInput) (string, error) {
	select {
	case <-b.gate:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return fmt.Sprintf("RP-%d", b.effect("SlowReport")), nil
}

// PostNote (Idempotent) has a one-second retention, so a later repeat finds a tombstone.
func (b *books) PostNote(ctx context.Context, in OrderInput) (string, error) {
	return fmt.Sprintf("N-%d", b.effect("PostNote")), nil
}

// WireMoney (Effectful) loses its response: the outcome is unknown.
func (b *books) WireMoney(ctx context.Context, in OrderInput) (string, error) {
	b.effect("WireMoney")
	return "", errors.New("read tcp 10.0.0.7:443: connection reset by peer")
}

// ShipOrder (Effectful) fails definitely.
func (b *books) ShipOrder(ctx context.Context, in OrderInput) (string, error) {
	b.body("ShipOrder")
	return "", oncekey.Failed(errors.New("warehouse says: no such order"))
}

// McpCall is the input of an MCP-proxy-style activity: one activity type for every tool of a
// toolset, the tool named in the input, a call ID the framework makes up per proposal.
type McpCall struct {
	Toolset string          `json:"toolset"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	Ctx     struct {
		FunctionCallID string `json:"function_call_id"`
	} `json:"ctx"`
}

type FileArgs struct {
	Path string `json:"path"`
}

// CallMcpTool runs the named tool; each body run of delete_file is an effect.
func (b *books) CallMcpTool(ctx context.Context, in McpCall) (string, error) {
	switch in.Tool {
	case "read_file":
		b.body("read_file")
		return "contents", nil
	case "delete_file":
		return fmt.Sprintf("deleted %d", b.effect("delete_file")), nil
	}
	return "", fmt.Errorf("no tool %s", in.Tool)
}

// ModelCall is one tool call a model proposed.
type ModelCall struct {
	Tool string `json:"tool"`
	// Args is the arguments text exactly as the model gave it (not necessarily JSON).
	Args   string `json:"args"`
	StepID string `json:"step_id,omitempty"`
	// Async starts the call without waiting for it; the next call that is not async waits for
	// all of them.
	Async bool `json:"async,omitempty"`
	// SleepBefore is a workflow timer before the call.
	SleepBefore time.Duration `json:"sleep_before,omitempty"`
	// Mcp schedules the call through CallMcpTool, as an MCP proxy would.
	Mcp bool `json:"mcp,omitempty"`
	// OneAttempt schedules the call with one attempt (no Temporal retry).
	OneAttempt bool `json:"one_attempt,omitempty"`
}

// LoopInput is a scripted model conversation.
type LoopInput struct {
	Calls []ModelCall `json:"calls"`
	// ContinueAsNewAfter continues as new after that many calls (0: never), carrying the rest.
	ContinueAsNewAfter int `json:"continue_as_new_after,omitempty"`
	// Done carries the answers of earlier runs across continue-as-new.
	Done []Answer `json:"done,omitempty"`
}

// Answer is what the loop hands back to the model for one call, and the Go error for the log.
type Answer struct {
	Result oncekey.ToolResult `json:"result"`
	Err    string             `json:"err,omitempty"`
}

// LoopWorkflow is an agent loop: each proposed call runs through agent.Call (or agent.Await for
// the MCP proxy) and its ToolResult is what the model would read next turn.
func LoopWorkflow(ctx workflow.Context, in LoopInput) ([]Answer, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 20 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 2},
	})
	out := in.Done
	var pending []func()
	wait := func() {
		for _, f := range pending {
			f()
		}
		pending = nil
	}
	for i, c := range in.Calls {
		if in.ContinueAsNewAfter > 0 && i == in.ContinueAsNewAfter {
			wait()
			return nil, workflow.NewContinueAsNewError(ctx, LoopWorkflow, LoopInput{Calls: in.Calls[i:], Done: out})
		}
		if c.SleepBefore > 0 {
			if err := workflow.Sleep(ctx, c.SleepBefore); err != nil {
				return nil, err
			}
		}
		cctx := ctx
		if c.OneAttempt {
			ao := workflow.GetActivityOptions(ctx)
			ao.RetryPolicy = &temporal.RetryPolicy{MaximumAttempts: 1}
			cctx = workflow.WithActivityOptions(ctx, ao)
		}
		if c.StepID != "" {
			cctx = oncekey.WithStepID(cctx, c.StepID)
		}
		run := func(ctx workflow.Context) Answer {
			var tr oncekey.ToolResult
			var err error
			if c.Mcp {
				var args McpCall
				args.Toolset, args.Tool, args.Args = "files", c.Tool, json.RawMessage(c.Args)
				args.Ctx.FunctionCallID = fmt.Sprintf("fc-%d", i)
				tr, err = agent.Await(ctx, workflow.ExecuteActivity(ctx, "CallMcpTool", args))
			} else {
				tr, err = agent.Call(ctx, registry, c.Tool, json.RawMessage(c.Args))
			}
			a := Answer{Result: tr}
			if err != nil {
				a.Err = err.Error()
			}
			return a
		}
		if c.Async {
			idx := len(out)
			out = append(out, Answer{})
			f, s := workflow.NewFuture(ctx)
			workflow.Go(cctx, func(gctx workflow.Context) { out[idx] = run(gctx); s.Set(nil, nil) })
			pending = append(pending, func() { _ = f.Get(ctx, nil) })
			continue
		}
		wait()
		out = append(out, run(cctx))
	}
	wait()
	return out, nil
}

// registry is the Registry the test workers' interceptors and LoopWorkflow share, as a worker's
// workflows and interceptor do. Policies are found by tool name, so one set of registrations
// serves every test's own books.
var registry = func() *oncekey.Registry {
	r := oncekey.NewRegistry()
	b := newBooks()
	orderKey := oncekey.ExplicitKey(func(op oncekey.Operation) (string, error) { return op.Args[0].(OrderInput).OrderID, nil })
	must(r.Set(b.SendInvoice, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"trace_id"}}))
	must(r.Set(b.ChargeOrder, oncekey.Policy{Effect: oncekey.Effectful}))
	must(r.Set(b.ChargeAny, oncekey.Policy{Effect: oncekey.Effectful}))
	must(r.Set(b.ChargeRaw, oncekey.Policy{Effect: oncekey.Effectful}))
	must(r.Set(b.ChargeTyped, oncekey.Policy{Effect: oncekey.Effectful}))
	must(r.Set(b.RefundOrder, oncekey.Policy{Effect: oncekey.Effectful, Key: orderKey}))
	must(r.Set(b.CancelOrder, oncekey.Policy{Effect: oncekey.Effectful, Key: orderKey}))
	must(r.Set(b.SlowReport, oncekey.Policy{Effect: oncekey.Idempotent, WaitInFlight: -1}))
	must(r.Set(b.PostNote, oncekey.Policy{Effect: oncekey.Idempotent, Lease: 500 * time.Millisecond, Retention: time.Second, Tombstone: time.Hour}))
	must(r.Set(b.WireMoney, oncekey.Policy{Effect: oncekey.Effectful}))
	must(r.Set(b.ShipOrder, oncekey.Policy{Effect: oncekey.Effectful}))
	must(r.Route(b.CallMcpTool, oncekey.Route{ToolPaths: []string{"tool"}, Args: "args"}))
	must(oncekey.SetTool[FileArgs](r, "read_file", oncekey.Policy{Effect: oncekey.ReadOnly}))
	must(oncekey.SetTool[FileArgs](r, "delete_file", oncekey.Policy{Effect: oncekey.Effectful}))
	return r
}()

func must(err error) {
	if err != nil {
		panic(err)
	}
}

type env struct {
	c     client.Client
	tq    string
	b     *books
	store oncekeystore.Store

	mu     sync.Mutex
	events []worker.Event
}

// setup starts a worker on the dev server with oncekey's plugin on its client and a fresh
// Postgres schema as the store.
func setup(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	t.Parallel()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	e := &env{b: newBooks(), store: pgstore.New(pool, nil)}
	plugin, err := worker.NewPlugin(worker.Options{
		Store: e.store, Registry: registry, EscalationTimeout: 2 * time.Second,
		OnEvent: func(ev worker.Event) {
			e.mu.Lock()
			e.events = append(e.events, ev)
			e.mu.Unlock()
			if ev.Outcome == oncekey.OutcomeInFlight {
				e.b.open() // the second call has been told; let the first finish
			}
		},
	})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{},
		Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	e.c, e.tq = c, "oncekey-agent-"+t.Name()
	w := sdkworker.New(c, e.tq, sdkworker.Options{})
	w.RegisterWorkflow(LoopWorkflow)
	w.RegisterActivity(e.b)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return e
}

// run runs LoopWorkflow under id and returns its answers.
func (e *env) run(t *testing.T, id string, in LoopInput) []Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: e.tq}, LoopWorkflow, in)
	require.NoError(t, err)
	var out []Answer
	require.NoError(t, r.Get(ctx, &out))
	return out
}

// records returns the store's records.
func (e *env) records(t *testing.T) []*oncekeystore.Record {
	t.Helper()
	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	return res.Records
}

type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}

func call(tool, args string) ModelCall { return ModelCall{Tool: tool, Args: args} }
