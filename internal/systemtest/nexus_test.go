package systemtest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	okworker "github.com/oncekey/oncekey/worker"
)

// The Nexus service and its synchronous operation the test's handler serves.
const (
	nexusService   = "tickets"
	nexusOperation = "create-ticket"
)

// NexusTicketWorkflow calls the create-ticket operation of the tickets service at endpoint, at
// step "create_ticket", and returns its ticket.
func NexusTicketWorkflow(ctx workflow.Context, endpoint string, in TicketRequest) (Ticket, error) {
	ctx = oncekey.WithStepID(ctx, "create_ticket")
	c := workflow.NewNexusClient(endpoint, nexusService)
	var t Ticket
	err := c.ExecuteOperation(ctx, nexusOperation, in, workflow.NexusOperationOptions{ScheduleToCloseTimeout: time.Minute}).Get(ctx, &t)
	return t, err
}

// createEndpoint creates the Nexus endpoint name on the test server, routed to the task queue tq
// of namespace "default".
func (e *e2e) createEndpoint(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, CreateNexusEndpoint(context.Background(), e.c, name, "default", e.tq))
}

// setupNexus is setupE2E with the create-ticket operation of the tickets service, Effectful,
// served by l's CreateTicket, behind a Nexus endpoint of its own; it returns the endpoint.
func setupNexus(t *testing.T, l *ledger) (*e2e, string) {
	t.Helper()
	e := setupE2EWith(t, l, oncekey.Policy{Effect: oncekey.Effectful}, func(o *okworker.Options) {
		require.NoError(t, oncekey.SetTool[TicketRequest](o.Registry, nexusOperation, oncekey.Policy{Effect: oncekey.Effectful}))
	})
	e.w.Stop()
	svc := nexus.NewService(nexusService)
	require.NoError(t, svc.Register(nexus.NewSyncOperation(nexusOperation, func(ctx context.Context, in TicketRequest, _ nexus.StartOperationOptions) (Ticket, error) {
		return l.CreateTicket(ctx, in)
	})))
	e.startWorkerRegistering(t, func(w sdkworker.Worker) { w.RegisterNexusService(svc) })
	endpoint := "oncekey-e2e-" + strings.ToLower(strings.ReplaceAll(t.Name(), "_", "-"))
	e.createEndpoint(t, endpoint)
	return e, endpoint
}

// A Nexus operation's synchronous handler whose policy is Effectful commits downstream and
// answers only after the caller's request timed out: the caller (the Temporal server, for the
// workflow's Nexus call) retries the start with the same request and caller key, and the retry
// replays the stored ticket instead of running the handler again. One effect, one body; the
// record is keyed by the caller's key (namespace, workflow ID, step ID).
func TestE2ENexusSyncOperationRetriedByItsCallerReplays(t *testing.T) {
	l := newLedger(faultLateResult)
	e, endpoint := setupNexus(t, l)

	const id = "nexus-sync-retried"
	run, err := e.c.ExecuteWorkflow(context.Background(), clientStart(id, e.tq), NexusTicketWorkflow, endpoint, req)
	require.NoError(t, err)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, onlyTicket(t, l), got, "the caller got the one ticket")
	effects, bodies := l.counts()
	require.Equal(t, 1, effects, "one effect downstream")
	require.Equal(t, 1, bodies, "the caller's retry did not run the handler again")
	require.Contains(t, e.outcomes(), oncekey.OutcomeReplayed, "the caller retried, and the retry was a replay")

	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	rec := res.Records[0]
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	callerKey, _ := json.Marshal([]string{"default", id, "create_ticket"})
	require.Equal(t, string(callerKey), rec.WorkflowID, "keyed by the caller's key")
	require.Equal(t, nexusOperation, rec.StepID)
	want, err := oncekey.Key(oncekey.Policy{}, oncekey.Operation{Namespace: "default", Tenant: "default", WorkflowID: string(callerKey),
		NexusKey: string(callerKey), Tool: nexusOperation, ArgsJSON: mustJSON(t, req)})
	require.NoError(t, err)
	require.Equal(t, want, rec.OperationKey)
	require.NoError(t, e.replay(t, true, id))
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := oncekey.CanonicalArgs([]any{v})
	require.NoError(t, err)
	return b
}

// The handler commits downstream and then fails with a plain error (its response lost): the
// outcome is unknown, so the operation fails, not retryable, with IndeterminateOutcome, and the
// caller's retries never run the handler again. One effect; the record is unknown, for a person or
// a receipt lookup to settle.
func TestE2ENexusSyncOperationUnknownIsNotRetried(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	e, endpoint := setupNexus(t, l)
	const id = "nexus-sync-unknown"
	run, err := e.c.ExecuteWorkflow(context.Background(), clientStart(id, e.tq), NexusTicketWorkflow, endpoint, req)
	require.NoError(t, err)
	err = run.Get(testCtx(t), nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, oncekey.ErrTypeIndeterminate, appErr.Type(), appErr.Error())
	require.Equal(t, oncekey.OutcomeUnknown, oncekey.Label(nil, err).Status, "the caller's model reads unknown")
	requireRuns(t, l, 1, 1)
	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	require.Equal(t, oncekeystore.StatusUnknown, res.Records[0].Status)
}
