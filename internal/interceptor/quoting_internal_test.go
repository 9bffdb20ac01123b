package interceptor

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/internal/testing/shelltest"
)

// The cancellation path's log names an `oncekey list` command; a hostile tenant or schema is one
// inert word in it.
func TestListUnknownCommandQuotesHostileValues(t *testing.T) {
	for _, v := range shell.Hostile {
		if strings.ContainsRune(v, 0) {
			continue
		}
		cmd := listUnknownCommand(v, "s-"+v)
		require.NotContains(t, cmd, "`")
		require.Equal(t, []string{"oncekey", "list", "--status", "unknown", "--tenant", v, "--schema", "s-" + v}, shelltest.Args(t, cmd), cmd)
	}
	require.Equal(t, "oncekey list --status unknown --tenant acme", listUnknownCommand("acme", ""))
}

// The approval workflow's summary and details say it asks for or reads the approval (a repeat's
// run asks nobody), and a call without a step ID says so instead of a blank step.
func TestApprovalTextsNoStepIDNoQueue(t *testing.T) {
	in := decision.ApprovalInput{Tenant: "acme", OperationKey: "ok1_k", Tool: "RefundOrder", WorkflowID: "refund-E", Summary: "refund 120.00 EUR", Timeout: time.Hour}
	summary, details := approvalTexts(in)
	require.Equal(t, "oncekey: approval of RefundOrder: refund 120.00 EUR", summary)
	require.Contains(t, details, "The approval of RefundOrder in workflow refund-E (no step ID) (tenant acme, operation key ok1_k): refund 120.00 EUR")
	require.Contains(t, details, "or reads the decision already recorded for the key")
	require.NotContains(t, details, "step  of")
	require.NotContains(t, details, "waits for a person's approval")
	in.StepID = "refund"
	_, details = approvalTexts(in)
	require.Contains(t, details, "The approval of RefundOrder, step refund of workflow refund-E (tenant acme")
}
