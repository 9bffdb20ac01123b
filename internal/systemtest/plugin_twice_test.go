package systemtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/worker"
)

// The same plugin given to the client and to the worker installs once: the call claims once,
// the body runs once, one effect downstream, and a repeat replays it.
func TestE2EPluginOnClientAndWorkerInstallsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	t.Parallel()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	store := pgstore.New(pool, nil)
	l := newLedger()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(l.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful, WaitInFlight: 500 * time.Millisecond}))
	plugin, err := worker.NewPlugin(worker.Options{Store: store, Registry: reg})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := "oncekey-e2e-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	w.RegisterWorkflow(TicketWorkflow)
	w.RegisterActivity(l.CreateTicket)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	for i := range 2 {
		run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "plugin-twice", TaskQueue: tq, WorkflowExecutionTimeout: time.Minute},
			TicketWorkflow, req, CallOptions{StartToClose: 10 * time.Second})
		require.NoError(t, err)
		var got Ticket
		require.NoError(t, run.Get(testCtx(t), &got), "run %d", i)
		require.Equal(t, "T-1", got.ID)
	}
	effects, bodies := l.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
}

// Two oncekey interceptors by other means (two plugins) stop the worker from being built, with
// an error that says which to remove.
func TestTwoOncekeyPluginsOnOneWorkerAreRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Temporal dev server")
	}
	reg := oncekey.NewRegistry()
	mk := func() *sdkworker.Options {
		p, err := worker.NewPlugin(worker.Options{Store: memstore.New(nil), Registry: reg})
		require.NoError(t, err)
		return &sdkworker.Options{Plugins: []sdkworker.Plugin{p}}
	}
	a, b := mk(), mk()
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: []client.Plugin{a.Plugins[0].(client.Plugin)}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	var msg string
	func() {
		defer func() { msg = fmt.Sprint(recover()) }()
		sdkworker.New(c, "oncekey-two-plugins", *b)
	}()
	require.Contains(t, msg, "would get oncekey's interceptor twice")
	require.Contains(t, msg, "remove the other copy")
}
