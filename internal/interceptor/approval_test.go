package interceptor_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

func withApproval(p oncekey.Policy, a oncekey.ApprovalPolicy) oncekey.Policy {
	p.Approval = &a
	return p
}

func (s *suiteEnv) approvals(t *testing.T) []*oncekeystore.Approval {
	t.Helper()
	res, err := s.store.ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{})
	require.NoError(t, err)
	return res.Approvals
}

// decideWhenAsked signals decision d to the approval workflow of the n-th pending approval once it
// is asked (polled on the test environment's clock).
func (s *suiteEnv) decideWhenAsked(t *testing.T, d reconcile.Decision) {
	t.Helper()
	var poll func()
	poll = func() {
		res, err := s.store.ListApprovals(context.Background(), &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending})
		require.NoError(t, err)
		if len(res.Approvals) == 0 {
			s.env.RegisterDelayedCallback(poll, time.Second)
			return
		}
		require.NoError(t, s.env.SignalWorkflowByID(reconcile.ApprovalWorkflowID(res.Approvals[0].OperationKey), reconcile.DecideSignalName, d))
	}
	s.env.RegisterDelayedCallback(poll, time.Second)
}

// Required decides which calls wait: one it says needs none runs at once and asks nothing.
func TestSuiteApprovalNotRequired(t *testing.T) {
	ds := newDownstream()
	s := setupSuite(t, ds, withApproval(oncekey.Policy{Effect: oncekey.Effectful}, oncekey.ApprovalPolicy{
		Required: func(op oncekey.Operation) bool {
			var r TicketRequest
			return json.Unmarshal(op.ArgsJSON, &r) == nil && r.Customer == "vip"
		},
	}))
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	require.Equal(t, "T-1", out[0].Ticket.ID)
	require.Empty(t, s.approvals(t))
}

// A panic in ApprovalPolicy.Required, or a key that depends on the activity ID (which the
// workflow side does not know before it schedules the call), fails the call once as a
// configuration error; nothing is asked and nothing runs.
func TestSuiteApprovalConfigErrors(t *testing.T) {
	for name, c := range map[string]struct {
		p    oncekey.Policy
		want string
	}{
		"required panics": {withApproval(oncekey.Policy{Effect: oncekey.Effectful}, oncekey.ApprovalPolicy{
			Required: func(oncekey.Operation) bool { panic("amount parser bug") },
		}), "ApprovalPolicy.Required panicked: amount parser bug"},
		"summary panics": {withApproval(oncekey.Policy{Effect: oncekey.Effectful}, oncekey.ApprovalPolicy{
			Summary: func(oncekey.Operation) string { panic("summary bug") },
		}), "ApprovalPolicy.Summary panicked: summary bug"},
		"key needs the activity ID": {withApproval(oncekey.Policy{Effect: oncekey.Effectful, Key: oncekey.ExplicitKey(func(op oncekey.Operation) (string, error) {
			return "attempt:" + op.ActivityID, nil
		})}, oncekey.ApprovalPolicy{}), "give the call a step ID"},
	} {
		t.Run(name, func(t *testing.T) {
			ds := newDownstream()
			s := setupSuite(t, ds, c.p)
			out := s.run(t, workflowInput{Calls: []stepCall{{Tool: "CreateTicket", Req: req1}}})
			require.Equal(t, oncekey.ErrTypeConfig, out[0].Type, out[0].Err)
			require.Contains(t, out[0].Detail, c.want)
			require.Contains(t, out[0].Detail, "CreateTicket")
			_, bodies := ds.counts()
			require.Zero(t, bodies)
			require.Empty(t, s.approvals(t))
			require.Empty(t, s.records(t))
		})
	}
}

