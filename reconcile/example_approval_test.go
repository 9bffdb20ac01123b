package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
)

// An approver's program: list the refunds that wait for approval and approve the oldest. The
// waiting call then runs. (It needs Postgres and a Temporal server, so it is compiled but not
// run.)
func ExampleDecide() {
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

	waiting, err := pgstore.New(pool, nil).ListApprovals(ctx, &oncekeystore.ListApprovalsParams{
		Status: oncekeystore.ApprovalPending, Tenant: "acme", Tool: "IssueRefund",
	})
	if err != nil {
		log.Fatal(err)
	}
	if len(waiting.Approvals) == 0 {
		return
	}
	ap := waiting.Approvals[0] // oldest first
	fmt.Println("approving:", ap.Summary)
	out, err := reconcile.Decide(ctx, c, ap.OperationKey, reconcile.Decision{
		Decision:  reconcile.Approve, // or reconcile.Deny, with a Reason
		Tenant:    ap.Tenant,
		Episode:   ap.Episode, // refused once this request is no longer pending
		DecidedBy: "ada",
		Reason:    "customer called, refund agreed",
		RequestID: "ada-" + ap.OperationKey, // sent again after a timeout, it is taken once
	})
	var refused *reconcile.DecisionRefusedError
	switch {
	case errors.As(err, &refused) && refused.DecidedAs != nil: // decided before this one
		log.Printf("already %s by %s", refused.DecidedAs.Status, refused.DecidedAs.DecidedBy)
	case errors.As(err, &refused): // another tenant, another episode; nothing recorded
		log.Printf("refused: %s", refused.Reason)
	case errors.Is(err, reconcile.ErrNoApproval): // nothing waits for this key
		log.Print("no approval workflow waits for ", ap.OperationKey)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println(out.Status, "by", out.DecidedBy, "at", out.DecidedAt)
	}
}
