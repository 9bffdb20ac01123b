package worker_test

// The code docs/approvals.md shows, compiled: a refund tool that needs a person's approval above
// 100 EUR, with the summary the approver sees. It needs Postgres and a Temporal server, so it is
// compiled but not run.

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/pgstore"
	okworker "github.com/oncekey/oncekey/worker"
)

// refundArgs reads a refund's arguments from the call's canonical JSON, the form the workflow
// and the worker both see.
func refundArgs(op oncekey.Operation) (RefundInput, bool) {
	var in RefundInput
	return in, json.Unmarshal(op.ArgsJSON, &in) == nil
}

// refundApproval: refunds over 100 EUR wait for a person. Required and Summary run in workflow
// code: deterministic functions of the Operation, no I/O, no clock.
var refundApproval = &oncekey.ApprovalPolicy{
	// Which calls need approval. Nil: every call of the tool.
	Required: func(op oncekey.Operation) bool {
		in, ok := refundArgs(op)
		return !ok || in.AmountCents > 100_00 // arguments it cannot read: ask
	},
	// What the approver sees; the arguments themselves are never stored.
	Summary: func(op oncekey.Operation) string {
		in, _ := refundArgs(op)
		return fmt.Sprintf("refund %d.%02d EUR on order %s", in.AmountCents/100, in.AmountCents%100, in.OrderID)
	},
	// Nobody decided within 4h: the call is rejected; the next call asks again.
	Timeout: 4 * time.Hour,
}

// A worker whose refunds over 100 EUR wait for a person's approval.
func Example_approval() {
	ctx := context.Background()
	tools := &Tools{mail: &MailClient{}}
	pool, err := pgstore.NewPool(ctx, os.Getenv("DATABASE_URL"), nil)
	if err != nil {
		log.Fatal(err)
	}
	// pgstore keeps the approvals (migrate first: `oncekey migrate`).
	store := pgstore.New(pool, nil)

	reg := oncekey.NewRegistry()
	if err := reg.Set(tools.IssueRefund, oncekey.Policy{
		Effect:    oncekey.Effectful,
		Approval:  refundApproval,
		Authorize: checkRefundLimit,   // still checked right before the effect
		Retention: 7 * 24 * time.Hour, // a denied refund stays denied this long
	}); err != nil {
		log.Fatal(err)
	}

	plugin, err := okworker.NewPlugin(okworker.Options{Store: store, Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(client.Options{Plugins: []client.Plugin{plugin}})
	if err != nil {
		log.Fatal(err)
	}
	w := worker.New(c, "support", worker.Options{})
	w.RegisterActivity(tools)
	w.RegisterWorkflow(RefundStep)
	if err := w.Run(worker.InterruptCh()); err != nil {
		log.Fatal(err)
	}
}

// RefundStep is workflow code calling the refund under a step ID: the approval, like the record,
// belongs to the step's operation key.
func RefundStep(ctx workflow.Context, in RefundInput) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	ctx = oncekey.WithStepID(ctx, "refund")
	var out string
	// Waits for the decision first (durably: a worker restart changes nothing). Denied or timed
	// out: a non-retryable oncekey.ApprovalRequired error, and nothing ran.
	err := workflow.ExecuteActivity(ctx, "IssueRefund", in).Get(ctx, &out)
	return out, err
}
