package systemtest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/internal/wire"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// Header bindings (okworker.Options.HeaderKeys) on a dev server and Postgres. The attacker can
// write to the namespace (start workflows, run a workflow worker of their own, with or without
// oncekey's interceptor, copy headers from any history) but holds no header key: they cannot
// make a call run in a tenant or at a step ID of their choosing. The fake downstream counts the
// effects.

var (
	keyOld = oncekey.HeaderKey{ID: "deploy-1", Secret: bytes.Repeat([]byte{0x11}, 32)}
	keyNew = oncekey.HeaderKey{ID: "deploy-2", Secret: bytes.Repeat([]byte{0x22}, 32)}
)

// withHeaderKeys sets the worker's HeaderKeys.
func withHeaderKeys(keys ...oncekey.HeaderKey) func(*worker.Options) {
	return func(o *worker.Options) { o.HeaderKeys = keys }
}

// RemoteTicketWorkflow makes one CreateTicket call at step "create_ticket" on the activity
// worker's task queue, in tenant (when not "") as the workflow's oncekey.WithTenant.
func RemoteTicketWorkflow(ctx workflow.Context, in TicketRequest, activityQueue, tenant string) (Ticket, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: activityQueue, StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second},
	})
	ctx = oncekey.WithStepID(ctx, "create_ticket")
	if tenant != "" {
		ctx = oncekey.WithTenant(ctx, tenant)
	}
	var t Ticket
	err := workflow.ExecuteActivity(ctx, "CreateTicket", in).Get(ctx, &t)
	return t, err
}

// workflowWorker starts a workflow worker of RemoteTicketWorkflow on a task queue of its own
// (named by suffix), with oncekey's plugin under keys (none: the plugin without HeaderKeys),
// and returns its client and task queue. It runs no activity.
func (e *e2e) workflowWorker(t *testing.T, suffix string, keys ...oncekey.HeaderKey) (client.Client, string) {
	t.Helper()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(e.l.CreateTicket, oncekey.Policy{Effect: e.effect}))
	plugin, err := worker.NewPlugin(worker.Options{Store: e.store, Registry: reg, HeaderKeys: keys})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := e.tq + "-" + suffix
	w := sdkworker.New(c, tq, sdkworker.Options{})
	w.RegisterWorkflow(RemoteTicketWorkflow)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return c, tq
}

// forger starts a workflow worker without oncekey's interceptor on a task queue of its own (named
// by suffix), putting fields on the activities ForgedCallWorkflow schedules.
func (e *e2e) forger(t *testing.T, suffix string, fields map[string]*commonpb.Payload) (client.Client, string) {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := e.tq + "-" + suffix
	w := sdkworker.New(c, tq, sdkworker.Options{Interceptors: []tinterceptor.WorkerInterceptor{&headerCopier{fields: fields}}})
	w.RegisterWorkflow(ForgedCallWorkflow)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return c, tq
}

// requireUnbound checks that err is the call refused as oncekey.UnboundHeaders.
func requireUnbound(t *testing.T, err error) {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "refused, got %v", err)
	require.Equal(t, oncekey.ErrTypeUnboundHeaders, appErr.Type(), appErr.Error())
	require.True(t, appErr.NonRetryable())
}

// records returns the records of tenant ("" for all).
func (e *e2e) records(t *testing.T, tenant string) []*oncekeystore.Record {
	t.Helper()
	res, err := e.store.List(context.Background(), &oncekeystore.ListParams{Tenant: tenant})
	require.NoError(t, err)
	return res.Records
}

// scheduledHeaders returns the header fields of the first activity workflow id scheduled, as its
// history holds them: what anyone who can read the namespace can copy.
func (e *e2e) scheduledHeaders(t *testing.T, id string) map[string]*commonpb.Payload {
	t.Helper()
	for _, ev := range e.history(t, id).GetEvents() {
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			return ev.GetActivityTaskScheduledEventAttributes().GetHeader().GetFields()
		}
	}
	t.Fatalf("workflow %s scheduled no activity", id)
	return nil
}

