package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeytest"
)

// kitSeed draws a mix in which the two conversations meet every fault of the kit (a failure
// before the body, a stall, a lost answer, a crash mid-body, a re-proposal, a reset and a
// re-run); TestAgentLoopUnderTheKit checks that they do.
const kitSeed = 102

// agentKit runs both conversations of the cookbook-shaped agent, registration unchanged, on the
// SDK's test environment under a seeded mix of every fault, oncekey on or off, and returns the
// kit and the services' ledger.
func agentKit(t testing.TB, seed int64, disabled bool) (*oncekeytest.Kit, *Services) {
	svc, err := StartServices(Faults{})
	require.NoError(t, err)
	t.Cleanup(svc.Close)
	model, err := StartModel(Scripts())
	require.NoError(t, err)
	t.Cleanup(model.Close)
	hc := NewHTTPClient()
	reg, err := NewRegistry(svc.URL, hc)
	require.NoError(t, err)

	kit := oncekeytest.New(t, oncekeytest.Config{
		Registry: reg,
		Effects: func() map[string]int {
			l := svc.Ledger()
			return map[string]int{ToolTicket: len(l.Tickets), ToolRefund: len(l.Refunds)}
		},
		Plan:     oncekeytest.Mix{Seed: seed, AttemptPercent: 60, CallPercent: 30},
		Disabled: disabled,
		// One refund per order, whichever conversation asks (the Registry keys refunds so).
		Intent: func(c oncekeytest.Call, args json.RawMessage) string {
			if c.Tool == ToolRefund {
				var a struct {
					OrderID string `json:"order_id"`
				}
				_ = json.Unmarshal(args, &a)
				return "order " + a.OrderID
			}
			return c.WorkflowID + " " + c.Tool + " " + string(args)
		},
	})
	kit.RegisterWorkflow(AgentWorkflow)
	kit.RegisterActivity(&Activities{ModelBaseURL: model.BaseURL, APIKey: "scripted", Tools: NewTools(svc.URL, hc)})
	for _, user := range []string{FirstConversation, SecondConversation} {
		var answer string
		require.NoError(t, kit.ExecuteWorkflow(AgentWorkflow, user).Get(&answer))
		require.Equal(t, Scripts()[user].Final, answer)
	}
	t.Logf("oncekey off: %v\n%s", disabled, kit.Report())
	return kit, svc
}

// TestAgentLoopUnderTheKit proves the cookbook-shaped agent (one ToolExecutor, map arguments,
// err.Error() handed to the model) with the test kit: under a seeded mix of every fault, each
// ticket and the refund land once, and the model reads no operator detail; without oncekey the
// same plan lands doubles.
func TestAgentLoopUnderTheKit(t *testing.T) {
	kit, svc := agentKit(t, kitSeed, false)
	kit.RequireAtMostOnce()
	kit.RequireModelSafe()
	l := svc.Ledger()
	require.Len(t, l.Tickets, 2, "one ticket per conversation")
	require.Len(t, l.Refunds, 1, "one refund for the order across both conversations")
	faults := kit.Report().Faults()
	for f := oncekeytest.FailBeforeBody; f <= oncekeytest.Rerun; f++ {
		require.Positive(t, faults[f], "the seed's mix meets %s", f)
	}

	control, _ := agentKit(t, kitSeed, true)
	require.Positive(t, control.Report().Doubles(), "without oncekey the same plan lands double effects")
}
