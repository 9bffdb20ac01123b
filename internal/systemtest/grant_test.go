package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

// Standing grants and conditional approval on the dev server, with Postgres: a refund tool whose
// policy asks a person for refunds over 100.00 (ApprovalPolicy.Required, on the worker), and a
// downstream that counts the refunds it made.

type RefundRequest struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

// refunds is the fake payment provider: it counts the refunds it made and the bodies that ran.
// A body waits for hold (when set) and then fails, once, before anything is sent.
type refunds struct {
	mu      sync.Mutex
	made    []RefundRequest
	bodies  int
	hold    chan struct{}
	entered chan struct{}
}

func (r *refunds) IssueRefund(ctx context.Context, in RefundRequest) (string, error) {
	r.mu.Lock()
	r.bodies++
	hold := r.hold
	r.hold = nil
	r.mu.Unlock()
	if hold != nil {
		close(r.entered)
		<-hold
		return "", oncekey.NotApplied(errors.New("503 from the provider: nothing was sent"))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.made = append(r.made, in)
	return "re_" + in.OrderID, nil
}

func (r *refunds) count() (made, bodies int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.made), r.bodies
}

// GrantedRefundWorkflow issues one refund at step "refund".
func GrantedRefundWorkflow(ctx workflow.Context, in RefundRequest) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second},
	})
	var id string
	err := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "refund"), "IssueRefund", in).Get(ctx, &id)
	return id, err
}

// refundOverLimit asks for refunds over 100.00 EUR, and for any it cannot read.
var refundOverLimit = &oncekey.ApprovalPolicy{
	Required: func(op oncekey.Operation) bool {
		var in RefundRequest
		return json.Unmarshal(op.ArgsJSON, &in) != nil || in.AmountCents > 100_00
	},
	Summary: func(op oncekey.Operation) string {
		var in RefundRequest
		_ = json.Unmarshal(op.ArgsJSON, &in)
		return "refund on order " + in.OrderID
	},
}

type grantEnv struct {
	c     client.Client
	store *pgstore.Store
	tq    string
	r     *refunds
}

func setupGrants(t *testing.T) *grantEnv {
	t.Helper()
	return setupRefunds(t, refundOverLimit)
}

// setupRefunds starts a worker whose IssueRefund asks for approval under ap.
func setupRefunds(t *testing.T, ap *oncekey.ApprovalPolicy) *grantEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres and a Temporal dev server")
	}
	t.Parallel()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	g := &grantEnv{store: pgstore.New(pool, nil), r: &refunds{}, tq: "oncekey-grant-" + t.Name()}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(g.r.IssueRefund, oncekey.Policy{Effect: oncekey.Effectful, Approval: ap}))
	plugin, err := worker.NewPlugin(worker.Options{Store: g.store, Registry: reg})
	require.NoError(t, err)
	g.c, err = client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(g.c.Close)
	w := sdkworker.New(g.c, g.tq, sdkworker.Options{})
	w.RegisterWorkflow(GrantedRefundWorkflow)
	w.RegisterActivity(g.r.IssueRefund)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return g
}

func (g *grantEnv) start(t *testing.T, id string, in RefundRequest) client.WorkflowRun {
	t.Helper()
	run, err := g.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: g.tq, WorkflowExecutionTimeout: 2 * time.Minute}, GrantedRefundWorkflow, in)
	require.NoError(t, err)
	return run
}

// grant makes a grant of IssueRefund in namespace "default" and tenant "default" (the tenant the
// worker derives), changed by change.
func (g *grantEnv) grant(t *testing.T, rule string, change func(p *oncekeystore.CreateGrantParams)) *oncekeystore.Grant {
	t.Helper()
	p := &oncekeystore.CreateGrantParams{Namespace: "default", Tenant: "default", Tool: "IssueRefund", Rule: rule,
		CreatedBy: "ada", Reason: "refunds up to 500 for the holidays", Duration: time.Hour}
	if change != nil {
		change(p)
	}
	gr, err := g.store.CreateGrant(context.Background(), p)
	require.NoError(t, err)
	return gr
}

// pending waits until the approval of the refund workflow id's call is pending, with its approval
// workflow waiting for a person, and returns it.
func (g *grantEnv) pending(t *testing.T) *oncekeystore.Approval {
	t.Helper()
	var a *oncekeystore.Approval
	require.Eventually(t, func() bool {
		res, err := g.store.ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending})
		if err != nil || len(res.Approvals) != 1 {
			return false
		}
		a = res.Approvals[0]
		rep, err := reconcile.QueryApproval(context.Background(), g.c, a.OperationKey)
		return err == nil && rep.State == reconcile.ApprovalStateWaiting
	}, 30*time.Second, 100*time.Millisecond, "no approval came to wait for a person")
	return a
}

