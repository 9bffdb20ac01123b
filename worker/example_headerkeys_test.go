package worker_test

// The code docs/approvals.md shows under "Header keys: binding the tenant and step ID",
// compiled: a worker whose workflows bind the tenant and step ID headers of the calls they
// schedule, and whose activities refuse calls whose headers are not bound. It needs Postgres and
// a Temporal server, so it is compiled but not run.

import (
	"context"
	"log"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/pgstore"
	okworker "github.com/oncekey/oncekey/worker"
)

// A worker that binds and verifies the tenant and step ID headers with the deployment's header
// keys.
func Example_headerKeys() {
	ctx := context.Background()
	tools := &Tools{mail: &MailClient{}}
	pool, err := pgstore.NewPool(ctx, os.Getenv("DATABASE_URL"), nil)
	if err != nil {
		log.Fatal(err)
	}
	store := pgstore.New(pool, nil)
	reg := oncekey.NewRegistry()
	if err := reg.Set(tools.IssueRefund, oncekey.Policy{Effect: oncekey.Effectful}); err != nil {
		log.Fatal(err)
	}

	keys, err := oncekey.LoadHeaderKeys("/etc/oncekey/header-keys") // lines "ID BASE64SECRET"
	if err != nil {
		log.Fatal(err)
	}
	plugin, err := okworker.NewPlugin(okworker.Options{Store: store, Registry: reg, HeaderKeys: keys})
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
