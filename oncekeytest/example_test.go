package oncekeytest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeytest"
)

// Tickets is a tool whose downstream counts what it opened.
type Tickets struct{ Opened oncekeytest.Counter }

// Open opens a ticket: one effect per call of its body.
func (tk *Tickets) Open(ctx context.Context, subject string) (string, error) {
	tk.Opened.Add("Open")
	return "ticket for " + subject, nil
}

// Triage is the workflow under test: it opens one ticket per subject.
func Triage(ctx workflow.Context, subjects []string) ([]string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var tk *Tickets
	var out []string
	for _, s := range subjects {
		var ticket string
		if err := workflow.ExecuteActivity(ctx, tk.Open, s).Get(ctx, &ticket); err != nil {
			return nil, err
		}
		out = append(out, ticket)
	}
	return out, nil
}

// The test of an agent's own workflow: its Registry, its workflow and tool functions, a seeded
// mix of every fault, and one assertion that each tool landed at most once per intended call.
// The same plan without oncekey (Disabled) is the control that shows the plan does repeat
// effects.
func Example() {
	t := &exampleT{} // in a test: the test's *testing.T
	for _, disabled := range []bool{false, true} {
		tickets := &Tickets{}
		reg := oncekey.NewRegistry()
		if err := reg.Set(tickets.Open, oncekey.Policy{Effect: oncekey.Effectful}); err != nil {
			panic(err)
		}
		kit := oncekeytest.New(t, oncekeytest.Config{
			Registry: reg,
			Effects:  tickets.Opened.Counts,
			Plan:     oncekeytest.Mix{Seed: 114, AttemptPercent: 60, CallPercent: 30},
			Disabled: disabled,
		})
		kit.RegisterWorkflow(Triage)
		kit.RegisterActivity(tickets)
		run := kit.ExecuteWorkflow(Triage, []string{"printer", "vpn", "laptop", "badge", "wifi", "desk"})
		if err := run.Err(); err != nil {
			panic(err)
		}
		kit.RequireAtMostOnce()
		rep := kit.Report()
		fmt.Printf("oncekey off: %v, runs: %d, tickets opened: %d for %d intended, double effects: %d\n",
			disabled, run.Passes, rep.Rows[0].Landed, rep.Rows[0].Intended, rep.Doubles())
		if !disabled {
			fmt.Print(rep)
		}
	}
	fmt.Print(t.failures)
	// Output:
	// oncekey off: false, runs: 2, tickets opened: 6 for 6 intended, double effects: 0
	// tool  intended  landed  doubles  replays  unknowns  faults                                                                         decisions                model read
	// Open  6         6       0        9        2         fail_before_body=1 stall=1 lose_answer=1 crash_mid_body=1 repropose=1 reset=1  applied=1 not applied=1  applied=6 replayed=7
	// oncekey off: true, runs: 2, tickets opened: 15 for 6 intended, double effects: 9
	// oncekeytest: Open landed 15 effects for 6 intended: 9 double effect(s) (oncekey is off: Config.Disabled)
}

// A fixed plan: the answer of the first ticket is lost after the ticket was opened. oncekey
// answers the workflow from the record; the report shows one ticket and one replay.
func ExampleScript() {
	t := &exampleT{}
	tickets := &Tickets{}
	reg := oncekey.NewRegistry()
	if err := reg.Set(tickets.Open, oncekey.Policy{Effect: oncekey.Effectful}); err != nil {
		panic(err)
	}
	kit := oncekeytest.New(t, oncekeytest.Config{
		Registry: reg,
		Effects:  tickets.Opened.Counts,
		Plan:     oncekeytest.Script{{Tool: "Open", Call: 1, Fault: oncekeytest.LoseAnswer}},
	})
	kit.RegisterWorkflow(Triage)
	kit.RegisterActivity(tickets)
	var got []string
	if err := kit.ExecuteWorkflow(Triage, []string{"printer"}).Get(&got); err != nil {
		panic(err)
	}
	kit.RequireAtMostOnce()
	fmt.Println(got)
	fmt.Print(kit.Report())
	// Output:
	// [ticket for printer]
	// tool  intended  landed  doubles  replays  unknowns  faults         decisions  model read
	// Open  1         1       0        1        0         lose_answer=1  -          applied=1
}