func (g *grantEnv) decide(t *testing.T, a *oncekeystore.Approval, d reconcile.DecisionKind) {
	t.Helper()
	_, err := reconcile.Decide(context.Background(), g.c, a.OperationKey, reconcile.Decision{Decision: d, Tenant: a.Tenant,
		DecidedBy: "grace", Reason: "checked"})
	require.NoError(t, err)
}

func (g *grantEnv) approvalOf(t *testing.T, key string) *oncekeystore.Approval {
	t.Helper()
	a, err := g.store.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
	require.NoError(t, err)
	return a
}

func (g *grantEnv) onlyApproval(t *testing.T) *oncekeystore.Approval {
	t.Helper()
	res, err := g.store.ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{})
	require.NoError(t, err)
	require.Len(t, res.Approvals, 1)
	return res.Approvals[0]
}

func requireRefunds(t *testing.T, r *refunds, made, bodies int) {
	t.Helper()
	m, b := r.count()
	require.Equal(t, made, m, "refunds made downstream")
	require.Equal(t, bodies, b, "tool bodies run")
}

// Conditional approval: ApprovalPolicy.Required decides on the worker from the operation it
// derived. A refund under the limit runs at once and asks nobody; one above it waits for a
// person and runs once approved.
func TestE2EConditionalApprovalRefundAboveLimit(t *testing.T) {
	g := setupGrants(t)
	small := g.start(t, "refund-small", RefundRequest{OrderID: "o-1", AmountCents: 40_00})
	require.NoError(t, small.Get(testCtx(t), nil))
	requireRefunds(t, g.r, 1, 1)
	res, err := g.store.ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{})
	require.NoError(t, err)
	require.Empty(t, res.Approvals, "a refund under the limit asks nobody")

	large := g.start(t, "refund-large", RefundRequest{OrderID: "o-2", AmountCents: 250_00})
	a := g.pending(t)
	require.Equal(t, "refund on order o-2", a.Summary)
	requireRefunds(t, g.r, 1, 1)
	g.decide(t, a, reconcile.Approve)
	require.NoError(t, large.Get(testCtx(t), nil))
	requireRefunds(t, g.r, 2, 2)
	require.Equal(t, int64(250_00), g.r.made[1].AmountCents)
}

// A call a live grant covers runs without waiting; its approval names the grant and who made
// it. One the rule does not cover waits for a person, and a denial stops it.
func TestE2EGrantApprovesCoveredCall(t *testing.T) {
	g := setupGrants(t)
	gr := g.grant(t, "amount_cents <= 50000", nil)
	covered := g.start(t, "refund-granted", RefundRequest{OrderID: "o-1", AmountCents: 300_00})
	require.NoError(t, covered.Get(testCtx(t), nil))
	requireRefunds(t, g.r, 1, 1)
	a := g.onlyApproval(t)
	require.Equal(t, oncekeystore.ApprovalApproved, a.Status)
	require.Equal(t, "refund on order o-1", a.Summary)
	require.Equal(t, gr.ID, a.GrantID)
	require.Equal(t, "ada", a.DecidedBy, "decided by who made the grant")
	require.Equal(t, oncekeystore.GrantReason(gr.ID), a.Reason)

	// Another workflow's call the grant covers (the grant names no workflow) runs as well.
	again := g.start(t, "refund-granted-again", RefundRequest{OrderID: "o-3", AmountCents: 500_00})
	require.NoError(t, again.Get(testCtx(t), nil))
	requireRefunds(t, g.r, 2, 2)

	over := g.start(t, "refund-over-grant", RefundRequest{OrderID: "o-2", AmountCents: 900_00})
	p := g.pending(t)
	require.Empty(t, p.GrantID)
	g.decide(t, p, reconcile.Deny)
	require.Error(t, over.Get(testCtx(t), nil))
	requireRefunds(t, g.r, 2, 2) // the refund over the grant's rule was denied and never made
}

