package worker_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/worker"
)

// CreateTicket is a tool whose repeat would open a second ticket.
func CreateTicket(ctx context.Context, subject string) (string, error) {
	key, _ := oncekey.OperationKey(ctx) // pass it downstream as the Idempotency-Key
	return "T-1 for " + key, nil
}

// The plugin path: give the plugin to the client, and every worker made from it claims, replays
// and reconciles; the plugin also learns the client's data converter.
func ExampleNewPlugin() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "") // libpq defaults (PGHOST, PGUSER, …)
	if err != nil {
		log.Fatal(err)
	}
	if err := pgstore.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	reg := oncekey.NewRegistry()
	if err := reg.Set(CreateTicket, oncekey.Policy{Effect: oncekey.Effectful, RequireStepID: true}); err != nil {
		log.Fatal(err)
	}
	plugin, err := worker.NewPlugin(worker.Options{Store: pgstore.New(pool, nil), Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(client.Options{Plugins: []client.Plugin{plugin}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w := sdkworker.New(c, "support", sdkworker.Options{})
	w.RegisterActivity(CreateTicket)
	if err := w.Run(sdkworker.InterruptCh()); err != nil {
		log.Fatal(err)
	}
}

// Without plugins: the interceptor goes into the worker options at construction, and Register
// adds oncekey's reconciliation workflow and activities to the worker.
func ExampleRegister() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	reg := oncekey.NewRegistry()
	if err := reg.Set(CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}); err != nil {
		log.Fatal(err)
	}
	opts := worker.Options{Store: pgstore.New(pool, nil), Registry: reg}
	c, err := client.Dial(client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	wo, err := worker.WorkerOptions(opts, sdkworker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	w := sdkworker.New(c, "support", wo)
	if err := worker.Register(w, opts); err != nil {
		log.Fatal(err)
	}
	w.RegisterActivity(CreateTicket)
	if err := w.Run(sdkworker.InterruptCh()); err != nil {
		log.Fatal(err)
	}
}
