// Command quickstart is the README's quick start: a worker with one Effectful tool (SendWelcome),
// and a workflow that calls it under a step ID. It runs the workflow twice with the same workflow
// ID, as a reset or a model asking again would: the tool runs once, and the second run gets the
// stored result (a replay).
//
// It needs a Temporal server on 127.0.0.1:7233 (TEMPORAL_ADDRESS to change it), for example the
// dev server of the Temporal CLI that `make temporal` installs, and Postgres from DATABASE_URL or
// the libpq variables; it creates oncekey's table in the connection's search_path. Run it again
// and both runs are replays: the record outlives the program (for its retention, 7 days).
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/pgstore"
	okworker "github.com/oncekey/oncekey/worker"
)

// sent counts the e-mails SendWelcome sent: the effects, as the downstream would count them.
var sent atomic.Int64

// SendWelcome is the tool: a second call would send a second e-mail, so it is Effectful.
func SendWelcome(ctx context.Context, to string) (string, error) {
	n := sent.Add(1)
	return fmt.Sprintf("welcome e-mail #%d to %s", n, to), nil
}

// Welcome is the workflow. The step ID names the effect, so a new run of the same workflow ID
// derives the same operation key.
func Welcome(ctx workflow.Context, to string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	ctx = oncekey.WithStepID(ctx, "welcome_email")
	var msg string
	err := workflow.ExecuteActivity(ctx, SendWelcome, to).Get(ctx, &msg)
	return msg, err
}

func main() {
	ctx := context.Background()
	pool, err := pgstore.NewPool(ctx, os.Getenv("DATABASE_URL"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	addr := os.Getenv("TEMPORAL_ADDRESS")
	if addr == "" {
		addr = "127.0.0.1:7233"
	}
	if err := run(ctx, client.Options{HostPort: addr}, pool, "quickstart", "welcome-ada"); err != nil {
		log.Fatal(err)
	}
}

// run migrates the table, dials Temporal with copts and the oncekey plugin, starts a worker on
// taskQueue and runs Welcome twice as workflowID.
func run(ctx context.Context, copts client.Options, pool *pgxpool.Pool, taskQueue, workflowID string) error {
	// Once, at deploy time (or `oncekey migrate`): oncekey's table.
	if err := pgstore.Migrate(ctx, pool); err != nil {
		return err
	}
	// The policy: SendWelcome is Effectful, so its operation key is claimed before it runs.
	reg := oncekey.NewRegistry()
	if err := reg.Set(SendWelcome, oncekey.Policy{Effect: oncekey.Effectful}); err != nil {
		return err
	}
	// The plugin installs the interceptor, the reconciliation workflow and oncekey's activities.
	// It goes on the client: it stores results with the client's data converter (codec
	// included), and every worker made from the client gets it.
	plugin, err := okworker.NewPlugin(okworker.Options{Store: pgstore.New(pool, nil), Registry: reg})
	if err != nil {
		return err
	}
	copts.Plugins = append(copts.Plugins, plugin)
	c, err := client.Dial(copts)
	if err != nil {
		return err
	}
	defer c.Close()
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(Welcome)
	w.RegisterActivity(SendWelcome)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	for i := 1; i <= 2; i++ { // the same workflow ID twice: the second run is a replay
		opts := client.StartWorkflowOptions{ID: workflowID, TaskQueue: taskQueue}
		wr, err := c.ExecuteWorkflow(ctx, opts, Welcome, "ada@example.com")
		if err != nil {
			return err
		}
		var msg string
		if err := wr.Get(ctx, &msg); err != nil {
			return err
		}
		fmt.Printf("run %d: %s\n", i, msg)
	}
	fmt.Printf("e-mails sent by this process: %d\n", sent.Load())
	return nil
}
