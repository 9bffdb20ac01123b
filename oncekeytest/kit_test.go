package oncekeytest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeytest"
	"github.com/oncekey/oncekey/pgstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// desk is a fake downstream: a ticket system, a mailer and a refund service that keep their own
// ledgers, which the tests count effects by.
type desk struct {
	mu      sync.Mutex
	tickets []string
	mails   []string
	refunds []string
}

func (d *desk) OpenTicket(ctx context.Context, subject string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tickets = append(d.tickets, subject)
	return fmt.Sprintf("T-%d", len(d.tickets)), nil
}

func (d *desk) SendMail(ctx context.Context, to string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mails = append(d.mails, to)
	return fmt.Sprintf("M-%d", len(d.mails)), nil
}

func (d *desk) Refund(ctx context.Context, order string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refunds = append(d.refunds, order)
	return fmt.Sprintf("R-%d", len(d.refunds)), nil
}

func (d *desk) effects() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return map[string]int{"OpenTicket": len(d.tickets), "SendMail": len(d.mails), "Refund": len(d.refunds)}
}

var acts *desk

func activityOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 3},
	})
}

// Support opens a ticket and mails the customer its number, as a workflow without oncekey in it.
func Support(ctx workflow.Context, subject string) (string, error) {
	ctx = activityOptions(ctx)
	var ticket, mail string
	if err := workflow.ExecuteActivity(ctx, acts.OpenTicket, subject).Get(ctx, &ticket); err != nil {
		return "", err
	}
	if err := workflow.ExecuteActivity(ctx, acts.SendMail, "customer@example.com").Get(ctx, &mail); err != nil {
		return "", err
	}
	return ticket + " " + mail, nil
}

// RefundOrder refunds an order; the refund asks a person first. It returns what a loop would
// hand its model: the result, or the error's text.
func RefundOrder(ctx workflow.Context, order string) (string, error) {
	ctx = activityOptions(ctx)
	var ref string
	if err := workflow.ExecuteActivity(ctx, acts.Refund, order).Get(ctx, &ref); err != nil {
		return "Error executing tool: " + err.Error(), nil
	}
	return ref, nil
}

func registry(t *testing.T, mail oncekey.Effect) *oncekey.Registry {
	t.Helper()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(acts.OpenTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	require.NoError(t, reg.Set(acts.SendMail, oncekey.Policy{Effect: mail}))
	require.NoError(t, reg.Set(acts.Refund, oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{Timeout: time.Minute}}))
	return reg
}

// where runs f on the SDK's test environment and on a dev server with Postgres: the same test
// code, the store and client filled in by on.
func where(t *testing.T, f func(t *testing.T, on func(oncekeytest.Config) oncekeytest.Config)) {
	t.Run("testenv", func(t *testing.T) {
		t.Parallel()
		f(t, func(c oncekeytest.Config) oncekeytest.Config { return c })
	})
	t.Run("devserver", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("needs Postgres and a dev server")
		}
		f(t, func(c oncekeytest.Config) oncekeytest.Config {
			pool := testenv.Postgres(t)
			require.NoError(t, pgstore.Migrate(context.Background(), pool))
			c.Store, c.Client = pgstore.New(pool, nil), testenv.Temporal(t)
			return c
		})
	})
}

// Each fault does what it says, with oncekey (every tool lands once, the workflow completes) and
// without it (the faults that repeat an effect land it twice).
func TestEachFault(t *testing.T) {
	for _, tc := range []struct {
		fault oncekeytest.Fault
		// doubles is what the control lands beyond one ticket: the faults that repeat a call
		// whose effect happened.
		doubles int
	}{
		{oncekeytest.FailBeforeBody, 0},
		{oncekeytest.Stall, 0},
		{oncekeytest.LoseAnswer, 1},
		{oncekeytest.CrashMidBody, 1},
		{oncekeytest.Repropose, 1},
		{oncekeytest.Reset, 1},
		{oncekeytest.Rerun, 1},
	} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			t.Parallel()
			where(t, func(t *testing.T, on func(oncekeytest.Config) oncekeytest.Config) {
				d := &desk{}
				kit := oncekeytest.New(t, on(oncekeytest.Config{
					Registry: registry(t, oncekey.Effectful),
					Effects:  d.effects,
					Plan:     oncekeytest.Script{{Tool: "OpenTicket", Fault: tc.fault}},
				}))
				kit.RegisterWorkflow(Support)
				kit.RegisterActivity(d)
				run := kit.ExecuteWorkflow(Support, "printer on fire")
				var out string
				require.NoError(t, run.Get(&out))
				require.Equal(t, "T-1 M-1", out, "the workflow got the first ticket")
				kit.RequireAtMostOnce()
				kit.RequireModelSafe()
				require.Len(t, d.tickets, 1, "the ticket system's own ledger")
				row := rowOf(t, kit.Report(), "OpenTicket")
				require.Equal(t, 1, row.Faults[tc.fault], "%v", row.Faults)
				t.Logf("\n%s", kit.Report())

				switch tc.fault {
				case oncekeytest.FailBeforeBody:
					require.Equal(t, 1, row.Unknowns, "an Effectful body's error is an unknown outcome")
					require.Equal(t, 1, row.Decisions["not applied"], "settled as the kit saw it: nothing was sent")
				case oncekeytest.LoseAnswer:
					require.Equal(t, 0, row.Unknowns)
					require.GreaterOrEqual(t, row.Replays, 1, "the landed ticket reached the workflow from its record")
				case oncekeytest.CrashMidBody:
					require.Equal(t, 1, row.Unknowns, "the attempt that died after the ticket was opened is unknown")
					require.Equal(t, 1, row.Decisions["applied"], "settled applied with the body's result")
					page, err := kit.Store().List(context.Background(), &oncekeystore.ListParams{Tool: "OpenTicket"})
					require.NoError(t, err)
					require.Len(t, page.Records, 1)
					require.Equal(t, oncekeystore.StatusApplied, page.Records[0].Status)
					require.Equal(t, "oncekeytest", page.Records[0].ResolvedBy)
				case oncekeytest.Repropose:
					var reads []oncekeytest.Read
					for _, r := range kit.Reads() {
						if r.Call.Tool == "OpenTicket" {
							reads = append(reads, r)
						}
					}
					require.Len(t, reads, 2)
					require.True(t, reads[1].Repeat)
					require.True(t, reads[1].Label.Replayed, "the repeat was answered from the record")
					require.Equal(t, reads[0].Text, reads[1].Text)
				case oncekeytest.Reset, oncekeytest.Rerun:
					require.Equal(t, 2, run.Passes, "the workflow ran again")
					require.GreaterOrEqual(t, row.Replays, 1, "the step ran again and was answered from the record")
					require.Len(t, d.mails, 1)
				}

				// The control: the same plan without oncekey.
				c := &desk{}
				control := oncekeytest.New(t, on(oncekeytest.Config{
					Registry: registry(t, oncekey.Effectful),
					Effects:  c.effects,
					Plan:     oncekeytest.Script{{Tool: "OpenTicket", Fault: tc.fault}},
					Disabled: true,
				}))
				control.RegisterWorkflow(Support)
				control.RegisterActivity(c)
				require.NoError(t, control.ExecuteWorkflow(Support, "printer on fire").Err())
				require.Len(t, c.tickets, 1+tc.doubles, "without oncekey")
				require.Equal(t, tc.doubles, rowOf(t, control.Report(), "OpenTicket").Doubles())
			})
		})
	}
}

