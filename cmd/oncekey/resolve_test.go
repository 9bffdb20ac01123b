package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// bookings is a downstream the test owns: it counts its own effects.
type bookings struct {
	mu      sync.Mutex
	effects int
	runs    int
	// loseFirst: the first run lands the effect and loses the response; failFirst: the first
	// run fails before landing anything, with an error the tool cannot classify.
	loseFirst, failFirst bool
}

type Booking struct {
	ID string `json:"id"`
}

func (b *bookings) Book(ctx context.Context, ref string) (Booking, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.runs++
	switch {
	case b.runs == 1 && b.failFirst:
		return Booking{}, errors.New("read: connection reset by peer")
	case b.runs == 1 && b.loseFirst:
		b.effects++
		return Booking{}, errors.New("read: connection reset by peer")
	}
	b.effects++
	return Booking{ID: "BK-" + ref}, nil
}

func (b *bookings) counts() (effects, runs int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.effects, b.runs
}

func bookWorkflow(ctx workflow.Context, ref string) (Booking, error) {
	ctx = oncekey.WithStepID(ctx, "book")
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var out Booking
	err := workflow.ExecuteActivity(ctx, "Book", ref).Get(ctx, &out)
	return out, err
}

// startBooking runs a worker with oncekey on a fresh task queue and starts one booking workflow.
func startBooking(t *testing.T, c client.Client, url string, b *bookings, tenant string) client.WorkflowRun {
	t.Helper()
	return runBooking(t, c, bookingWorker(t, c, url, b, tenant))
}

// bookingWorker runs a worker with oncekey on a fresh task queue and returns the queue.
func bookingWorker(t *testing.T, c client.Client, url string, b *bookings, tenant string) string {
	t.Helper()
	tq := "cli-resolve-" + t.Name()
	w := newBookingWorker(t, c, url, b, tenant, tq)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return tq
}

// newBookingWorker returns a worker with oncekey, not started, on task queue tq.
func newBookingWorker(t *testing.T, c client.Client, url string, b *bookings, tenant, tq string) sdkworker.Worker {
	t.Helper()
	return newWorkerWith(t, c, url, b, tenant, tq, oncekey.Policy{Effect: oncekey.Effectful})
}

// newWorkerWith returns a worker with oncekey, not started, on task queue tq, running the booking
// workflow and Book under policy p.
func newWorkerWith(t *testing.T, c client.Client, url string, b *bookings, tenant, tq string, p oncekey.Policy) sdkworker.Worker {
	t.Helper()
	s, _ := migratedAt(t, url)
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(b.Book, p))
	plugin, err := worker.NewPlugin(worker.Options{Store: s, Registry: reg, Tenant: func(worker.TenantInfo) string { return tenant },
		DataConverter: converter.GetDefaultDataConverter()}) // the client's, which the plugin given to the worker cannot see
	require.NoError(t, err)
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	w.RegisterWorkflowWithOptions(bookWorkflow, workflow.RegisterOptions{Name: "Booking"})
	w.RegisterActivityWithOptions(b.Book, activity.RegisterOptions{Name: "Book"})
	return w
}

// runBooking starts the booking workflow (the same workflow ID each time within a test) on tq.
func runBooking(t *testing.T, c client.Client, tq string) client.WorkflowRun {
	t.Helper()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "booking-" + t.Name(), TaskQueue: tq, WorkflowExecutionTimeout: 3 * time.Minute}, "Booking", "R1")
	require.NoError(t, err)
	return run
}

// booked waits up to a minute for run, a booking workflow, to end and returns its booking.
func booked(t *testing.T, run client.WorkflowRun) Booking {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out Booking
	require.NoError(t, run.Get(ctx, &out))
	return out
}

// workerEnv is a fresh Postgres schema (the workers a test starts migrate it) and the test
// Temporal server: it returns a client to the server, the schema's URL, and the CLI's
// environment for both, with USER user unless user is "".
func workerEnv(t *testing.T, user string) (client.Client, string, map[string]string) {
	t.Helper()
	c := testenv.Temporal(t)
	url, _ := testenv.PostgresURL(t)
	env := map[string]string{"DATABASE_URL": url, "TEMPORAL_ADDRESS": testenv.TemporalHostPort(t)}
	if user != "" {
		env["USER"] = user
	}
	return c, url, env
}

// waitingKey waits until the CLI lists exactly one unknown operation and its reconciliation
// workflow waits for a person; it returns the key.
func waitingKey(t *testing.T, c client.Client, env map[string]string) string {
	t.Helper()
	var key string
	require.Eventually(t, func() bool {
		r := cli(t, env, "list", "--status", "unknown", "--json")
		var views []recordView
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &views) != nil || len(views) != 1 {
			return false
		}
		key = views[0].OperationKey
		st, err := reconcile.Status(context.Background(), c, key)
		return err == nil && st.State == reconcile.StateWaiting
	}, 60*time.Second, 100*time.Millisecond)
	return key
}