// A denial by signal: the call fails rejected (stop), nothing runs; a summary longer than the
// limit is cut at a character boundary.
func TestSuiteApprovalDeniedBySignal(t *testing.T) {
	ds := newDownstream()
	long := ""
	for len(long) < 2*oncekeystore.MaxApprovalSummaryBytes {
		long += "é"
	}
	s := setupSuite(t, ds, withApproval(oncekey.Policy{Effect: oncekey.Idempotent}, oncekey.ApprovalPolicy{
		Summary: func(oncekey.Operation) string { return "x" + long },
	}))
	s.decideWhenAsked(t, reconcile.Decision{Decision: reconcile.Deny, Tenant: "default-test-namespace", DecidedBy: "alice", Reason: "no"})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeApproval, out[0].Type, out[0].Err)
	require.Contains(t, out[0].Detail, "denied approval by alice (no)")
	require.Equal(t, oncekey.OutcomeRejected, out[0].Label)
	require.Equal(t, oncekey.NextStop, out[0].Next)
	_, bodies := ds.counts()
	require.Zero(t, bodies)
	aps := s.approvals(t)
	require.Len(t, aps, 1)
	require.Equal(t, oncekeystore.ApprovalDenied, aps[0].Status)
	require.LessOrEqual(t, len(aps[0].Summary), oncekeystore.MaxApprovalSummaryBytes)
	require.True(t, json.Valid([]byte(`"`+aps[0].Summary+`"`)))
	require.Contains(t, aps[0].Summary, "…")
}

// The key's approval was given for other arguments (the same step, another call): the call is
// refused as a fingerprint mismatch, nothing runs and the approval is untouched.
func TestSuiteApprovalOfOtherArgumentsIsAFingerprintMismatch(t *testing.T) {
	ds := newDownstream()
	s := setupSuite(t, ds, withApproval(oncekey.Policy{Effect: oncekey.Effectful}, oncekey.ApprovalPolicy{}))
	s.decideWhenAsked(t, reconcile.Decision{Decision: reconcile.Approve, Tenant: "default-test-namespace", DecidedBy: "alice"})
	other := req1
	other.Subject = "something else"
	out := s.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: other},
	}})
	require.Empty(t, out[0].Err)
	require.Equal(t, oncekey.ErrTypeFingerprintMismatch, out[1].Type, out[1].Err)
	require.Equal(t, oncekey.OutcomeConflict, out[1].Label)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	aps := s.approvals(t)
	require.Len(t, aps, 1)
	require.Equal(t, oncekeystore.ApprovalApproved, aps[0].Status)
}

// The worker checks the stored approval under the claim, before the effect: a call that reaches
// it without one (scheduled by a workflow worker without oncekey's interceptor) is refused, its
// claim given back, nothing run; once the key's approval is approved, the call runs.
func TestActivityRefusesCallWithoutApproval(t *testing.T) {
	ds := newDownstream()
	reg := oncekey.NewRegistry()
	p := withApproval(oncekey.Policy{Effect: oncekey.Idempotent}, oncekey.ApprovalPolicy{})
	require.NoError(t, reg.Set(ds.CreateTicket, p))
	mem := memstore.New(nil)
	ic, err := interceptor.New(interceptor.Options{Store: mem, Registry: reg})
	require.NoError(t, err)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []tinterceptor.WorkerInterceptor{ic}, DeadlockDetectionTimeout: time.Minute})
	env.RegisterActivity(ds.CreateTicket)

	_, err = env.ExecuteActivity(ds.CreateTicket, req1)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%T: %v", err, err)
	require.Equal(t, oncekey.ErrTypeApprovalPending, appErr.Type())
	require.True(t, appErr.NonRetryable())
	d, ok := oncekey.ErrorDetails(err)
	require.True(t, ok)
	require.Contains(t, d.Message, "is waiting for approval; nothing ran")
	tr := oncekey.Label(nil, err)
	require.Equal(t, oncekey.OutcomeRejected, tr.Status)
	require.Equal(t, oncekey.NextAsk, tr.NextAction)
	_, bodies := ds.counts()
	require.Zero(t, bodies)
	require.NotNil(t, d.Approval)
	require.Equal(t, oncekeystore.ApprovalPending, d.Approval.Status)
	require.True(t, d.Approval.Created)
	_, err = mem.Get(context.Background(), &oncekeystore.GetParams{Tenant: d.Tenant, OperationKey: d.OperationKey})
	require.ErrorIs(t, err, oncekeystore.ErrNotFound, "nothing was claimed")

	// The request the worker wrote, with its summary and token; approved, the call runs.
	ap, err := mem.GetApproval(context.Background(), &oncekeystore.GetParams{Tenant: d.Tenant, OperationKey: d.OperationKey})
	require.NoError(t, err)
	require.NotEmpty(t, ap.Token)
	require.Equal(t, d.Approval.Summary, ap.Summary)
	require.Equal(t, d.Approval.Fingerprint, ap.Fingerprint)
	_, err = mem.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: d.Tenant, OperationKey: d.OperationKey,
		Episode: ap.Episode, Token: ap.Token, Status: oncekeystore.ApprovalApproved, DecidedBy: "alice", Retention: time.Hour})
	require.NoError(t, err)
	_, err = env.ExecuteActivity(ds.CreateTicket, req1)
	require.NoError(t, err)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
}

