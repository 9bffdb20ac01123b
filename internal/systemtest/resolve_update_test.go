package systemtest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	okworker "github.com/oncekey/oncekey/worker"
)

// countEvents returns how many events of type typ the history of id holds.
func (e *e2e) countEvents(t *testing.T, id string, typ enumspb.EventType) int {
	t.Helper()
	n := 0
	for _, ev := range e.history(t, id).Events {
		if ev.GetEventType() == typ {
			n++
		}
	}
	return n
}

// On a dev server: resolutions the update's validator refuses come back to the caller as
// *reconcile.RefusedError and leave no event in the reconciliation's history; a malformed signal
// (sent as raw JSON, as the Temporal CLI would) is refused in the status query; the accepted
// update is recorded once (the same RequestID sent again is deduplicated), ResolveOutput returns
// the workflow's output, the blocked workflow gets the result, and the downstream saw one effect.
func TestE2EResolveByUpdate(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.start(t, "resolve-by-update", req, 10*time.Second)
	key := e.waitingKey(t)
	id := reconcile.WorkflowID(key)
	ctx := context.Background()

	var refused *reconcile.RefusedError
	_, err := reconcile.ResolveOutput(ctx, e.c, "someone-else", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied})
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, "tenant")
	_, err = reconcile.ResolveOutput(ctx, e.c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`"T-1"`)})
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, "does not decode into CreateTicket's result type systemtest_test.Ticket")
	require.Zero(t, e.countEvents(t, id, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED), "refused updates leave no history")
	require.Zero(t, e.countEvents(t, id, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED))

	// A signal whose payload is not a Resolution (effect_reference as a number).
	require.NoError(t, e.c.SignalWorkflow(ctx, id, "", reconcile.SignalName, json.RawMessage(`{"outcome":"applied","effect_reference":42}`)))
	require.Eventually(t, func() bool {
		st, err := reconcile.Status(ctx, e.c, key)
		return err == nil && st.InvalidSignals == 1 && st.State == reconcile.StateWaiting
	}, 20*time.Second, 100*time.Millisecond)
	st, err := reconcile.Status(ctx, e.c, key)
	require.NoError(t, err)
	require.Contains(t, st.LastInvalidSignal, "does not decode into a resolution")
	rec, err := e.store.Get(ctx, &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status, "refusals change nothing")

	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, _ := json.Marshal(landed)
	r := reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: body, EffectReference: landed.ID, ResolvedBy: "alice", RequestID: "req-applied-1"}
	out, err := reconcile.ResolveOutput(ctx, e.c, "default", key, r)
	require.NoError(t, err)
	require.Equal(t, reconcile.Applied, out.Outcome)
	require.Equal(t, landed.ID, out.EffectReference)
	require.Equal(t, "alice", out.ResolvedBy)

	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, landed, got)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	require.Equal(t, 1, e.countEvents(t, id, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED))
	require.Equal(t, 1, e.countEvents(t, id, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), "only the malformed signal")
	require.NoError(t, e.replay(t, true, "resolve-by-update", id))
}

// Nobody resolves within the escalation timeout: the reconciliation fails with
// ErrTypeEscalationTimeout (after a malformed signal, which must not stop the timer), the blocked
// call fails unknown, the record stays unknown, and the downstream saw one effect.
func TestE2EEscalation(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	e := setupE2EWith(t, l, oncekey.Policy{Effect: oncekey.Effectful}, func(o *okworker.Options) { o.EscalationTimeout = 3 * time.Second })
	run := e.start(t, "escalation", req, 10*time.Second)
	key := e.waitingKey(t)
	require.NoError(t, e.c.SignalWorkflow(context.Background(), reconcile.WorkflowID(key), "", reconcile.SignalName, "applied"))
	err := run.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, oncekey.ErrTypeIndeterminate, appErr.Type(), "%v", err)
	require.Contains(t, detail(err), "escalation timeout")
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)
	effects, _ := l.counts()
	require.Equal(t, 1, effects)
	require.NoError(t, e.replay(t, true, "escalation", reconcile.WorkflowID(key)))
}

// On a dev server with Workflow Update turned off (frontend.enableUpdateWorkflowExecution=false):
// the update is refused by the server, so ResolveOutput falls back to the signal, watches the
// workflow and returns its output; the resolution lands, the blocked workflow gets the result and
// the downstream saw one effect. The history shows the signal and no update.
func TestE2EResolveFallsBackToTheSignalWithUpdatesOff(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	t.Parallel()
	addr := testenv.OwnTemporal(t, "--dynamic-config-value", "frontend.enableUpdateWorkflowExecution=false")
	l := newLedger(faultLostAfterCommit)
	e := setupE2EOn(t, addr, l, oncekey.Policy{Effect: oncekey.Effectful}, nil)
	run := e.start(t, "resolve-updates-off", req, 10*time.Second)
	key := e.waitingKey(t)
	id := reconcile.WorkflowID(key)
	ctx := context.Background()

	// The server takes no updates here.
	_, err := e.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: reconcile.UpdateName,
		Args: []any{reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	var denied *serviceerror.PermissionDenied
	require.ErrorAs(t, err, &denied, "updates are off on this server: %v", err)

	landed, ok := l.lookup(key)
	require.True(t, ok)
	body, _ := json.Marshal(landed)
	out, err := reconcile.ResolveOutput(ctx, e.c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: body,
		EffectReference: landed.ID, ResolvedBy: "alice", RequestID: "req-signal-1"})
	require.NoError(t, err)
	require.Equal(t, reconcile.Applied, out.Outcome)
	require.Equal(t, "req-signal-1", out.RequestID, "the workflow recorded this resolution")
	require.Equal(t, "alice", out.ResolvedBy)

	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, landed, got)
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	rec, err := e.store.Get(ctx, &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, "alice", rec.ResolvedBy)
	require.Equal(t, 1, e.countEvents(t, id, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), "delivered by the signal")
	require.Zero(t, e.countEvents(t, id, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED))
}
