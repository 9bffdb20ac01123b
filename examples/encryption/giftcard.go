package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/examples/internal/exampleenv"
	"github.com/oncekey/oncekey/pgstore"
	okworker "github.com/oncekey/oncekey/worker"
)

// tenant keys this example's records unless Config.Tenant names another.
const tenant = "encryption"

// GiftCardInput is the gift card tool's input.
type GiftCardInput struct {
	CustomerID  string `json:"customer_id"`
	AmountCents int64  `json:"amount_cents"`
}

// GiftCard is the gift card tool's result. Code is a secret: whoever reads it can spend the card.
type GiftCard struct {
	Code        string `json:"code"`
	CustomerID  string `json:"customer_id"`
	AmountCents int64  `json:"amount_cents"`
}

// Tools holds the gift card tool and counts how often its body ran.
type Tools struct{ runs atomic.Int64 }

// IssueGiftCard issues a gift card with a fresh secret code. Repeating it would issue a second
// card: it is Effectful.
func (t *Tools) IssueGiftCard(_ context.Context, in GiftCardInput) (GiftCard, error) {
	t.runs.Add(1)
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return GiftCard{}, oncekey.NotApplied(err)
	}
	return GiftCard{Code: "GC-" + hex.EncodeToString(b[:]), CustomerID: in.CustomerID, AmountCents: in.AmountCents}, nil
}

// IssueResult is what the workflow returns: the card, and the answer to the same call proposed
// again (a replay of the stored, encrypted result).
type IssueResult struct {
	First, Again GiftCard
}

// Issue issues one gift card, then proposes the same call again.
func Issue(ctx workflow.Context, in GiftCardInput) (IssueResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	ctx = oncekey.WithStepID(ctx, "issue_gift_card")
	var out IssueResult
	if err := workflow.ExecuteActivity(ctx, "IssueGiftCard", in).Get(ctx, &out.First); err != nil {
		return out, err
	}
	if err := workflow.ExecuteActivity(ctx, "IssueGiftCard", in).Get(ctx, &out.Again); err != nil {
		return out, err
	}
	return out, nil
}

// Config configures a run.
type Config struct {
	// Client is a Temporal client; the run derives its own client from it with the data
	// converter below and the oncekey plugin. Required.
	Client client.Client
	// Pool is a Postgres pool whose search_path is a schema the run may migrate. Required.
	Pool *pgxpool.Pool
	// Codec encrypts payloads. Nil runs without a codec, for comparison.
	Codec converter.PayloadCodec
	// Sealer seals the stored result to its record (okworker.Options.ResultSealer). Nil
	// stores the result as the data converter encoded it.
	Sealer oncekey.ResultSealer
	// Tenant is the tenant of the run's records. Defaults to "encryption".
	Tenant string
	// Tools is the tool's implementation, which counts its runs. Defaults to a fresh one.
	Tools *Tools
	// WorkflowID is the ID of the workflow. Defaults to a fresh one; give a finished workflow's
	// ID to repeat its operation (the same operation key) from a new worker.
	WorkflowID string
}

// Report is what a run observed.
type Report struct {
	WorkflowID   string
	OperationKey string
	Result       IssueResult
	// ToolRuns counts how often the tool's body ran.
	ToolRuns int
	// StoredResult is the result column of the record, read with SQL.
	StoredResult []byte
	// Sealed reports whether StoredResult was sealed by a ResultSealer (oncekey.SealedResultPrefix).
	Sealed bool
	// StoredEncoding is the "encoding" metadata of the stored payload, once opened by the sealer.
	StoredEncoding string
	// PlaintextStored reports whether the card's code appears in StoredResult.
	PlaintextStored bool
	// Decoded is StoredResult opened by the run's sealer and decoded with its data converter.
	Decoded GiftCard
}

