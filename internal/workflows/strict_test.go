package workflows_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// A decision with a JSON member reconcile.Decision does not have ("decidedBy" for "decided_by")
// is refused, as an update and as a signal, with a reason naming the member, the name it
// misspells and the members a decision has; nothing is recorded, and a correct one then decides.
func TestApprovalDecisionWithUnknownMemberIsRefused(t *testing.T) {
	env, store := setupApproval(t)
	const bad = `{"decision":"approve","tenant":"t1","decidedBy":"ada","reason":"ok"}`
	var upd decideResult
	var rep reconcile.ApprovalReport
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(reconcile.DecideUpdateName, "u-bad", &testsuite.TestUpdateCallback{
			OnAccept:   func() { upd.accepted = true },
			OnReject:   func(err error) { upd.rejected = err },
			OnComplete: func(any, error) {},
		}, json.RawMessage(bad))
		env.SignalWorkflow(reconcile.DecideSignalName, json.RawMessage(`{"decision":"approve","tenant":"t1","decidedBy":"ada","request_id":"s-1"}`))
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		rep = queryApproval(t, env)
		require.Equal(t, oncekeystore.ApprovalPending, approvalOf(t, store).Status, "refusals write nothing")
		env.SignalWorkflow(reconcile.DecideSignalName, json.RawMessage(`{"decision":"approve","tenant":"t1","decided_by":"ada"}`))
	}, 2*time.Minute)
	out := runApproval(t, env, approvalInput)

	require.False(t, upd.accepted)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(upd.rejected, &appErr), "got %v", upd.rejected)
	require.Equal(t, reconcile.ErrTypeDecisionRefused, appErr.Type())
	for _, reason := range []string{appErr.Error(), rep.LastInvalidSignal} {
		require.Contains(t, reason, `unknown member "decidedBy" (did you mean "decided_by"?)`)
		require.Contains(t, reason, "decision, tenant, episode, decided_by, reason, request_id")
	}
	require.Equal(t, "s-1", rep.LastInvalidRequestID)
	require.Equal(t, 1, rep.InvalidSignals)
	require.Equal(t, reconcile.ApprovalStateWaiting, rep.State)
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
	require.Equal(t, "ada", out.DecidedBy)
	require.Equal(t, "ada", approvalOf(t, store).DecidedBy)
}

// A resolution with a JSON member reconcile.Resolution does not have ("resolvedBy") is refused,
// as an update and as a signal, naming it; the record stays unknown until a correct one.
func TestResolutionWithUnknownMemberIsRefused(t *testing.T) {
	env, store := setupUnknown(t, nil)
	var upd updateResult
	var st reconcile.StatusReport
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(reconcile.UpdateName, "u-bad", &testsuite.TestUpdateCallback{
			OnAccept:   func() { upd.accepted = true },
			OnReject:   func(err error) { upd.rejected = err },
			OnComplete: func(any, error) {},
		}, json.RawMessage(`{"outcome":"not_applied","epoch":1,"resolvedBy":"gina"}`))
		env.SignalWorkflow(reconcile.SignalName, json.RawMessage(`{"outcome":"not_applied","epoch":1,"resolvedBy":"gina","Note":"n"}`))
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		st = status(t, env)
		requireUnknown(t, store)
		env.SignalWorkflow(reconcile.SignalName, json.RawMessage(`{"outcome":"not_applied","epoch":1,"resolved_by":"gina"}`))
	}, 2*time.Minute)
	out := run(t, env)

	requireRefused(t, &upd, reconcile.ErrTypeRefused, `unknown member "resolvedBy" (did you mean "resolved_by"?)`)
	require.Contains(t, st.LastInvalidSignal, `unknown member "resolvedBy" (did you mean "resolved_by"?)`)
	require.NotContains(t, st.LastInvalidSignal, `"Note"`, "a member in another case is the field's, as encoding/json reads it")
	require.Contains(t, st.LastInvalidSignal, "outcome, epoch, effect_reference, result, note, resolved_by, tenant, request_id")
	require.Equal(t, reconcile.NotApplied, out.Outcome)
	require.Equal(t, "gina", out.ResolvedBy)
}
