package desk

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey/examples/ticketdesk/internal/downstream"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeytest"
	"github.com/oncekey/oncekey/pgstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// kitSeed draws a mix in which the demo's requests meet every fault of the kit;
// TestDemoToolsUnderTheKit checks that they do.
const kitSeed = 19

// kitRequests are the shipped requests of standard-tier customers: tickets, confirmations and
// refunds (a gold customer's goodwill credit, the Transactional tool, is proven by the demo).
func kitRequests(t *testing.T) ([]Request, []Customer) {
	t.Helper()
	raw, err := os.ReadFile("../../testdata/requests.jsonl")
	require.NoError(t, err)
	cb, err := os.ReadFile("../../testdata/customers.json")
	require.NoError(t, err)
	var customers []Customer
	require.NoError(t, json.Unmarshal(cb, &customers))
	tier := map[string]string{}
	for _, c := range customers {
		tier[c.ID] = c.Tier
	}
	var out []Request
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r Request
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		if tier[r.CustomerID] == "standard" && len(out) < 4 {
			out = append(out, r)
		}
	}
	return out, customers
}

// deskKit plays the requests through the demo's agent workflow and tools, registration as the
// demo has it, on a dev server with Postgres, under a seeded mix of every fault; oncekey on, or
// off as the control. The services keep their own ledgers; the kit injects every fault.
func deskKit(t *testing.T, disabled bool) (*oncekeytest.Kit, *stack) {
	requests, customers := kitRequests(t)
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	none := downstream.NoFaults()
	cfg := Config{Customers: customers, Pool: pool, Faults: &none, Seed: 1, KillRequest: "-", DuplicateRequest: "-", RepeatPercent: -1, ChangePercent: -1}
	cfg.Model.Name = "scripted"
	st, err := startStack(cfg, disabled, "kit")
	require.NoError(t, err)
	t.Cleanup(st.close)

	kit := oncekeytest.New(t, oncekeytest.Config{
		Registry: st.registry,
		Effects: func() map[string]int {
			return map[string]int{
				ToolCreateTicket:     st.services.Tickets.Ledger.Stats().Effects,
				ToolSendConfirmation: st.services.Email.Ledger.Stats().Effects,
				ToolIssueRefund:      st.services.Payments.Ledger.Stats().Effects,
			}
		},
		Plan:     oncekeytest.Mix{Seed: kitSeed, AttemptPercent: 60, CallPercent: 30},
		Disabled: disabled,
		Store:    pgstore.New(pool, nil),
		Client:   testenv.Temporal(t),
		// One ticket, one refund per request; one e-mail per request and template. The model's
		// trace IDs differ between runs, so the arguments alone do not name the intention.
		Intent: func(c oncekeytest.Call, args json.RawMessage) string {
			var a struct {
				Template string `json:"template"`
			}
			_ = json.Unmarshal(args, &a)
			return c.WorkflowID + " " + c.Tool + " " + a.Template
		},
	})
	kit.RegisterWorkflowWithOptions((&Agent{Registry: st.registry}).Run, workflow.RegisterOptions{Name: AgentWorkflow})
	kit.RegisterActivity(st.tools)
	kit.RegisterActivityAs(st.model.CallModel, ActivityCallModel)
	kit.RegisterActivityAs(st.proxy.CallMcpTool, ActivityCallMcpTool)
	for _, r := range requests {
		var res AgentResult
		require.NoError(t, kit.ExecuteWorkflow(AgentWorkflow, AgentInput{Request: r, Tenant: "kit", Plain: disabled}).Get(&res))
		if res.Answer == "" {
			for _, c := range res.Calls {
				t.Logf("%s turn %d %s %s: %+v", r.ID, c.Turn, c.Tool, c.Arguments, c.Outcome)
			}
			t.Logf("turns %d messages %d last %+v", res.Turns, len(res.Messages), res.Messages[len(res.Messages)-1])
			t.Logf("\n%s", kit.Report())
		}
		require.NotEmpty(t, res.Answer, "%s: the agent answered (out of turns: %v)", r.ID, res.OutOfTurns)
	}
	t.Logf("oncekey off: %v\n%s", disabled, kit.Report())
	return kit, st
}

// TestDemoToolsUnderTheKit proves the demo's agent and tools with the test kit: under a seeded
// mix of every fault, each ticket, confirmation and refund lands once, and the model reads no
// operator detail; without oncekey the same plan lands doubles.
func TestDemoToolsUnderTheKit(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a dev server")
	}
	kit, st := deskKit(t, false)
	kit.RequireAtMostOnce()
	kit.RequireModelSafe()
	for _, s := range []*downstream.Service{st.services.Tickets, st.services.Email, st.services.Payments} {
		require.Zero(t, s.Ledger.Stats().DoubleEffects, "%s: by the service's own identities", s.Name)
	}
	faults := kit.Report().Faults()
	for f := oncekeytest.FailBeforeBody; f <= oncekeytest.Rerun; f++ {
		require.Positive(t, faults[f], "the seed's mix meets %s", f)
	}

	control, _ := deskKit(t, true)
	require.Positive(t, control.Report().Doubles(), "without oncekey the same plan lands double effects")
}
