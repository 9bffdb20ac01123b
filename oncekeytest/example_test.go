package oncekeytest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
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