// (a) Workers holding the same key: a call with a tenant and a step ID runs once, its repeat
// replays; an Effectful call without a step ID that is re-run carries the first attempt's
// activity ID, bound again, and runs once; the histories replay with and without the keys.
func TestE2EHeaderBindingSameKey(t *testing.T) {
	l := newLedger(faultNotApplied)
	e := setupE2EWith(t, l, oncekey.Policy{Effect: oncekey.Effectful}, withHeaderKeys(keyOld))

	// A re-run of a call without a step ID: the first attempt is NotApplied, the second carries
	// the first attempt's activity ID (wire.HeaderFirstActivityID).
	var got Ticket
	require.NoError(t, e.startWith(t, "bound-rerun", req, CallOptions{StartToClose: 10 * time.Second, NoStepID: true}).Get(testCtx(t), &got))
	requireRuns(t, l, 1, 2)
	require.NotEmpty(t, e.scheduledHeaders(t, "bound-rerun")[wire.HeaderBinding], "the call carries a binding")

	// A call in tenant "acme" at a step ID, from a workflow worker holding the key; then its
	// repeat (the same workflow ID, step and arguments) replays.
	wc, wtq := e.workflowWorker(t, "wf", keyOld)
	for i, want := range []oncekey.Outcome{oncekey.OutcomeApplied, oncekey.OutcomeReplayed} {
		run, err := wc.ExecuteWorkflow(context.Background(), clientStart("bound-acme", wtq), RemoteTicketWorkflow, req, e.tq, "acme")
		require.NoError(t, err)
		var out Ticket
		require.NoError(t, run.Get(testCtx(t), &out), "run %d", i)
		require.Equal(t, want, e.outcomes()[len(e.outcomes())-1], "run %d", i)
	}
	requireRuns(t, l, 2, 3)
	require.Len(t, e.records(t, "acme"), 1, "the call is claimed in the tenant the workflow gave it")

	// Replay: with the keys, and by a worker without them (headers are not compared on replay).
	require.NoError(t, e.replay(t, true, "bound-rerun"))
	e.replayWith(t, "bound-rerun")
}

// replayWith replays the history of workflow id with oncekey's plugin under keys (none: without
// HeaderKeys).
func (e *e2e) replayWith(t *testing.T, id string, keys ...oncekey.HeaderKey) {
	t.Helper()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(e.l.CreateTicket, oncekey.Policy{Effect: e.effect}))
	plugin, err := worker.NewPlugin(worker.Options{Store: e.store, Registry: reg, HeaderKeys: keys})
	require.NoError(t, err)
	r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{Plugins: []sdkworker.Plugin{plugin}})
	require.NoError(t, err)
	registerWorkflows(r)
	require.NoError(t, r.ReplayWorkflowHistory(quiet{}, e.history(t, id)), "replay %s with keys %v", id, len(keys))
}

