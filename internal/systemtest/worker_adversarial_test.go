package systemtest_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// stuckTool commits its effect and then blocks in a call that ignores its context (a client
// library without context support), until the test lets it go.
type stuckTool struct {
	mu      sync.Mutex
	effects int
	release chan struct{}
	done    chan struct{}
}

func (s *stuckTool) CreateTicketStuck(ctx context.Context, in TicketRequest) (Ticket, error) {
	defer close(s.done)
	s.mu.Lock()
	s.effects++
	n := s.effects
	s.mu.Unlock()
	<-s.release
	return Ticket{ID: "T-stuck", Subject: in.Subject, Seq: n}, nil
}

func StuckWorkflow(ctx workflow.Context, in TicketRequest) (Ticket, error) {
	// 3 s: long enough for the attempt to claim on a loaded machine before it times out; the
	// test is about what happens after.
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 3 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second},
	})
	ctx = oncekey.WithStepID(ctx, "create_ticket")
	var t Ticket
	err := workflow.ExecuteActivity(ctx, "CreateTicketStuck", in).Get(ctx, &t)
	return t, err
}

// An Effectful body that hangs past its start-to-close timeout and ignores its context is a
// zombie nobody waits for. Its lease must run out once the attempt is over, so that the
// reconciliation (which waits while the lease is live) can mark the record unknown and let a
// person decide. Renewing the lease for as long as the goroutine lives keeps the record pending
// with a live lease forever: the reconciliation never reaches a person, Resolve refuses a live
// claim, and the workflow stays blocked with no way out short of killing the worker.
func TestAdversarialZombieBodyLeaseEndsWithTheAttempt(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	store := pgstore.New(pool, nil)
	tool := &stuckTool{release: make(chan struct{}), done: make(chan struct{})}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set("CreateTicketStuck", oncekey.Policy{Effect: oncekey.Effectful, Lease: 600 * time.Millisecond}))
	plugin, err := worker.NewPlugin(worker.Options{Store: store, Registry: reg})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := "oncekey-adv-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{})
	w.RegisterWorkflow(StuckWorkflow)
	w.RegisterActivityWithOptions(tool.CreateTicketStuck, activity.RegisterOptions{Name: "CreateTicketStuck"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	released := false
	t.Cleanup(func() {
		if !released {
			close(tool.release)
		}
	})

	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: "adv-zombie-" + t.Name(), TaskQueue: tq, WorkflowExecutionTimeout: 2 * time.Minute,
	}, StuckWorkflow, req)
	require.NoError(t, err)

	var key string
	require.Eventually(t, func() bool {
		res, err := reconcile.List(context.Background(), store, oncekeystore.ListParams{})
		if err != nil || len(res.Records) != 1 {
			return false
		}
		key = res.Records[0].OperationKey
		st, err := reconcile.Status(context.Background(), c, key)
		return err == nil && st.State == reconcile.StateWaiting
	}, 60*time.Second, 100*time.Millisecond, "the zombie's lease never ran out: the reconciliation never reached a person")

	body, _ := json.Marshal(Ticket{ID: "T-stuck", Subject: req.Subject, Seq: 1})
	require.NoError(t, reconcile.Resolve(context.Background(), c, "default", key, reconcile.Resolution{
		Epoch: 1, Outcome: reconcile.Applied, Result: body, ResolvedBy: "alice",
	}))
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	require.Equal(t, "T-stuck", got.ID)

	// The zombie finally returns: it may write nothing over the resolution.
	close(tool.release)
	released = true
	<-tool.done
	rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, "alice", rec.ResolvedBy)
	tool.mu.Lock()
	require.Equal(t, 1, tool.effects)
	tool.mu.Unlock()
}
