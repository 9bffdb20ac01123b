package inbox

import (
	"context"
	"errors"
	"log/slog"
	"strings"
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
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/testing/recordtest"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	"github.com/oncekey/oncekey/worker"
)

// downstream is what the live tests' tool acts on: it counts its own effects.
type downstream struct {
	mu      sync.Mutex
	effects int
	runs    int
}

// Book lands one effect per run; the first run loses its response, so its outcome is unknown.
func (d *downstream) Book(ctx context.Context, ref string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs++
	d.effects++
	if d.runs == 1 {
		return "", errors.New("read: connection reset by peer")
	}
	return "BK-" + ref, nil
}

// Refund lands one effect per run; it needs approval.
func (d *downstream) Refund(ctx context.Context, ref string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.effects++
	return "RF-" + ref, nil
}

func (d *downstream) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.effects
}

// inboxCall is a workflow that calls the activity named by its type ("Book", "Refund") once.
func inboxCall(ctx workflow.Context, ref string) (string, error) {
	tool := strings.TrimPrefix(workflow.GetInfo(ctx).WorkflowType.Name, "Inbox")
	ctx = oncekey.WithStepID(ctx, strings.ToLower(tool))
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, tool, ref).Get(ctx, &out)
	return out, err
}

// live is an inbox over the store a real worker uses, on the test Temporal server: the
// workflow "InboxBook" loses its first call's response (an unknown outcome, which a
// reconciliation workflow waits on), "InboxRefund" waits for approval first.
type live struct {
	*env
	c    client.Client
	tq   string
	down *downstream
	log  *recordtest.SyncBuffer
}

func setupLive(t *testing.T, wrap func(oncekeystore.Store) oncekeystore.Store) *live {
	t.Helper()
	return setupLiveSigned(t, wrap, nil, nil, 0)
}

// setupLiveSigned is setupLive whose workers and inbox have the trust list tl (nil: none), whose
// inbox signs with signers, and whose Refund's approval asks for refundSigners signers
// (ApprovalPolicy.Signers).
func setupLiveSigned(t *testing.T, wrap func(oncekeystore.Store) oncekeystore.Store, tl *decisionsig.TrustList,
	signers map[string]decisionsig.Signer, refundSigners int) *live {
	t.Helper()
	c := testenv.Temporal(t)
	log := &recordtest.SyncBuffer{}
	e := setup(t, func(o *Options) {
		o.Temporal = c
		o.Logger = slog.New(slog.NewTextHandler(log, nil))
		o.TrustList, o.Signers = tl, signers
	})
	if wrap != nil {
		opts := e.srv.opts
		opts.Store = wrap(e.store)
		srv, err := New(opts)
		require.NoError(t, err)
		e.srv = srv
	}
	d := &downstream{}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(d.Book, oncekey.Policy{Effect: oncekey.Effectful}))
	require.NoError(t, reg.Set(d.Refund, oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{
		Summary: func(op oncekey.Operation) string { return "refund " + string(op.ArgsJSON) }, Signers: refundSigners,
	}}))
	plugin, err := worker.NewPlugin(worker.Options{Store: e.store, Registry: reg, Tenant: func(worker.TenantInfo) string { return "acme" },
		DataConverter: converter.GetDefaultDataConverter(), TrustList: tl})
	require.NoError(t, err)
	tq := "inbox-live-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	for _, tool := range []string{"Book", "Refund"} {
		w.RegisterWorkflowWithOptions(inboxCall, workflow.RegisterOptions{Name: "Inbox" + tool})
	}
	w.RegisterActivityWithOptions(d.Book, activity.RegisterOptions{Name: "Book"})
	w.RegisterActivityWithOptions(d.Refund, activity.RegisterOptions{Name: "Refund"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return &live{env: e, c: c, tq: tq, down: d, log: log}
}

// waitingUnknown starts a booking whose first call loses its response and waits until its
// reconciliation workflow waits for a person; it returns the key, the epoch and the booking's run.
func (l *live) waitingUnknown(t *testing.T) (string, int64, client.WorkflowRun) {
	t.Helper()
	run, err := l.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "booking-" + t.Name(), TaskQueue: l.tq,
		WorkflowExecutionTimeout: 3 * time.Minute}, "InboxBook", "R1")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.c.TerminateWorkflow(context.Background(), run.GetID(), "", "test over") })
	var key string
	var epoch int64
	require.Eventually(t, func() bool {
		res, err := l.store.List(context.Background(), &oncekeystore.ListParams{Status: oncekeystore.StatusUnknown, Tenant: "acme"})
		if err != nil || len(res.Records) != 1 {
			return false
		}
		key, epoch = res.Records[0].OperationKey, res.Records[0].Epoch
		st, err := reconcile.Status(context.Background(), l.c, key)
		return err == nil && st.State == reconcile.StateWaiting
	}, time.Minute, 100*time.Millisecond)
	t.Cleanup(func() { _ = l.c.TerminateWorkflow(context.Background(), reconcile.WorkflowID(key), "", "test over") })
	return key, epoch, run
}

// waitingApproval starts a refund and waits until its approval workflow waits for a decision;
// it returns the key, the episode and the refund's run.
func (l *live) waitingApproval(t *testing.T) (string, int64, client.WorkflowRun) {
	t.Helper()
	run, err := l.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "refund-" + t.Name(), TaskQueue: l.tq,
		WorkflowExecutionTimeout: 3 * time.Minute}, "InboxRefund", "R1")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.c.TerminateWorkflow(context.Background(), run.GetID(), "", "test over") })
	var key string
	var episode int64
	require.Eventually(t, func() bool {
		res, err := l.store.ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending, Tenant: "acme"})
		if err != nil || len(res.Approvals) != 1 {
			return false
		}
		key, episode = res.Approvals[0].OperationKey, res.Approvals[0].Episode
		rep, err := reconcile.QueryApproval(context.Background(), l.c, key)
		return err == nil && rep.State == reconcile.ApprovalStateWaiting
	}, time.Minute, 100*time.Millisecond)
	t.Cleanup(func() {
		_ = l.c.TerminateWorkflow(context.Background(), reconcile.ApprovalWorkflowID(key), "", "test over")
	})
	return key, episode, run
}

// wait waits up to a minute for run to end and returns its result.
func wait(t *testing.T, run client.WorkflowRun) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out string
	require.NoError(t, run.Get(ctx, &out))
	return out
}

// lines returns the log lines of l holding all of parts.
func (l *live) lines(parts ...string) []string {
	var out []string
	for _, line := range strings.Split(l.log.String(), "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}