// (b) An attacker's workflow worker without oncekey's interceptor sets tenant "other" and a step
// ID by hand, with no binding, with a binding under a key the worker does not list, or with a
// binding under the real key's ID and another secret; a workflow worker with oncekey's
// interceptor and no key sets tenant "other". None runs, nothing is claimed in "other". A call
// without any of those headers still runs, in the worker's default tenant.
func TestE2EHeaderBindingRefusesAttacker(t *testing.T) {
	l := newLedger()
	e := setupE2EWith(t, l, oncekey.Policy{Effect: oncekey.Effectful}, withHeaderKeys(keyOld))
	dc := converter.GetDefaultDataConverter()
	forged := func(key *oncekey.HeaderKey) map[string]*commonpb.Payload {
		fields := oncekeyHeaders(t, req, true)
		var err error
		fields[wire.HeaderTenant], err = dc.ToPayload("other")
		require.NoError(t, err)
		if key != nil {
			doc, err := oncekey.CanonicalArgs([]any{req})
			require.NoError(t, err)
			s := oncekey.HeaderStatement{Namespace: "default", WorkflowID: "forged-" + key.ID, ActivityType: "CreateTicket",
				Tenant: "other", StepID: "create_ticket", ArgsDigest: sha256.Sum256(doc)}
			fields[wire.HeaderBinding], err = dc.ToPayload(oncekey.BindHeaders(*key, &s))
			require.NoError(t, err)
		}
		return fields
	}
	stranger := oncekey.HeaderKey{ID: "stranger", Secret: bytes.Repeat([]byte{0x33}, 32)}
	sameID := oncekey.HeaderKey{ID: keyOld.ID, Secret: bytes.Repeat([]byte{0x44}, 32)}
	for _, c := range []struct {
		name string
		key  *oncekey.HeaderKey
	}{{"none", nil}, {stranger.ID, &stranger}, {"same-id", &sameID}} {
		id := "forged-" + c.name
		if c.key != nil {
			id = "forged-" + c.key.ID
		}
		fc, ftq := e.forger(t, "forger-"+c.name, forged(c.key))
		run, err := fc.ExecuteWorkflow(context.Background(), clientStart(id, ftq), ForgedCallWorkflow, req, e.tq)
		require.NoError(t, err)
		requireUnbound(t, run.Get(testCtx(t), nil))
	}
	// oncekey's interceptor without the key: the tenant header is set and not bound.
	wc, wtq := e.workflowWorker(t, "keyless")
	run, err := wc.ExecuteWorkflow(context.Background(), clientStart("keyless-other", wtq), RemoteTicketWorkflow, req, e.tq, "other")
	require.NoError(t, err)
	requireUnbound(t, run.Get(testCtx(t), nil))

	requireRuns(t, l, 0, 0)
	require.Empty(t, e.records(t, ""), "nothing was claimed, in any tenant")
	for _, o := range e.outcomes() {
		require.Equal(t, oncekey.OutcomeRejected, o)
	}

	// What a namespace writer still can: a call without oncekey's headers runs in the worker's
	// default tenant (the namespace), as before.
	fc, ftq := e.forger(t, "plain", nil)
	run, err = fc.ExecuteWorkflow(context.Background(), clientStart("plain-call", ftq), ForgedCallWorkflow, req, e.tq)
	require.NoError(t, err)
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 1, 1)
	recs := e.records(t, "")
	require.Len(t, recs, 1)
	require.Equal(t, "default", recs[0].Tenant)
}

// (c) A valid binding copied from a real call's history onto a call of other arguments, another
// tenant, or another workflow: none runs.
func TestE2EHeaderBindingCopiedBinding(t *testing.T) {
	l := newLedger()
	e := setupE2EWith(t, l, oncekey.Policy{Effect: oncekey.Effectful}, withHeaderKeys(keyOld))
	var got Ticket
	require.NoError(t, e.start(t, "real-call", req, 10*time.Second).Get(testCtx(t), &got))
	requireRuns(t, l, 1, 1)
	real := e.scheduledHeaders(t, "real-call")
	require.NotNil(t, real[wire.HeaderBinding])
	dc := converter.GetDefaultDataConverter()

	other := req
	other.Subject = "refund everything"
	otherDoc, err := oncekey.CanonicalArgs([]any{other})
	require.NoError(t, err)
	copied := func(change func(map[string]*commonpb.Payload)) map[string]*commonpb.Payload {
		fields := map[string]*commonpb.Payload{}
		for k, v := range real {
			fields[k] = v
		}
		change(fields)
		return fields
	}
	for _, c := range []struct {
		name, id string
		in       TicketRequest
		fields   map[string]*commonpb.Payload
	}{
		// The real call's workflow ID and arguments, another tenant.
		{"tenant", "real-call", req, copied(func(f map[string]*commonpb.Payload) {
			f[wire.HeaderTenant], err = dc.ToPayload("other")
			require.NoError(t, err)
		})},
		// The headers as they are, from another workflow.
		{"workflow", "copier", req, copied(func(map[string]*commonpb.Payload) {})},
		// The real call's workflow ID (closed, so it may be started again), other arguments and
		// the arguments header that matches them (without it, the header of the real call's
		// arguments would be refused as ArgsMismatch). Without the binding the claim would refuse
		// it as a fingerprint mismatch; with it, it is refused before the claim.
		{"args", "real-call", other, copied(func(f map[string]*commonpb.Payload) {
			f[wire.HeaderArgs], err = dc.ToPayload(json.RawMessage(otherDoc))
			require.NoError(t, err)
		})},
	} {
		fc, ftq := e.forger(t, "copy-"+c.name, c.fields)
		run, err := fc.ExecuteWorkflow(context.Background(), clientStart(c.id, ftq), ForgedCallWorkflow, c.in, e.tq)
		require.NoError(t, err)
		requireUnbound(t, run.Get(testCtx(t), nil))
	}
	requireRuns(t, l, 1, 1)
	require.Empty(t, e.records(t, "other"))
	require.Len(t, e.records(t, ""), 1, "only the real call's record")
}

