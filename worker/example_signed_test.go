package worker_test

// The code docs/approvals.md shows under "Signed decisions", compiled: a worker that accepts only
// decisions signed by a key of its trust list. It needs Postgres and a Temporal server, so it is
// compiled but not run.

import (
	"context"
	"log"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/pgstore"
	okworker "github.com/oncekey/oncekey/worker"
)

// A worker whose approvals and resolutions must be signed by a key the trust list names.
func Example_signedDecisions() {
	ctx := context.Background()
	tools := &Tools{mail: &MailClient{}}
	pool, err := pgstore.NewPool(ctx, os.Getenv("DATABASE_URL"), nil)
	if err != nil {
		log.Fatal(err)
	}
	store := pgstore.New(pool, nil)
	reg := oncekey.NewRegistry()
	if err := reg.Set(tools.IssueRefund, oncekey.Policy{Effect: oncekey.Effectful, Approval: refundApproval}); err != nil {
		log.Fatal(err)
	}

	trust, err := decisionsig.LoadTrustList("/etc/oncekey/trust.json")
	if err != nil {
		log.Fatal(err)
	}
	plugin, err := okworker.NewPlugin(okworker.Options{Store: store, Registry: reg, TrustList: trust})
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
