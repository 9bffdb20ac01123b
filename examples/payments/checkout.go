package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	tworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
	okworker "github.com/oncekey/oncekey/worker"
)

// tenant keys this example's records.
const tenant = "payments"

// ChargeInput is the charge tool's input.
type ChargeInput struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	// TraceID changes on every proposal; it is excluded from the fingerprint.
	TraceID string `json:"trace_id,omitempty"`
}

// Charge is the charge tool's result.
type Charge struct {
	ID          string `json:"id"`
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	// ProviderReplayed is true when the provider answered from its own stored response (the
	// request repeated a key it had already acted on).
	ProviderReplayed bool `json:"provider_replayed"`
}

// Tools holds the charge tool and counts how often its body ran.
type Tools struct {
	providerURL string
	http        *http.Client
	runs        atomic.Int64
}

// Charge charges the order through the provider, sending the operation key as the
// Idempotency-Key. Because the provider deduplicates on that key, repeating the request lands
// the same state: the tool is Idempotent, and an error after which the charge may have landed
// (a 502, a reset connection, a timeout) is safe to retry with Temporal's normal retry policy.
func (t *Tools) Charge(ctx context.Context, in ChargeInput) (Charge, error) {
	t.runs.Add(1)
	key, ok := oncekey.OperationKey(ctx)
	if !ok {
		return Charge{}, temporal.NewNonRetryableApplicationError("Charge runs only under oncekey: no operation key", "payments.NoKey", nil)
	}
	c, replayed, err := postCharge(ctx, t.http, t.providerURL, key, chargeRequest{OrderID: in.OrderID, AmountCents: in.AmountCents, Currency: in.Currency})
	var pe *ProviderError
	if errors.As(err, &pe) && pe.Status >= 400 && pe.Status < 500 {
		// The provider refused the request outright: no charge, and repeating will not help.
		return Charge{}, oncekey.Failed(err)
	}
	if err != nil {
		return Charge{}, err // 5xx or transport error: the charge may have landed; a retry with the same key finds it
	}
	return Charge{ID: c.ID, OrderID: c.OrderID, AmountCents: c.AmountCents, Currency: c.Currency, ProviderReplayed: replayed}, nil
}

// CheckoutResult is what the checkout workflow returns.
type CheckoutResult struct {
	// First is the charge tool's result; Again is the result of the same call proposed a second
	// time (answered by oncekey from the stored result).
	First, Again Charge
}

// Checkout charges one order, then proposes the same charge again, as an agent whose tool
// result went missing would.
func Checkout(ctx workflow.Context, in ChargeInput) (CheckoutResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    100 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    2 * time.Second,
			MaximumAttempts:    5,
		},
	})
	ctx = oncekey.WithStepID(ctx, "charge")
	var out CheckoutResult
	if err := workflow.ExecuteActivity(ctx, "Charge", in).Get(ctx, &out.First); err != nil {
		return out, err
	}
	again := in
	again.TraceID = in.TraceID + "-again" // excluded: same fingerprint
	if err := workflow.ExecuteActivity(ctx, "Charge", again).Get(ctx, &out.Again); err != nil {
		return out, err
	}
	return out, nil
}

// Config configures a run.
type Config struct {
	// Client is a Temporal client; the run starts its own worker on it. Required.
	Client client.Client
	// Pool is a Postgres pool whose search_path is a schema the run may migrate. Required.
	Pool *pgxpool.Pool
	// Provider is the payment provider. Required.
	Provider *Provider
}

// Report is what a run observed. Provider comes from the provider's own ledger.
type Report struct {
	WorkflowID   string
	OperationKey string
	Result       CheckoutResult
	// ToolRuns counts how often the charge tool's body ran.
	ToolRuns int
	Provider ProviderStats
	// Outcomes counts claimed calls by outcome label (the interceptor's OnEvent hook).
	Outcomes map[oncekey.Outcome]int
	// Record is the stored record of the charge.
	Record *oncekeystore.Record
	// UnknownRecords counts this tenant's records with status unknown.
	UnknownRecords int
	// ReconciliationStarted is true if a reconciliation workflow exists for the key.
	ReconciliationStarted bool
}