// (d) Rotation by rolling deploys: the activity worker lists the old key and the new one; a
// workflow worker binding with the new key (listed first) is verified, as is one still binding
// with the old. Once the old key is dropped from an activity worker, a workflow worker still
// binding with it is refused.
func TestE2EHeaderBindingRotation(t *testing.T) {
	l := newLedger()
	e := setupE2EWith(t, l, oncekey.Policy{Effect: oncekey.Effectful}, withHeaderKeys(keyOld, keyNew))
	for i, keys := range [][]oncekey.HeaderKey{{keyNew, keyOld}, {keyOld}} {
		wc, wtq := e.workflowWorker(t, "rotate-"+keys[0].ID, keys...)
		in := req
		in.RequestID = keys[0].ID
		run, err := wc.ExecuteWorkflow(context.Background(), clientStart("rotate-"+keys[0].ID, wtq), RemoteTicketWorkflow, in, e.tq, "acme")
		require.NoError(t, err)
		var got Ticket
		require.NoError(t, run.Get(testCtx(t), &got), "workflow worker %d", i)
	}
	requireRuns(t, l, 2, 2)

	// The old key dropped: an activity worker listing only the new key, on a task queue of its own.
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(l.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	plugin, err := worker.NewPlugin(worker.Options{Store: e.store, Registry: reg, HeaderKeys: []oncekey.HeaderKey{keyNew}})
	require.NoError(t, err)
	ac, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(ac.Close)
	atq := e.tq + "-new-only"
	aw := sdkworker.New(ac, atq, sdkworker.Options{})
	aw.RegisterActivity(l.CreateTicket)
	require.NoError(t, aw.Start())
	t.Cleanup(aw.Stop)

	wc, wtq := e.workflowWorker(t, "straggler", keyOld)
	in := req
	in.RequestID = "straggler"
	run, err := wc.ExecuteWorkflow(context.Background(), clientStart("rotate-straggler", wtq), RemoteTicketWorkflow, in, atq, "acme")
	require.NoError(t, err)
	requireUnbound(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 2, 2)

	wc, wtq = e.workflowWorker(t, "moved", keyNew)
	in.RequestID = "moved"
	run, err = wc.ExecuteWorkflow(context.Background(), clientStart("rotate-moved", wtq), RemoteTicketWorkflow, in, atq, "acme")
	require.NoError(t, err)
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 3, 3)
}

// Replay: a history recorded without HeaderKeys replays on a worker that has them, and one
// recorded with them replays on a worker without (headers are not compared on replay).
func TestE2EHeaderBindingReplayAcrossTheSwitch(t *testing.T) {
	l := newLedger(faultNotApplied)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	var got Ticket
	require.NoError(t, e.startWith(t, "unbound-history", req, CallOptions{StartToClose: 10 * time.Second, NoStepID: true}).Get(testCtx(t), &got))
	require.Nil(t, e.scheduledHeaders(t, "unbound-history")[wire.HeaderBinding])
	e.replayWith(t, "unbound-history", keyOld)
}

// The check after an Idempotent call's last attempt timed out (wire.HeaderCheck) is scheduled
// with its headers bound too: the record, applied, answers it. One effect, one body.
func TestE2EHeaderBindingCheckAfterTimeout(t *testing.T) {
	l := newLedger(faultLateResult)
	e := setupE2EWith(t, l, oncekey.Policy{Effect: oncekey.Idempotent}, withHeaderKeys(keyOld))
	tr := e.labelled(t, "bound-check")
	require.Equal(t, oncekey.OutcomeApplied, tr.Status, "%+v", tr)
	require.Equal(t, oncekey.ReasonConfirmed, tr.Reason)
	requireRuns(t, l, 1, 1)
	for _, o := range e.outcomes() {
		require.NotEqual(t, oncekey.OutcomeRejected, o, "no call was refused")
	}
}

