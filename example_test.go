package oncekey_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	tinterceptor "go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	okworker "github.com/oncekey/oncekey/worker"
)

// RefundInput is the input of the IssueRefund tool below.
type RefundInput struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	TraceID     string `json:"trace_id"`
}

// IssueRefund is a tool whose repeat would refund twice.
func IssueRefund(ctx context.Context, in RefundInput) (string, error) {
	key, _ := oncekey.OperationKey(ctx) // send it to the payment provider as the Idempotency-Key
	return "refund of " + in.OrderID + " under " + key, nil
}

// Set names the tool by its function value (or its registered name), and checks the policy's
// argument fields against the tool's input type at once, not at the first call.
func ExampleRegistry_Set() {
	reg := oncekey.NewRegistry()
	err := reg.Set(IssueRefund, oncekey.Policy{
		Effect:  oncekey.Effectful,
		Key:     oncekey.ArgsKey("order_id"), // one refund per order within a workflow
		Exclude: []string{"trace_id"},        // a new trace ID does not make another operation
		Version: "2",
	})
	fmt.Println("registered:", err)
	p, _ := reg.Policy("IssueRefund")
	fmt.Println("effect:", p.Effect, "retention:", p.Retention, "lease:", p.Lease)

	// A misspelt field is refused when the policy is set.
	err = reg.Set(IssueRefund, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"traceid"}})
	var pe *oncekey.PolicyError
	fmt.Println("typo refused:", errors.As(err, &pe), pe.Field)
	// Output:
	// registered: <nil>
	// effect: effectful retention: 168h0m0s lease: 30s
	// typo refused: true Exclude
}

// Calls under one step ID are one operation: the second call below is answered from the stored
// result and the tool does not run again. A different step ID is a different operation. The
// example runs on the SDK's test environment with the in-memory store.
func ExampleWithStepID() {
	sent := 0
	sendReceipt := func(ctx context.Context, to string) (string, error) {
		sent++
		return fmt.Sprintf("receipt #%d to %s", sent, to), nil
	}
	checkout := func(ctx workflow.Context, to string) ([]string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		var out []string
		for _, step := range []string{"send_receipt", "send_receipt", "send_copy"} {
			var r string
			if err := workflow.ExecuteActivity(oncekey.WithStepID(ctx, step), "SendReceipt", to).Get(ctx, &r); err != nil {
				return nil, err
			}
			out = append(out, step+": "+r)
		}
		return out, nil
	}

	reg := oncekey.NewRegistry()
	if err := reg.SetAs("SendReceipt", sendReceipt, oncekey.Policy{Effect: oncekey.Effectful, RequireStepID: true}); err != nil {
		panic(err)
	}
	store := memstore.New(nil)
	ic, err := okworker.NewInterceptor(okworker.Options{Store: store, Registry: reg})
	if err != nil {
		panic(err)
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(sdkworker.Options{
		Interceptors: []tinterceptor.WorkerInterceptor{ic},
		// Under the race detector on a busy machine a workflow task of the test environment can
		// take longer than the SDK's default deadlock detection (1 s), failing the example.
		DeadlockDetectionTimeout: time.Minute,
	})
	env.RegisterActivityWithOptions(sendReceipt, activity.RegisterOptions{Name: "SendReceipt"})
	env.RegisterWorkflowWithOptions(checkout, workflow.RegisterOptions{Name: "Checkout"})
	env.ExecuteWorkflow("Checkout", "ada@example.com")

	var lines []string
	if err := env.GetWorkflowResult(&lines); err != nil {
		panic(err)
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	recs, err := store.List(context.Background(), &oncekeystore.ListParams{})
	if err != nil {
		panic(err)
	}
	var steps []string
	for _, r := range recs.Records {
		steps = append(steps, r.StepID+"="+string(r.Status))
	}
	slices.Sort(steps)
	fmt.Println("receipts sent:", sent)
	fmt.Println("records:", steps)
	// Output:
	// send_receipt: receipt #1 to ada@example.com
	// send_receipt: receipt #1 to ada@example.com
	// send_copy: receipt #2 to ada@example.com
	// receipts sent: 2
	// records: [send_copy=applied send_receipt=applied]
}
