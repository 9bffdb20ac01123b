package systemtest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/metricstest"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/metrics"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// observed is a dev-server worker set up through the plugin on a client with a capturing
// metrics handler.
type observed struct {
	c      client.Client
	h      *metricstest.Handler
	store  oncekeystore.Store
	tq     string
	l      *ledger
	reg    *oncekey.Registry
	opts   worker.Options
	plugin *temporal.SimplePlugin
}

func setupObserved(t *testing.T, l *ledger, mutate func(*worker.Options)) *observed {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	o := &observed{h: metricstest.New(), store: pgstore.New(pool, nil), l: l, reg: oncekey.NewRegistry(), tq: "oncekey-observe-" + t.Name()}
	require.NoError(t, o.reg.Set(l.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	o.opts = worker.Options{Store: o.store, Registry: o.reg, UnknownsSampleInterval: 100 * time.Millisecond}
	if mutate != nil {
		mutate(&o.opts)
	}
	plugin, err := worker.NewPlugin(o.opts)
	require.NoError(t, err)
	o.plugin = plugin
	o.c, err = client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{},
		MetricsHandler: o.h, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(o.c.Close)
	return o
}

// startWorker starts a worker on the task queue and returns its stop function (also run at
// cleanup; stopping twice is harmless).
func (o *observed) startWorker(t *testing.T) func() {
	t.Helper()
	w := sdkworker.New(o.c, o.tq, sdkworker.Options{})
	w.RegisterWorkflow(TicketWorkflow)
	w.RegisterActivity(o.l.CreateTicket)
	require.NoError(t, w.Start())
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			w.Stop()
		}
	}
	t.Cleanup(stop)
	return stop
}

func (o *observed) waitingKey(t *testing.T) string {
	t.Helper()
	var key string
	require.Eventually(t, func() bool {
		res, err := reconcile.List(context.Background(), o.store, oncekeystore.ListParams{Status: oncekeystore.StatusUnknown})
		if err != nil || len(res.Records) != 1 {
			return false
		}
		key = res.Records[0].OperationKey
		st, err := reconcile.Status(context.Background(), o.c, key)
		return err == nil && st.State == reconcile.StateWaiting
	}, 30*time.Second, 100*time.Millisecond, "no reconciliation came to wait for a person")
	return key
}

// On a dev server, through the plugin and the client's metrics handler: the unknown outcome is
// counted, the sampled gauges show it waiting and go back to 0 once a person settles it, and the
// reconciliation workflow's counters are not repeated when a new worker replays its history.
func TestE2EMetricsThroughTheClientsHandler(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	o := setupObserved(t, l, nil)
	stop := o.startWorker(t)
	run, err := o.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "observe-" + t.Name(), TaskQueue: o.tq, WorkflowExecutionTimeout: 2 * time.Minute},
		TicketWorkflow, req, CallOptions{StartToClose: 10 * time.Second})
	require.NoError(t, err)
	key := o.waitingKey(t)
	tool := map[string]string{metrics.TagTool: "CreateTicket"}
	require.EqualValues(t, 1, o.h.Sum(metrics.ToolCalls, map[string]string{metrics.TagTool: "CreateTicket", metrics.TagOutcome: "unknown"}))
	require.Eventually(t, func() bool {
		v, ok := o.h.GaugeValue(metrics.UnknownsWaiting, tool)
		return ok && v == 1
	}, 10*time.Second, 50*time.Millisecond, "the sampler reports the unknown: %v", o.h.Names())

	// A new worker replays the reconciliation workflow's history when the resolution arrives.
	stop()
	replays := len(o.h.Records("temporal_workflow_task_replay_latency", nil))
	o.startWorker(t)
	landed, ok := l.lookup(key)
	require.True(t, ok)
	body := []byte(`{"id":"` + landed.ID + `"}`)
	// The new worker may take longer than reconcile.ConfirmWait to pick the workflow up on a
	// loaded machine: a resolution delivered but not confirmed in time still lands (run.Get
	// below waits for it).
	if err := reconcile.Resolve(testCtx(t), o.c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: body, ResolvedBy: "alice"}); err != nil {
		require.ErrorIs(t, err, reconcile.ErrUnconfirmed)
	}
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, landed.ID, got.ID)
	effects, _ := l.counts()
	require.Equal(t, 1, effects)
	require.Greater(t, len(o.h.Records("temporal_workflow_task_replay_latency", nil)), replays, "precondition: the new worker replayed")

	require.EqualValues(t, 1, o.h.Sum(metrics.ReconciliationsStarted, tool), "counted once, not again on replay")
	require.EqualValues(t, 1, o.h.Sum(metrics.ReconciliationsSettled, map[string]string{metrics.TagTool: "CreateTicket", metrics.TagSettledBy: "person", metrics.TagOutcome: "applied"}))
	require.Len(t, o.h.Records(metrics.UnknownWait, tool), 1)
	require.Eventually(t, func() bool {
		v, ok := o.h.GaugeValue(metrics.UnknownsWaiting, tool)
		return ok && v == 0
	}, 10*time.Second, 50*time.Millisecond, "the gauge goes back to 0 once settled")
	for _, n := range o.h.Names() {
		require.NotContains(t, n, oncekey.KeyPrefix)
	}
}