// exampleT stands in for a test's *testing.T in these examples: it keeps the failures a kit
// reports, so the example can print them.
type exampleT struct {
	testing.TB
	failures string
}

func (t *exampleT) Helper()                           {}
func (t *exampleT) Name() string                      { return "Example" }
func (t *exampleT) Cleanup(func())                    {}
func (t *exampleT) Errorf(format string, args ...any) { t.record(format, args...) }
func (t *exampleT) Fatalf(format string, args ...any) { t.record(format, args...); panic(t.failures) }
func (t *exampleT) Fatal(args ...any)                 { t.record("%s", fmt.Sprint(args...)); panic(t.failures) }

// record keeps the first line of a failure (the table after it varies with the plan).
func (t *exampleT) record(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for i, c := range msg {
		if c == '\n' {
			msg = msg[:i]
			break
		}
	}
	t.failures += msg + "\n"
}

// Refunds is a tool that needs a person's approval; Issued counts what it paid out.
type Refunds struct{ Issued oncekeytest.Counter }

// Refund refunds an order.
func (r *Refunds) Refund(ctx context.Context, order string) (string, error) {
	r.Issued.Add("Refund")
	return "refunded " + order, nil
}

// AskRefund asks for a refund and returns what a loop would hand its model.
func AskRefund(ctx workflow.Context, order string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var r *Refunds
	var out string
	if err := workflow.ExecuteActivity(ctx, r.Refund, order).Get(ctx, &out); err != nil {
		return "Error executing tool: " + err.Error(), nil
	}
	return out, nil
}

// The kit as the approver: a tool whose policy asks a person (Policy.Approval; the kit's default
// memstore keeps approvals) is denied, with a message the model reads. Approve() approves, and
// Wait() lets the request time out (at once on the test environment, whose clock skips ahead).
func ExampleDeny() {
	t := &exampleT{}
	refunds := &Refunds{}
	reg := oncekey.NewRegistry()
	// A struct's method is registered, and named in reports, by the method's name: "Refund".
	if err := reg.Set(refunds.Refund, oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{}}); err != nil {
		panic(err)
	}
	kit := oncekeytest.New(t, oncekeytest.Config{
		Registry: reg,
		Effects:  refunds.Issued.Counts,
		Approve: func(ctx context.Context, a oncekeystore.Approval) oncekeytest.Decision {
			return oncekeytest.Deny("Refunds over 100 need a manager.")
		},
	})
	kit.RegisterWorkflow(AskRefund)
	kit.RegisterActivity(refunds)
	if err := kit.ExecuteWorkflow(AskRefund, "A-1001").Err(); err != nil {
		panic(err)
	}
	read := kit.Reads()[0]
	fmt.Println("refunds:", refunds.Issued.Counts()["Refund"])
	fmt.Println("the model read:", read.Label.Status, read.Label.Reason, "|", read.Label.Message)
	// Output:
	// refunds: 0
	// the model read: rejected denied | Refunds over 100 need a manager.
}

// CheckAtMostOnce returns the failure RequireAtMostOnce reports: here an e-mail tool registered
// Idempotent, whose attempt crashed after the mail was sent, sends it twice.
func ExampleKit_CheckAtMostOnce() {
	t := &exampleT{}
	tickets := &Tickets{}
	reg := oncekey.NewRegistry()
	if err := reg.Set(tickets.Open, oncekey.Policy{Effect: oncekey.Idempotent}); err != nil {
		panic(err)
	}
	kit := oncekeytest.New(t, oncekeytest.Config{
		Registry: reg,
		Effects:  tickets.Opened.Counts,
		Plan:     oncekeytest.Script{{Tool: "Open", Call: 1, Fault: oncekeytest.CrashMidBody}},
	})
	kit.RegisterWorkflow(Triage)
	kit.RegisterActivity(tickets)
	if err := kit.ExecuteWorkflow(Triage, []string{"printer"}).Err(); err != nil {
		panic(err)
	}
	err := kit.CheckAtMostOnce()
	fmt.Println(strings.SplitN(err.Error(), "\n", 2)[0])
	// Output:
	// oncekeytest: Open landed 2 effects for 1 intended: 1 double effect(s) (its policy is Idempotent: a repeat runs its body again, which only its downstream can deduplicate; register it Effectful if it does not)
}