// Grants that do not cover the call cover nothing: another tool's, another tenant's, another
// namespace's, another workflow's, an expired one, a revoked one, and one whose rule names a
// field the tool's input does not have. The call waits for a person; nothing runs before.
func TestE2EGrantOutsideItsScopeCoversNothing(t *testing.T) {
	g := setupGrants(t)
	g.grant(t, "", func(p *oncekeystore.CreateGrantParams) { p.Tool = "CreateTicket" })
	g.grant(t, "", func(p *oncekeystore.CreateGrantParams) { p.Tenant = "other-tenant" })
	g.grant(t, "", func(p *oncekeystore.CreateGrantParams) { p.Namespace = "other-namespace" })
	g.grant(t, "", func(p *oncekeystore.CreateGrantParams) { p.WorkflowID = "refund-someone-else" })
	g.grant(t, "amount <= 50000", nil) // the input's field is amount_cents
	g.grant(t, `amount_cents == "300"`, nil)
	expired := g.grant(t, "", func(p *oncekeystore.CreateGrantParams) { p.Duration = 200 * time.Millisecond })
	revoked := g.grant(t, "", nil)
	_, err := g.store.RevokeGrant(context.Background(), &oncekeystore.RevokeGrantParams{ID: revoked.ID, RevokedBy: "grace"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		gr, err := g.store.GetGrant(context.Background(), expired.ID)
		return err == nil && gr.Status == oncekeystore.GrantExpired
	}, 10*time.Second, 50*time.Millisecond)

	run := g.start(t, "refund-uncovered", RefundRequest{OrderID: "o-1", AmountCents: 300_00})
	a := g.pending(t)
	require.Empty(t, a.GrantID)
	requireRefunds(t, g.r, 0, 0)
	g.decide(t, a, reconcile.Approve)
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRefunds(t, g.r, 1, 1)
	require.Equal(t, "grace", g.approvalOf(t, a.OperationKey).DecidedBy)
}

// Forget ends the tenant's grants: a call the grant approved before the forget ran without
// waiting; the same kind of call after `oncekey forget --tenant default --yes` (Store.Forget)
// waits for a person, and runs only once approved.
func TestE2EGrantForgottenAsksAPerson(t *testing.T) {
	g := setupGrants(t)
	gr := g.grant(t, "", nil)
	before := g.start(t, "refund-before-forget", RefundRequest{OrderID: "o-1", AmountCents: 300_00})
	require.NoError(t, before.Get(testCtx(t), nil))
	requireRefunds(t, g.r, 1, 1)
	require.Equal(t, gr.ID, g.onlyApproval(t).GrantID)

	res, err := g.store.Forget(context.Background(), &oncekeystore.ForgetParams{Tenant: "default"})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.GrantsDeleted)

	after := g.start(t, "refund-after-forget", RefundRequest{OrderID: "o-2", AmountCents: 300_00})
	a := g.pending(t)
	require.Empty(t, a.GrantID, "no grant approves the tenant's call any more")
	requireRefunds(t, g.r, 1, 1)
	g.decide(t, a, reconcile.Approve)
	require.NoError(t, after.Get(testCtx(t), nil))
	requireRefunds(t, g.r, 2, 2)
	require.Equal(t, "grace", g.approvalOf(t, a.OperationKey).DecidedBy)
}

// A grant revoked while its call is in flight: the first attempt, approved under the grant, fails
// before sending anything; the grant is revoked meanwhile; the retry finds the approval's grant
// revoked, asks a person anew (the next episode) and runs nothing until approved.
func TestE2EGrantRevokedMidFlight(t *testing.T) {
	g := setupGrants(t)
	hold := make(chan struct{})
	g.r.hold, g.r.entered = hold, make(chan struct{})
	gr := g.grant(t, "", nil)
	run := g.start(t, "refund-revoked", RefundRequest{OrderID: "o-1", AmountCents: 300_00})
	<-g.r.entered
	first := g.onlyApproval(t)
	require.Equal(t, gr.ID, first.GrantID)
	_, err := g.store.RevokeGrant(context.Background(), &oncekeystore.RevokeGrantParams{ID: gr.ID, RevokedBy: "grace"})
	require.NoError(t, err)
	close(hold)

	a := g.pending(t)
	require.Equal(t, first.Episode+1, a.Episode)
	require.Empty(t, a.GrantID)
	requireRefunds(t, g.r, 0, 1)
	g.decide(t, a, reconcile.Approve)
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRefunds(t, g.r, 1, 2)
	require.Equal(t, "grace", g.approvalOf(t, a.OperationKey).DecidedBy)
}