// A call a person approved with edited arguments is scheduled with the edited arguments' header
// and bound again over them: the edit runs once.
func TestE2EHeaderBindingApprovedEdit(t *testing.T) {
	l := newLedger()
	e := setupE2EWith(t, l, approvalPolicy(0), withHeaderKeys(keyOld))
	run := e.startAgent(t, "bound-edit", 1)
	a := e.pendingApproval(t)
	_, err := reconcile.Decide(context.Background(), e.c, a.OperationKey, editDecision(`{"customer":"acme","subject":"printer smoking","request_id":"r-1"}`))
	require.NoError(t, err)
	var got []oncekey.ToolResult
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, oncekey.OutcomeApplied, got[0].Status, got[0].Text)
	require.Equal(t, oncekey.ReasonEdited, got[0].Reason)
	requireRuns(t, l, 1, 1)
	require.Equal(t, "printer smoking", onlyTicket(t, l).Subject, "the edited arguments ran")
}

// The default path with header keys on: one generic ToolExecutor activity with map arguments and a
// Route, no step IDs, the plugin given HeaderKeys. The workflow side binds the whole input document
// it sends (the Route's arguments are a part of it) and the worker verifies the same: every call
// runs once, a repeat of a ticket replays, and each Effectful call has one record.
func TestE2EHeaderBindingToolExecutor(t *testing.T) {
	t.Parallel()
	b := &toolbox{requests: map[string]int{}}
	reg := agentToolsRegistry(t)
	require.NoError(t, reg.Route(b.ToolExecutor, oncekey.Route{ToolPaths: []string{"tool_name"}, Args: "arguments"}))
	keys := []oncekey.HeaderKey{{ID: "deploy-1", Secret: bytes.Repeat([]byte{9}, 32)}}
	store, c := agentToolsWorker(t, reg, b, func(o *worker.Options) { o.HeaderKeys = keys })
	ticket := ToolExecutorInput{ToolName: "create_ticket", Arguments: map[string]interface{}{"subject": "printer on fire", "priority": 2}}
	got := runAgentTools(t, c, []ToolExecutorInput{
		{ToolName: "get_weather", Arguments: map[string]interface{}{"city": "Lyon"}},
		ticket,
		{ToolName: "refund", Arguments: map[string]interface{}{"order": "o-1", "amount_cents": 1250}},
		ticket,
	})
	for i, r := range got {
		require.Empty(t, r.Error, "call %d: %s", i, r.Detail)
	}
	require.Equal(t, got[1].Result, got[3].Result, "the repeated ticket replays the first one's result")
	require.Equal(t, map[string]int{"get_weather": 1, "create_ticket": 1, "refund": 1}, b.counts())
	res, err := store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	tools := map[string]int{}
	for _, rec := range res.Records {
		require.Equal(t, oncekeystore.StatusApplied, rec.Status)
		tools[rec.Tool]++
	}
	require.Equal(t, map[string]int{"create_ticket": 1, "refund": 1}, tools)
}

// Turning header keys on in a deployment that runs (okworker.Options.HeaderKeysReportOnly): an
// activity worker that checks the bindings without refusing runs a call from a workflow worker not
// yet given the keys (its tenant header, which oncekey's workflow side always sends, unbound) in
// the tenant it names, as without header keys, beside a call from a workflow worker that binds.
// Once report-only is off, the keyless worker's calls are refused (TestE2EHeaderBindingRefusesAttacker).
func TestE2EHeaderBindingReportOnly(t *testing.T) {
	l := newLedger()
	e := setupE2EWith(t, l, oncekey.Policy{Effect: oncekey.Effectful}, func(o *worker.Options) {
		o.HeaderKeys, o.HeaderKeysReportOnly = []oncekey.HeaderKey{keyOld}, true
	})
	wc, wtq := e.workflowWorker(t, "keyless")
	run, err := wc.ExecuteWorkflow(context.Background(), clientStart("report-only-keyless", wtq), RemoteTicketWorkflow, req, e.tq, "acme")
	require.NoError(t, err)
	require.NoError(t, run.Get(testCtx(t), nil), "an unbound call runs under report-only")
	kc, ktq := e.workflowWorker(t, "keyed", keyOld)
	run, err = kc.ExecuteWorkflow(context.Background(), clientStart("report-only-keyed", ktq), RemoteTicketWorkflow, req, e.tq, "acme")
	require.NoError(t, err)
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRuns(t, l, 2, 2)
	require.Len(t, e.records(t, "acme"), 2, "both calls ran in the tenant their workflows named")
}
