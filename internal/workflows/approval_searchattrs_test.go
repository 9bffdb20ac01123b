package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/reconcile"
)

// upserts is what an approval workflow upserted: its OncekeyStatus values in order, and the
// OncekeyWaitingSince values it set.
type upserts struct {
	statuses []string
	since    []time.Time
}

// recordUpserts makes env record the workflow's search attribute upserts, each checked to carry
// the tool and tenant of approvalInput.
func recordUpserts(t *testing.T, env *testsuite.TestWorkflowEnvironment) *upserts {
	t.Helper()
	u := &upserts{}
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		status, _ := sa.GetKeyword(decision.SearchAttributeStatus)
		u.statuses = append(u.statuses, status)
		tool, _ := sa.GetKeyword(decision.SearchAttributeTool)
		tenant, _ := sa.GetKeyword(decision.SearchAttributeTenant)
		require.Equal(t, approvalInput.Tool, tool)
		require.Equal(t, approvalInput.Tenant, tenant)
		if since, ok := sa.GetTime(decision.SearchAttributeWaitingSince); ok {
			u.since = append(u.since, since)
		}
	}).Return(nil)
	return u
}

// With ApprovalInput.SearchAttributes, the approval workflow sets OncekeyStatus on every change:
// requesting, waiting (with OncekeyWaitingSince, when it was asked), then the decision; a call
// found decided or asked for other arguments never waits. Without it, nothing is upserted.
func TestApprovalSearchAttributes(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		env, _ := setupApproval(t)
		u := recordUpserts(t, env)
		runApproval(t, env, approvalInput)
		require.Empty(t, u.statuses)
	})
	on := approvalInput
	on.SearchAttributes = true
	t.Run("timed out", func(t *testing.T) {
		env, store := setupApproval(t)
		u := recordUpserts(t, env)
		runApproval(t, env, on)
		require.Equal(t, []string{decision.SearchStatusRequestingApproval, reconcile.SearchStatusWaitingForApproval, reconcile.SearchStatusTimedOut}, u.statuses)
		asked := approvalOf(t, store).RequestedAt
		require.Len(t, u.since, 2, "set once waiting, kept when decided")
		for _, s := range u.since {
			require.True(t, asked.Equal(s), "waiting since %s, asked at %s", s, asked)
		}
	})
	t.Run("denied by update", func(t *testing.T) {
		env, _ := setupApproval(t)
		u := recordUpserts(t, env)
		var res decideResult
		env.RegisterDelayedCallback(func() {
			sendDecision(env, "u1", reconcile.Decision{Decision: reconcile.Deny, Tenant: "t1", DecidedBy: "bob", Reason: "over budget"}, &res)
		}, time.Minute)
		runApproval(t, env, on)
		require.True(t, res.accepted)
		require.Equal(t, []string{decision.SearchStatusRequestingApproval, reconcile.SearchStatusWaitingForApproval, reconcile.SearchStatusDenied}, u.statuses)
	})
	for fp, want := range map[string]string{"fp1": reconcile.SearchStatusApproved, "fp2": reconcile.SearchStatusOtherArguments} {
		t.Run("found decided "+fp, func(t *testing.T) {
			env, store := setupApproval(t)
			approvedBefore(t, store)
			u := recordUpserts(t, env)
			in := on
			in.Fingerprint = fp
			runApproval(t, env, in)
			require.Equal(t, []string{decision.SearchStatusRequestingApproval, want}, u.statuses)
			require.Empty(t, u.since, "it never waited")
		})
	}
}