// On a dev server with oncekey's search attributes registered and the option on: a waiting
// unknown is found by the documented filter (and by tool and tenant), its summary and current
// details say what is unknown, since when and what is needed, its handlers carry descriptions,
// and once settled it leaves the filter.
func TestE2EFindWaitingUnknownsBySearchAttributes(t *testing.T) {
	l := newLedger(faultLostAfterCommit)
	o := setupObserved(t, l, func(opts *worker.Options) { opts.SearchAttributes = true })
	ctx := testCtx(t)
	_, err := worker.RegisterSearchAttributes(ctx, o.c, "default")
	require.NoError(t, err)
	require.NoError(t, worker.CheckSearchAttributes(ctx, o.c, "default"))
	o.startWorker(t)
	wf := "find-" + t.Name()
	run, err := o.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wf, TaskQueue: o.tq, WorkflowExecutionTimeout: 2 * time.Minute},
		TicketWorkflow, req, CallOptions{StartToClose: 10 * time.Second})
	require.NoError(t, err)
	key := o.waitingKey(t)
	id := reconcile.WorkflowID(key)

	list := func(query string) []string {
		var ids []string
		res, err := o.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: query})
		require.NoError(t, err)
		for _, e := range res.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		return ids
	}
	byTool := reconcile.WaitingQuery + ` AND OncekeyTool = "CreateTicket" AND OncekeyTenant = "default" AND OncekeyWaitingSince < "2999-01-01T00:00:00Z"`
	require.Eventually(t, func() bool { return slices.Contains(list(byTool), id) }, 20*time.Second, 200*time.Millisecond,
		"the documented filter finds the waiting reconciliation")
	require.Empty(t, list(reconcile.WaitingQuery+` AND OncekeyTool = "SendEmail"`))

	desc, err := o.c.DescribeWorkflow(ctx, id, "")
	require.NoError(t, err)
	summary, err := desc.GetStaticSummary()
	require.NoError(t, err)
	details, err := desc.GetStaticDetails()
	require.NoError(t, err)
	require.Equal(t, "oncekey: did CreateTicket's effect land? Step create_ticket of "+wf, summary)
	require.Contains(t, details, "could not be proven: ")
	require.Contains(t, details, "`oncekey resolve "+key+" --tenant default`")

	v, err := o.c.QueryWorkflow(ctx, id, "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	require.Contains(t, md.GetCurrentDetails(), "**Outcome unknown, waiting for a person** since ")
	require.Contains(t, md.GetCurrentDetails(), "Needed: check downstream whether it landed, then `oncekey resolve "+key+" --tenant default --applied --ref <receipt>`")
	descriptions := map[string]string{}
	for _, d := range md.GetDefinition().GetSignalDefinitions() {
		descriptions["signal "+d.GetName()] = d.GetDescription()
	}
	for _, d := range md.GetDefinition().GetQueryDefinitions() {
		descriptions["query "+d.GetName()] = d.GetDescription()
	}
	for _, d := range md.GetDefinition().GetUpdateDefinitions() {
		descriptions["update "+d.GetName()] = d.GetDescription()
	}
	for _, h := range []string{"signal " + reconcile.SignalName, "query " + reconcile.QueryName, "update " + reconcile.UpdateName} {
		require.NotEmpty(t, descriptions[h], "%s carries a description: %v", h, descriptions)
	}

	landed, ok := l.lookup(key)
	require.True(t, ok)
	require.NoError(t, reconcile.Resolve(ctx, o.c, "default", key, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: []byte(`{"id":"` + landed.ID + `"}`), ResolvedBy: "alice"}))
	require.NoError(t, run.Get(ctx, nil))
	effects, _ := l.counts()
	require.Equal(t, 1, effects)
	require.Eventually(t, func() bool {
		return !slices.Contains(list(reconcile.WaitingQuery), id) && slices.Contains(list(`OncekeyStatus = "resolved" AND OncekeyTool = "CreateTicket"`), id)
	}, 20*time.Second, 200*time.Millisecond, "settled: out of the waiting filter, status resolved")

	// The recorded histories, search attribute upserts included, replay with the plugin.
	r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{Plugins: []sdkworker.Plugin{o.plugin}})
	require.NoError(t, err)
	r.RegisterWorkflow(TicketWorkflow)
	for _, wid := range []string{wf, id} {
		require.NoError(t, r.ReplayWorkflowExecution(ctx, o.c.WorkflowService(), quiet{}, "default", workflow.Execution{ID: wid}), wid)
	}
}