func rowOf(t *testing.T, rep oncekeytest.Report, tool string) oncekeytest.Row {
	t.Helper()
	for _, r := range rep.Rows {
		if r.Tool == tool {
			return r
		}
	}
	t.Fatalf("no row for %s in\n%s", tool, rep)
	return oncekeytest.Row{}
}

// recorder is a testing.TB that keeps the failures a kit reports instead of failing the test.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}

// A tool registered Idempotent whose downstream does not deduplicate: a crash after its effect
// runs it again, and the test fails naming the tool and the double effect.
func TestMisclassifiedToolFails(t *testing.T) {
	where(t, func(t *testing.T, on func(oncekeytest.Config) oncekeytest.Config) {
		d := &desk{}
		rec := &recorder{TB: t}
		kit := oncekeytest.New(rec, on(oncekeytest.Config{
			Registry: registry(t, oncekey.Idempotent), // SendMail is Effectful: each call sends a mail
			Effects:  d.effects,
			Plan:     oncekeytest.Script{{Tool: "SendMail", Fault: oncekeytest.CrashMidBody}},
		}))
		kit.RegisterWorkflow(Support)
		kit.RegisterActivity(d)
		require.NoError(t, kit.ExecuteWorkflow(Support, "printer on fire").Err())
		require.Empty(t, rec.errors)
		kit.RequireAtMostOnce()
		require.Len(t, rec.errors, 1)
		msg := rec.errors[0]
		t.Log(msg)
		require.Contains(t, msg, "SendMail landed 2 effects for 1 intended: 1 double effect(s)")
		require.Contains(t, msg, "its policy is Idempotent")
		require.Contains(t, msg, "tool        intended", "the table")
		require.Len(t, d.mails, 2)
	})
}

// The kit acts as the approver: approve, deny with a message for the model, or let the request
// time out.
func TestApprovals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		approve func(context.Context, oncekeystore.Approval) oncekeytest.Decision
		refunds int
		read    string
	}{
		{"approve", nil, 1, "R-1"},
		{"deny", func(context.Context, oncekeystore.Approval) oncekeytest.Decision {
			return oncekeytest.Deny("Refunds over 100 need a manager.")
		}, 0,
			"Reviewer's message: Refunds over 100 need a manager."},
		{"wait", func(context.Context, oncekeystore.Approval) oncekeytest.Decision { return oncekeytest.Wait() }, 0, "Error executing tool: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			where(t, func(t *testing.T, on func(oncekeytest.Config) oncekeytest.Config) {
				if tc.name == "wait" && strings.HasSuffix(t.Name(), "devserver") {
					t.Skip("waits the approval's minute out on the test environment only")
				}
				d := &desk{}
				kit := oncekeytest.New(t, on(oncekeytest.Config{Registry: registry(t, oncekey.Effectful), Effects: d.effects, Approve: tc.approve}))
				kit.RegisterWorkflow(RefundOrder)
				kit.RegisterActivity(d)
				var out string
				require.NoError(t, kit.ExecuteWorkflow(RefundOrder, "A-1001").Get(&out))
				require.Contains(t, out, tc.read)
				require.Len(t, d.refunds, tc.refunds)
				kit.RequireAtMostOnce()
				kit.RequireModelSafe()
			})
		})
	}
}