// The key's approval is another tool's (the step ran another tool before) or another namespace's:
// the worker refuses to ask, nothing is written or run, and the call's error says that calling
// again is refused the same way and what to do instead of "call it again".
func TestSuiteApprovalOfAnotherToolOrNamespaceSaysWhatToDo(t *testing.T) {
	// The call's operation key, from a run that needs no approval and so only claims.
	ds := newDownstream()
	first := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	call := stepCall{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}
	require.Empty(t, first.run(t, workflowInput{Calls: []stepCall{call}})[0].Err)
	recs := first.records(t)
	require.Len(t, recs, 1)
	key, tenant, ns := recs[0].OperationKey, recs[0].Tenant, recs[0].Namespace

	for name, seed := range map[string]struct{ ns, tool string }{
		"another tool":      {ns, "SendMoney"},
		"another namespace": {"other-namespace", "CreateTicket"},
	} {
		t.Run(name, func(t *testing.T) {
			var seeded *oncekeystore.Approval
			ds := newDownstream()
			s := setupSuiteWith(t, ds, withApproval(oncekey.Policy{Effect: oncekey.Effectful}, oncekey.ApprovalPolicy{}), suiteConfig{
				store: func(st oncekeystore.Store) oncekeystore.Store {
					mem := st.(*memstore.Store)
					res, err := mem.RequestApproval(context.Background(), &oncekeystore.RequestApprovalParams{Tenant: tenant, OperationKey: key,
						Namespace: seed.ns, Tool: seed.tool, Fingerprint: "fp", Summary: "someone else's", Timeout: time.Hour})
					require.NoError(t, err)
					seeded, err = mem.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: tenant, OperationKey: key,
						Episode: 1, Status: oncekeystore.ApprovalTimedOut, DecidedBy: "oncekey", Retention: time.Hour})
					require.NoError(t, err)
					require.True(t, res.Created)
					return mem
				},
			})
			out := s.run(t, workflowInput{Calls: []stepCall{call}})
			require.Equal(t, activities.ErrTypeForeignRecord, out[0].Type, out[0].Err)
			require.Contains(t, out[0].Detail, "not this call's; nothing was asked and nothing ran")
			require.Contains(t, out[0].Detail, "calling it again is refused the same way")
			require.Contains(t, out[0].Detail, "give this call a step ID of its own")
			require.Contains(t, out[0].Detail, "oncekey show "+key+" --tenant "+tenant)
			require.NotContains(t, out[0].Detail, "call it again to ask anew")
			_, bodies := ds.counts()
			require.Zero(t, bodies)
			aps := s.approvals(t)
			require.Len(t, aps, 1)
			require.Equal(t, seeded, aps[0], "nothing was written")
		})
	}
}