// A decision that claims a grant, by update or signal, is refused: grants are decided on the
// worker alone, and the decision's members are exactly those of reconcile.Decision.
func TestE2EGrantClaimedByUpdateOrSignalRefused(t *testing.T) {
	g := setupGrants(t)
	gr := g.grant(t, "amount_cents <= 100", nil) // covers nothing here
	run := g.start(t, "refund-forged", RefundRequest{OrderID: "o-1", AmountCents: 300_00})
	a := g.pending(t)
	id := reconcile.ApprovalWorkflowID(a.OperationKey)
	forged := map[string]any{"decision": "approve", "tenant": "default", "decided_by": "ada", "grant_id": gr.ID}
	h, err := g.c.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: reconcile.DecideUpdateName,
		Args: []any{forged}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(context.Background(), nil)
	}
	require.ErrorContains(t, err, `"grant_id"`)
	require.NoError(t, g.c.SignalWorkflow(context.Background(), id, "", reconcile.DecideSignalName, forged))
	require.Eventually(t, func() bool {
		rep, err := reconcile.QueryApproval(context.Background(), g.c, a.OperationKey)
		return err == nil && rep.InvalidSignals == 1
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, oncekeystore.ApprovalPending, g.approvalOf(t, a.OperationKey).Status)
	requireRefunds(t, g.r, 0, 0)
	g.decide(t, a, reconcile.Deny)
	require.Error(t, run.Get(testCtx(t), nil))
	requireRefunds(t, g.r, 0, 0)
}

// Approval deadlines: a request nobody decided within the policy's Timeout is escalated (the
// query, and the memo in history, say to whom and why), keeps waiting for the escalation's
// Timeout, and is then timed out with a reason that names the escalation; nothing runs.
func TestE2EApprovalEscalatedThenTimedOut(t *testing.T) {
	ap := *refundOverLimit
	ap.Timeout, ap.Escalation = 2*time.Second, &oncekey.ApprovalEscalation{To: "finance-leads", Timeout: 3 * time.Second}
	g := setupRefunds(t, &ap)
	run := g.start(t, "refund-escalated", RefundRequest{OrderID: "o-1", AmountCents: 300_00})
	a := g.pending(t)
	require.Equal(t, 5*time.Second, a.Deadline.Sub(a.RequestedAt), "the store's deadline is the whole wait: Timeout and the escalation's")
	var rep *reconcile.ApprovalReport
	require.Eventually(t, func() bool {
		var err error
		rep, err = reconcile.QueryApproval(context.Background(), g.c, a.OperationKey)
		return err == nil && rep.Escalated != nil
	}, 20*time.Second, 100*time.Millisecond, "the request was never escalated")
	require.Equal(t, "finance-leads", rep.Escalated.To)
	require.Equal(t, "nobody decided within 2s", rep.Escalated.Reason)
	require.False(t, rep.Escalated.At.Before(a.RequestedAt.Add(2*time.Second)))
	require.Equal(t, reconcile.ApprovalStateWaiting, rep.State, "escalated, it still waits")
	require.Equal(t, oncekeystore.ApprovalPending, g.approvalOf(t, a.OperationKey).Status)
	d, err := g.c.DescribeWorkflow(context.Background(), reconcile.ApprovalWorkflowID(a.OperationKey), "")
	require.NoError(t, err)
	require.Contains(t, d.RawResponse.GetWorkflowExecutionInfo().GetMemo().GetFields(), "oncekey_escalated", "recorded in history")

	err = run.Get(testCtx(t), nil)
	require.Contains(t, detail(err), "nobody approved IssueRefund in time")
	stored := g.approvalOf(t, a.OperationKey)
	require.Equal(t, oncekeystore.ApprovalTimedOut, stored.Status)
	require.Contains(t, stored.Reason, "escalated to finance-leads at ")
	require.Contains(t, stored.Reason, "nobody decided within 3s more")
	requireRefunds(t, g.r, 0, 0)
}

// Escalated, the request can still be decided, and then runs once.
func TestE2EApprovalEscalatedThenApproved(t *testing.T) {
	ap := *refundOverLimit
	ap.Timeout, ap.Escalation = time.Second, &oncekey.ApprovalEscalation{To: "finance-leads", Timeout: time.Minute}
	g := setupRefunds(t, &ap)
	run := g.start(t, "refund-escalated-approved", RefundRequest{OrderID: "o-1", AmountCents: 300_00})
	a := g.pending(t)
	require.Eventually(t, func() bool {
		rep, err := reconcile.QueryApproval(context.Background(), g.c, a.OperationKey)
		return err == nil && rep.Escalated != nil
	}, 20*time.Second, 100*time.Millisecond)
	g.decide(t, a, reconcile.Approve)
	require.NoError(t, run.Get(testCtx(t), nil))
	requireRefunds(t, g.r, 1, 1)
}
