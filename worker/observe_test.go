package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/interceptor"
	"github.com/oncekey/oncekey/internal/metricstest"
	"github.com/oncekey/oncekey/internal/testenv"
	"github.com/oncekey/oncekey/metrics"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// observed is a dev-server worker set up through the plugin on a client with a capturing
// metrics handler.
type observed struct {
	c     client.Client
	h     *metricstest.Handler
	store oncekey.Store
	tq    string
	l     *ledger
	reg   *oncekey.Registry
	opts  interceptor.Options
}

func setupObserved(t *testing.T, l *ledger, mutate func(*interceptor.Options)) *observed {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	o := &observed{h: metricstest.New(), store: pgstore.New(pool, nil), l: l, reg: oncekey.NewRegistry(), tq: "oncekey-observe-" + t.Name()}
	require.NoError(t, o.reg.Set(l.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	o.opts = interceptor.Options{Store: o.store, Registry: o.reg, UnknownsSampleInterval: 100 * time.Millisecond}
	if mutate != nil {
		mutate(&o.opts)
	}
	plugin, err := worker.NewPlugin(o.opts)
	require.NoError(t, err)
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
		res, err := reconcile.List(context.Background(), o.store, oncekey.ListParams{Status: oncekey.StatusUnknown})
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
	require.NoError(t, reconcile.Resolve(testCtx(t), o.c, "default", key, reconcile.Resolution{Outcome: reconcile.Applied, Result: body, ResolvedBy: "alice"}))
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
