package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/interceptor"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/worker"
)

// Tickets is a fake ticket system that counts the tickets it opens.
type Tickets struct{ opened int }

func (t *Tickets) OpenTicket(ctx context.Context, subject string) (string, error) {
	t.opened++
	return fmt.Sprintf("T-%d %s", t.opened, subject), nil
}

// Support asks for the same ticket twice under one step ID, as a model repeating a call would.
func Support(ctx workflow.Context, subject string) ([]string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	ctx = oncekey.WithStepID(ctx, "open_ticket")
	var out []string
	for range 2 {
		var ticket string
		if err := workflow.ExecuteActivity(ctx, "OpenTicket", subject).Get(ctx, &ticket); err != nil {
			return nil, err
		}
		out = append(out, ticket)
	}
	return out, nil
}

// Workflows that use oncekey are tested on the SDK's test environment with the in-memory store:
// worker.Options puts the interceptor into the environment's worker options and Register adds
// oncekey's reconciliation workflow and activities, as on a real worker.
func Example_testEnvironment() {
	tickets := &Tickets{}
	reg := oncekey.NewRegistry()
	if err := reg.Set(tickets.OpenTicket, oncekey.Policy{Effect: oncekey.Effectful}); err != nil {
		panic(err)
	}
	opts := interceptor.Options{Store: memstore.New(nil), Registry: reg}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	wo, err := worker.Options(opts, sdkworker.Options{})
	if err != nil {
		panic(err)
	}
	env.SetWorkerOptions(wo)
	if err := worker.Register(env, opts); err != nil {
		panic(err)
	}
	env.RegisterActivity(tickets.OpenTicket)
	env.RegisterWorkflow(Support)

	env.ExecuteWorkflow(Support, "printer on fire")
	var got []string
	if err := env.GetWorkflowResult(&got); err != nil {
		panic(err)
	}
	fmt.Println(got)
	fmt.Println("tickets opened:", tickets.opened)
	// Output:
	// [T-1 printer on fire T-1 printer on fire]
	// tickets opened: 1
}
