package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"

	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
)

// An operator program: list the operations waiting for reconciliation and settle one after
// finding the ticket in the downstream system. The blocked workflow continues with the result
// given here. (It needs Postgres and a Temporal server, so it is compiled but not run.)
func ExampleResolve() {
	ctx := context.Background()
	pool, err := pgstore.NewPool(ctx, os.Getenv("DATABASE_URL"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c, err := client.Dial(client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	waiting, err := reconcile.List(ctx, pgstore.New(pool, nil), oncekeystore.ListParams{Tenant: "acme", Tool: "CreateTicket"})
	if err != nil {
		log.Fatal(err)
	}
	for _, rec := range waiting.Records {
		fmt.Println(rec.OperationKey, rec.WorkflowID, rec.StepID)
	}
	if len(waiting.Records) == 0 {
		return
	}
	rec := waiting.Records[0]
	err = reconcile.Resolve(ctx, c, rec.Tenant, rec.OperationKey, reconcile.Resolution{
		Epoch:           rec.Epoch,
		Outcome:         reconcile.Applied,
		EffectReference: "TCK-0042",
		Result:          json.RawMessage(`{"id":"TCK-0042","status":"open"}`), // the tool's result type, as JSON
		Note:            "found in the ticket system by its idempotency key",
		ResolvedBy:      "ada",
	})
	var (
		invalid *reconcile.InvalidResolutionError
		refused *reconcile.RefusedError
	)
	switch {
	case errors.As(err, &invalid): // the resolution is malformed; nothing was sent
		log.Fatalf("fix the resolution: %v", err)
	case errors.Is(err, reconcile.ErrNoReconciliation): // nothing waits for this key (never started, or done)
		log.Printf("nothing is waiting for %s any more: %v", rec.OperationKey, err)
	case errors.As(err, &refused): // the workflow refused it (Reason says why), or it was settled otherwise
		log.Printf("refused: %s", refused.Reason)
	case errors.Is(err, reconcile.ErrUnconfirmed): // delivered, no answer within reconcile.ConfirmWait (10 s in all)
		log.Printf("not confirmed yet: is a worker running the reconciliation workflow? %v", err)
	case err != nil:
		log.Fatal(err)
	}
}

// Settle one operation through the oncekey.resolve Workflow Update and print the workflow's
// answer: the decision it recorded. A refusal (another tenant, a result that does not decode into
// the tool's result type) comes back at once and leaves no trace in the workflow's history.
// (It needs a Temporal server, so it is compiled but not run.)
func ExampleResolveOutput() {
	ctx := context.Background()
	c, err := client.Dial(client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	key := os.Getenv("OPERATION_KEY")
	st, err := reconcile.Status(ctx, c, key) // the epoch it waits on; `oncekey show` prints it too
	if err != nil {
		log.Fatal(err)
	}
	out, err := reconcile.ResolveOutput(ctx, c, "acme", key, reconcile.Resolution{
		Epoch:      st.Epoch, // refused once the operation has moved on to another epoch
		Outcome:    reconcile.NotApplied,
		Note:       "no charge at the provider for this idempotency key",
		ResolvedBy: "ada",
		RequestID:  "ada-" + key, // sent again after a timeout, it is taken once
	})
	var refused *reconcile.RefusedError
	switch {
	case errors.As(err, &refused):
		log.Printf("refused, nothing recorded: %s", refused.Reason)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("recorded", out.Outcome, "by", out.ResolvedBy)
	}
}