// With the option on, a worker refuses to start in a namespace that lacks the search
// attributes, saying which and how to register them; registered, it starts.
func TestE2ESearchAttributesCheckedAtWorkerStart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	ctx := testCtx(t)
	admin, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Logger: quiet{}})
	require.NoError(t, err)
	defer admin.Close()
	ns := fmt.Sprintf("oncekey-sa-%d", time.Now().UnixNano())
	_, err = admin.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
	require.NoError(t, err)

	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	reg := oncekey.NewRegistry()
	l := newLedger()
	require.NoError(t, reg.Set(l.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	plugin, err := worker.NewPlugin(worker.Options{Store: pgstore.New(pool, nil), Registry: reg, SearchAttributes: true})
	require.NoError(t, err)
	var c client.Client
	require.Eventually(t, func() bool {
		c, err = client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: ns, Logger: quiet{}, Plugins: []client.Plugin{plugin}})
		return err == nil
	}, 20*time.Second, 200*time.Millisecond, "the new namespace becomes usable: %v", err)
	defer c.Close()

	w := sdkworker.New(c, "oncekey-sa-check", sdkworker.Options{})
	w.RegisterActivity(l.CreateTicket)
	err = w.Start()
	var sae *worker.SearchAttributesError
	require.ErrorAs(t, err, &sae)
	require.Equal(t, []string{"OncekeyStatus (Keyword)", "OncekeyTenant (Keyword)", "OncekeyTool (Keyword)", "OncekeyWaitingSince (Datetime)"}, sae.Missing)
	require.Contains(t, err.Error(), "`oncekey setup search-attributes --namespace "+ns+"`")

	added, err := worker.RegisterSearchAttributes(ctx, admin, ns)
	require.NoError(t, err)
	require.Len(t, added, 4)
	again, err := worker.RegisterSearchAttributes(ctx, admin, ns)
	require.NoError(t, err)
	require.Empty(t, again, "registering twice adds nothing")
	require.Eventually(t, func() bool { return worker.CheckSearchAttributes(ctx, admin, ns) == nil }, 20*time.Second, 200*time.Millisecond)
	w2 := sdkworker.New(c, "oncekey-sa-check", sdkworker.Options{})
	w2.RegisterActivity(l.CreateTicket)
	require.NoError(t, w2.Start())
	w2.Stop()
}

// With the option on, the plugin given only to worker.Options.Plugins cannot check the
// namespace (it never sees the client's options): the worker refuses to start and says where
// the plugin goes.
func TestE2ESearchAttributesNeedThePluginOnTheClient(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Temporal dev server")
	}
	reg := oncekey.NewRegistry()
	l := newLedger()
	require.NoError(t, reg.Set(l.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	plugin, err := worker.NewPlugin(worker.Options{Store: memstore.New(nil), Registry: reg, SearchAttributes: true})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}})
	require.NoError(t, err)
	defer c.Close()
	w := sdkworker.New(c, "oncekey-sa-worker-only", sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	w.RegisterActivity(l.CreateTicket)
	err = w.Start()
	require.Error(t, err)
	require.Contains(t, err.Error(), "give the plugin to client.Options.Plugins")
}