// Run charges one order through oncekey against cfg.Provider and reports what happened.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Client == nil || cfg.Pool == nil || cfg.Provider == nil {
		return nil, errors.New("payments: Config.Client, Pool and Provider are required")
	}
	if err := pgstore.Migrate(ctx, cfg.Pool); err != nil {
		return nil, fmt.Errorf("payments: migrate: %w", err)
	}
	store := pgstore.New(cfg.Pool, nil)
	tools := &Tools{providerURL: cfg.Provider.URL, http: &http.Client{Timeout: 5 * time.Second}}
	reg := oncekey.NewRegistry()
	if err := reg.Set(tools.Charge, oncekey.Policy{
		Effect:        oncekey.Idempotent, // the provider deduplicates on the key we send
		RequireStepID: true,
		Exclude:       []string{"trace_id"},
	}); err != nil {
		return nil, err
	}
	var (
		mu       sync.Mutex
		outcomes = map[oncekey.Outcome]int{}
	)
	plugin, err := okworker.NewPlugin(okworker.Options{
		Store:    store,
		Registry: reg,
		Tenant:   func(okworker.TenantInfo) string { return tenant },
		// The plugin goes on this worker only (not on cfg.Client), where it cannot see the
		// client's data converter: name it. cfg.Client has the SDK's default one, no codec.
		DataConverter: converter.GetDefaultDataConverter(),
		OnEvent: func(ev okworker.Event) {
			mu.Lock()
			outcomes[ev.Outcome]++
			mu.Unlock()
		},
	})
	if err != nil {
		return nil, err
	}
	tag := randomTag()
	taskQueue := "payments-" + tag
	w := tworker.New(cfg.Client, taskQueue, tworker.Options{Plugins: []tworker.Plugin{plugin}})
	w.RegisterWorkflowWithOptions(Checkout, workflow.RegisterOptions{Name: "Checkout"})
	w.RegisterActivity(tools.Charge)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("payments: start worker: %w", err)
	}
	defer w.Stop()

	rep := &Report{WorkflowID: "checkout-" + tag}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	run, err := cfg.Client.ExecuteWorkflow(wctx, client.StartWorkflowOptions{ID: rep.WorkflowID, TaskQueue: taskQueue, WorkflowExecutionTimeout: 2 * time.Minute},
		"Checkout", ChargeInput{OrderID: "order-" + tag, AmountCents: 4_200, Currency: "EUR", TraceID: "trace-" + tag})
	if err != nil {
		return nil, fmt.Errorf("payments: start workflow: %w", err)
	}
	if err := run.Get(wctx, &rep.Result); err != nil {
		return nil, fmt.Errorf("payments: checkout workflow: %w", err)
	}
	rep.ToolRuns = int(tools.runs.Load())
	rep.Provider = cfg.Provider.Stats()
	mu.Lock()
	rep.Outcomes = outcomes
	mu.Unlock()

	recs, err := store.List(ctx, &oncekeystore.ListParams{Tenant: tenant, WorkflowID: rep.WorkflowID})
	if err != nil {
		return nil, fmt.Errorf("payments: list records: %w", err)
	}
	if len(recs.Records) != 1 {
		return nil, fmt.Errorf("payments: %d records for %s, want 1", len(recs.Records), rep.WorkflowID)
	}
	rep.Record = recs.Records[0]
	rep.OperationKey = rep.Record.OperationKey
	unknown, err := reconcile.List(ctx, store, oncekeystore.ListParams{Tenant: tenant})
	if err != nil {
		return nil, err
	}
	rep.UnknownRecords = len(unknown.Records)
	_, err = cfg.Client.DescribeWorkflow(ctx, reconcile.WorkflowID(rep.OperationKey), "")
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		rep.ReconciliationStarted = true
	case !errors.As(err, &nf):
		return nil, fmt.Errorf("payments: look for a reconciliation workflow: %w", err)
	}
	return rep, nil
}

func randomTag() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