// Run issues one gift card through oncekey with the data converter cfg.Codec gives and the
// result sealer cfg.Sealer, and reads back what Postgres holds. A workflow that fails (a stored
// result that does not open, for one) is an error that carries its message.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Client == nil || cfg.Pool == nil {
		return nil, errors.New("encryption: Config.Client and Pool are required")
	}
	if err := pgstore.Migrate(ctx, cfg.Pool); err != nil {
		return nil, fmt.Errorf("encryption: migrate: %w", err)
	}
	tools := cfg.Tools
	if tools == nil {
		tools = &Tools{}
	}
	ten := cfg.Tenant
	if ten == "" {
		ten = tenant
	}
	reg := oncekey.NewRegistry()
	if err := reg.Set(tools.IssueGiftCard, oncekey.Policy{Effect: oncekey.Effectful, RequireStepID: true}); err != nil {
		return nil, err
	}
	// Options.DataConverter is left unset: given to the client, the plugin takes the client's
	// data converter, codec included, for the results it stores.
	plugin, err := okworker.NewPlugin(okworker.Options{
		Store:        pgstore.New(cfg.Pool, nil),
		Registry:     reg,
		ResultSealer: cfg.Sealer,
		Tenant:       func(okworker.TenantInfo) string { return ten },
	})
	if err != nil {
		return nil, err
	}
	dc := converter.GetDefaultDataConverter()
	if cfg.Codec != nil {
		dc = converter.NewCodecDataConverter(dc, cfg.Codec)
	}
	c, err := client.NewClientFromExistingWithContext(ctx, cfg.Client, client.Options{
		DataConverter: dc,
		Plugins:       []client.Plugin{plugin},
		Logger:        exampleenv.Quiet{},
	})
	if err != nil {
		return nil, fmt.Errorf("encryption: client: %w", err)
	}
	defer c.Close()

	tag := randomTag()
	taskQueue := "encryption-" + tag
	w := tworker.New(c, taskQueue, tworker.Options{}) // the client's plugin installs oncekey
	w.RegisterWorkflowWithOptions(Issue, workflow.RegisterOptions{Name: "Issue"})
	w.RegisterActivity(tools.IssueGiftCard)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("encryption: start worker: %w", err)
	}
	defer w.Stop()

	before := tools.runs.Load()
	rep := &Report{WorkflowID: cfg.WorkflowID}
	if rep.WorkflowID == "" {
		rep.WorkflowID = "gift-card-" + tag
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(wctx, client.StartWorkflowOptions{ID: rep.WorkflowID, TaskQueue: taskQueue, WorkflowExecutionTimeout: time.Minute},
		"Issue", GiftCardInput{CustomerID: "cus_42", AmountCents: 5_000})
	if err != nil {
		return nil, fmt.Errorf("encryption: start workflow: %w", err)
	}
	if err := run.Get(wctx, &rep.Result); err != nil {
		return nil, fmt.Errorf("encryption: workflow: %w", err)
	}
	rep.ToolRuns = int(tools.runs.Load() - before)

	err = cfg.Pool.QueryRow(ctx, "SELECT operation_key, result FROM oncekey_operations WHERE tenant = $1 AND workflow_id = $2",
		ten, rep.WorkflowID).Scan(&rep.OperationKey, &rep.StoredResult)
	if err != nil {
		return nil, fmt.Errorf("encryption: read the record: %w", err)
	}
	rep.PlaintextStored = bytes.Contains(rep.StoredResult, []byte(rep.Result.First.Code))
	rep.Sealed = oncekey.IsSealedResult(rep.StoredResult)
	opened, err := oncekey.OpenResult(ctx, cfg.Sealer, ten, rep.OperationKey, rep.StoredResult)
	if err != nil {
		return nil, fmt.Errorf("encryption: open the stored result: %w", err)
	}
	var ps commonpb.Payloads
	if err := proto.Unmarshal(opened, &ps); err != nil || len(ps.Payloads) != 1 {
		return nil, fmt.Errorf("encryption: the stored result is not one Temporal payload (%v)", err)
	}
	rep.StoredEncoding = string(ps.Payloads[0].GetMetadata()[converter.MetadataEncoding])
	if err := dc.FromPayloads(&ps, &rep.Decoded); err != nil {
		return nil, fmt.Errorf("encryption: decode the stored result: %w", err)
	}
	return rep, nil
}

func randomTag() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
