package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	okworker "github.com/oncekey/oncekey/worker"
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
// okworker.Options puts the interceptor into the environment's worker options and Register adds
// oncekey's reconciliation workflow and activities, as on a real worker.
func Example_testEnvironment() {
	tickets := &Tickets{}
	reg := oncekey.NewRegistry()
	if err := reg.Set(tickets.OpenTicket, oncekey.Policy{Effect: oncekey.Effectful}); err != nil {
		panic(err)
	}
	opts := okworker.Options{Store: memstore.New(nil), Registry: reg}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	wo, err := okworker.WorkerOptions(opts, sdkworker.Options{})
	if err != nil {
		panic(err)
	}
	env.SetWorkerOptions(wo)
	if err := okworker.Register(env, opts); err != nil {
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

// FlakyTickets opens the ticket and then loses the answer: the outcome is unknown to oncekey.
type FlakyTickets struct{ opened int }

func (t *FlakyTickets) OpenTicket(ctx context.Context, subject string) (string, error) {
	t.opened++
	return "", errors.New("connection reset after the request was sent")
}

// An unknown outcome waits on its reconciliation workflow; a test settles it with the signal a
// person's `oncekey resolve` sends, finding the key in the store.
func Example_testEnvironmentUnknown() {
	tickets := &FlakyTickets{}
	reg := oncekey.NewRegistry()
	if err := reg.Set(tickets.OpenTicket, oncekey.Policy{Effect: oncekey.Effectful}); err != nil {
		panic(err)
	}
	store := memstore.New(nil) // the one in okworker.Options
	opts := okworker.Options{Store: store, Registry: reg}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	wo, err := okworker.WorkerOptions(opts, sdkworker.Options{})
	if err != nil {
		panic(err)
	}
	env.SetWorkerOptions(wo)
	if err := okworker.Register(env, opts); err != nil {
		panic(err)
	}
	env.RegisterActivity(tickets.OpenTicket)
	env.RegisterWorkflow(Support)

	env.RegisterDelayedCallback(func() {
		page, err := store.List(context.Background(), &oncekeystore.ListParams{Status: oncekeystore.StatusUnknown})
		if err != nil || len(page.Records) != 1 {
			panic(fmt.Sprint("no unknown record: ", err))
		}
		key, epoch := page.Records[0].OperationKey, page.Records[0].Epoch
		env.SignalWorkflowByID(reconcile.WorkflowID(key), reconcile.SignalName, reconcile.Resolution{
			Epoch: epoch, Outcome: reconcile.Applied, EffectReference: "T-7", Result: json.RawMessage(`"T-7 printer on fire"`)})
	}, time.Minute)
	env.ExecuteWorkflow(Support, "printer on fire")
	var got []string
	if err := env.GetWorkflowResult(&got); err != nil {
		panic(err)
	}
	fmt.Println(got)
	fmt.Println("tickets opened:", tickets.opened)
	// Output:
	// [T-7 printer on fire T-7 printer on fire]
	// tickets opened: 1
}

// Refunds is a fake payments service that counts the refunds it issues.
type Refunds struct{ issued int }

func (r *Refunds) IssueRefund(ctx context.Context, cents int) (string, error) {
	r.issued++
	return fmt.Sprintf("R-%d refunded %d cents", r.issued, cents), nil
}

// Refund issues one refund; its policy asks a person first.
func Refund(ctx workflow.Context, cents int) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	ctx = oncekey.WithStepID(ctx, "refund")
	var out string
	err := workflow.ExecuteActivity(ctx, "IssueRefund", cents).Get(ctx, &out)
	return out, err
}

// A call whose policy asks for approval waits on its approval workflow; a test approves (or
// denies) it with the signal a person's `oncekey approve` falls back to, finding the pending
// approval in the store.
func Example_testEnvironmentApproval() {
	refunds := &Refunds{}
	reg := oncekey.NewRegistry()
	if err := reg.Set(refunds.IssueRefund, oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{
		Summary: func(op oncekey.Operation) string { return "refund " + string(op.ArgsJSON) + " cents" },
	}}); err != nil {
		panic(err)
	}
	store := memstore.New(nil) // the one in okworker.Options; it keeps approvals too
	opts := okworker.Options{Store: store, Registry: reg}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	wo, err := okworker.WorkerOptions(opts, sdkworker.Options{})
	if err != nil {
		panic(err)
	}
	env.SetWorkerOptions(wo)
	if err := okworker.Register(env, opts); err != nil {
		panic(err)
	}
	env.RegisterActivity(refunds.IssueRefund)
	env.RegisterWorkflow(Refund)

	env.RegisterDelayedCallback(func() {
		page, err := store.ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending})
		if err != nil || len(page.Approvals) != 1 {
			panic(fmt.Sprint("no pending approval: ", err))
		}
		a := page.Approvals[0]
		fmt.Println("asked:", a.Summary, "| refunds so far:", refunds.issued)
		env.SignalWorkflowByID(reconcile.ApprovalWorkflowID(a.OperationKey), reconcile.DecideSignalName, reconcile.Decision{
			Decision: reconcile.Approve, Tenant: a.Tenant, Episode: a.Episode, DecidedBy: "alice", RequestID: "test-approve"})
	}, time.Minute)
	env.ExecuteWorkflow(Refund, 12000)
	var got string
	if err := env.GetWorkflowResult(&got); err != nil {
		panic(err)
	}
	fmt.Println(got)
	fmt.Println("refunds issued:", refunds.issued)
	// Output:
	// asked: refund 12000 cents | refunds so far: 0
	// R-1 refunded 12000 cents
	// refunds issued: 1
}