func TestResolveAppliedReleasesTheWorkflow(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "ines")
	b := &bookings{loseFirst: true}
	run := startBooking(t, c, url, b, "acme")

	key := waitingKey(t, c, env)

	// Wrong tenant: the record is not found there.
	r := cli(t, env, "show", key, "--tenant", "globex")
	require.Equal(t, exitNotFound, r.code)

	r = cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--applied", "--ref", "BK-R1", "--result", `{"id":"BK-R1"}`, "--note", "found in the booking system")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "as applied")
	require.Contains(t, r.stdout, "the workflow answered: outcome applied, resolved by ines, effect reference BK-R1, result ", "the workflow's own answer, from the update")

	out := booked(t, run)
	require.Equal(t, "BK-R1", out.ID, "the workflow gets the result the operator gave")
	effects, runs := b.counts()
	require.Equal(t, 1, effects, "the downstream landed one booking")
	require.Equal(t, 1, runs, "the tool was not run again")

	v := showJSON(t, env, key, "acme")
	require.Equal(t, oncekeystore.StatusApplied, v.Status)
	require.Equal(t, "BK-R1", v.EffectReference)
	require.Equal(t, "ines", v.ResolvedBy)
	require.Equal(t, "found in the booking system", v.Note)

	// Nothing waits on the key any more: resolve says it is applied already, by whom and when.
	r = cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--not-applied")
	requireOneLine(t, r, exitFailed, key+" is already applied, resolved by ines at "+v.UpdatedAt.Format(time.RFC3339)+": no reconciliation waits for it and there is nothing to resolve",
		"`oncekey show "+key+" --tenant acme`")
	require.NotContains(t, r.stderr, "--direct", "nothing to write directly either")
}

func TestResolveNotAppliedRunsTheToolOnceMore(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "")
	b := &bookings{failFirst: true}
	run := startBooking(t, c, url, b, "default")

	key := waitingKey(t, c, env)
	effects, _ := b.counts()
	require.Equal(t, 0, effects)

	// The tenant defaults to the namespace, as the interceptor's does.
	r := cli(t, env, "resolve", key, "--epoch", "1", "--not-applied", "--by", "ops", "--note", "no booking for R1")
	require.Equal(t, 0, r.code, r.stderr)

	out := booked(t, run)
	require.Equal(t, "BK-R1", out.ID)
	effects, runs := b.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 2, runs, "the tool ran exactly once more")
}

// A resolution the workflow refuses is reported as refused (exit 1 with the reason), not as
// success; the record is unchanged and the workflow keeps waiting for a good one.
func TestResolveReportsARefusal(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "ines")
	b := &bookings{loseFirst: true}
	run := startBooking(t, c, url, b, "acme")
	key := waitingKey(t, c, env)

	r := cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "globex", "--applied", "--result", `{"id":"BK-R1"}`)
	require.Equal(t, exitFailed, r.code, r.stdout)
	require.Contains(t, r.stderr, "refused")
	require.Contains(t, r.stderr, `tenant "globex"`)
	require.NotContains(t, r.stdout, "as applied")

	// A result of the wrong shape for Booking (a string, not an object).
	r = cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--applied", "--result", `"BK-R1"`)
	require.Equal(t, exitFailed, r.code, r.stdout)
	require.Contains(t, r.stderr, "does not decode into Book's result type main.Booking")

	v := showJSON(t, env, key, "acme")
	require.Equal(t, oncekeystore.StatusUnknown, v.Status, "the refused resolutions changed nothing")
	st, err := reconcile.Status(context.Background(), c, key)
	require.NoError(t, err)
	require.Equal(t, reconcile.StateWaiting, st.State)

	r = cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--applied", "--result", `{"id":"BK-R1"}`)
	require.Equal(t, 0, r.code, r.stderr)
	out := booked(t, run)
	require.Equal(t, "BK-R1", out.ID)
	effects, runs := b.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, runs)
}

// With no worker running the reconciliation workflow, resolve delivers the resolution and says
// so (exit 6, as approve: 1 is for refusals only) within ConfirmWait in all, naming the task queue;
// once a worker runs there it lands and the call gets the result.
func TestResolveWithoutAWorkerIsDelivered(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "ines")
	b := &bookings{loseFirst: true}
	tq := "cli-resolve-" + t.Name()
	w := newBookingWorker(t, c, url, b, "acme", tq)
	require.NoError(t, w.Start())
	run := runBooking(t, c, tq)
	key := waitingKey(t, c, env)
	w.Stop()

	start := time.Now()
	r := cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--applied", "--result", `{"id":"BK-R1"}`)
	took := time.Since(start)
	requireOneLine(t, r, exitUnconfirmed, "the resolution was delivered to the reconciliation workflow "+reconcile.WorkflowID(key)+", but it did not accept or refuse it within 10s: ",
		"task queue "+tq+" (the reconciliation workflow's)", "with no need to send it again", "says unknown)")
	require.Less(t, took, reconcile.ConfirmWait+3*time.Second)

	w = newBookingWorker(t, c, url, b, "acme", tq)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	out := booked(t, run)
	require.Equal(t, "BK-R1", out.ID, "the delivered resolution landed")
	effects, runs := b.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, runs)
}
