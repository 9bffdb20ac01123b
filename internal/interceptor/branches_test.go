package interceptor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/mock/gomock"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storemock"
	"github.com/oncekey/oncekey/reconcile"
)

// testNamespace is the namespace of the SDK test environment's workflows.
const testNamespace = "default-test-namespace"

// unreachableClaims is real behind a mock whose first failing Claims fail as an unreachable store
// would, after which exactly claims Claims go to real: Claim is not delegated, so a further one
// fails the test.
func unreachableClaims(t *testing.T, real oncekeystore.Store, failing, claims int) oncekeystore.Store {
	t.Helper()
	return faultAt(t, real, func(m *storemock.Store) {
		m.EXPECT().Claim(gomock.Any(), gomock.Any()).Return(nil, unreachable("claim")).Times(failing)
		if claims > 0 {
			m.EXPECT().Claim(gomock.Any(), gomock.Any()).DoAndReturn(real.Claim).Times(claims)
		}
	}, "Claim")
}

// timers records the durations of the workflow timers (workflow.Sleep) the environment saw.
func timers(env *testsuite.TestWorkflowEnvironment) func() []time.Duration {
	var mu sync.Mutex
	var ds []time.Duration
	env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		mu.Lock()
		ds = append(ds, d)
		mu.Unlock()
	})
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), ds...)
	}
}

func TestSuiteFailedIsRememberedAndReplayed(t *testing.T) {
	ds := newDownstream(faultFailed)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful, RememberFailures: true})
	out := s.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Equal(t, oncekey.ErrTypeFailed, out[0].Type)
	require.Contains(t, out[0].Err, "customer account closed")
	require.Equal(t, oncekey.ErrTypeFailed, out[1].Type)
	require.Contains(t, out[1].Detail, "replaying the remembered failure")
	require.Contains(t, out[1].Detail, "customer account closed")
	effects, bodies := ds.counts()
	require.Equal(t, 0, effects)
	require.Equal(t, 1, bodies, "the repeat got the stored failure without running")
	recs := s.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, oncekeystore.StatusFailed, recs[0].Status)
}

func TestSuiteNonRetryableNotAppliedRemembered(t *testing.T) {
	ds := newDownstream(faultNonRetryableNotApp)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful, RememberFailures: true})
	out := s.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Equal(t, oncekey.ErrTypeNotApplied, out[0].Type, "non-retryable: the workflow side does not re-schedule it")
	require.Equal(t, oncekey.ErrTypeFailed, out[1].Type)
	require.Contains(t, out[1].Detail, "invalid customer")
	_, bodies := ds.counts()
	require.Equal(t, 1, bodies)
}

func TestSuiteAuthorizeRunsBeforeReplay(t *testing.T) {
	ds := newDownstream()
	var mu sync.Mutex
	revoked := false
	var seen []oncekey.Operation
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful, Authorize: func(ctx context.Context, op oncekey.Operation) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, op)
		if revoked {
			return errors.New("agent lost the tickets:write permission")
		}
		revoked = true // the first call is allowed, then the permission is revoked
		return nil
	}})
	out := s.run(t, workflowInput{Tenant: "acme-corp", Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Empty(t, out[0].Err)
	require.Equal(t, oncekey.ErrTypeUnauthorized, out[1].Type, "a stored result is no way around a revoked permission")
	_, bodies := ds.counts()
	require.Equal(t, 1, bodies)
	require.Len(t, seen, 2)
	require.Equal(t, "acme-corp", seen[1].Tenant)
	require.Equal(t, "create_ticket", seen[1].StepID)
	require.Equal(t, []any{req1}, seen[1].Args)
}

// preClaim claims the operation the workflow will make, as another live attempt would.
func preClaim(t *testing.T, store oncekeystore.Store, p oncekey.Policy, tenant string) (key string, epoch int64) {
	t.Helper()
	op := oncekey.Operation{Namespace: testNamespace, Tenant: tenant, Tool: "CreateTicket", Args: []any{req1}}
	key, err := oncekey.Key(p, op)
	require.NoError(t, err)
	fp, err := oncekey.Fingerprint(p, op)
	require.NoError(t, err)
	res, err := store.Claim(context.Background(), &oncekeystore.ClaimParams{
		Tenant: tenant, OperationKey: key, Tool: "CreateTicket", Fingerprint: fp, WorkflowID: "elsewhere", StepID: "elsewhere",
		Effect: p.Effect, Lease: time.Minute, Retention: time.Hour, Tombstone: time.Hour,
	})
	require.NoError(t, err)
	require.True(t, res.Acquired)
	return key, res.Record.Epoch
}

var requestKey = oncekey.ExplicitKey(func(op oncekey.Operation) (string, error) {
	r, ok := op.Args[0].(TicketRequest)
	if !ok {
		return "", fmt.Errorf("argument is %T", op.Args[0])
	}
	return "request:" + r.RequestID, nil
})

func TestSuiteWaitInFlightThenReplay(t *testing.T) {
	ds := newDownstream()
	p := oncekey.Policy{Effect: oncekey.Effectful, Key: requestKey, WaitInFlight: 5 * time.Second}
	var beforeGet func()
	s := setupSuiteWith(t, ds, p, suiteConfig{store: func(real oncekeystore.Store) oncekeystore.Store {
		return faultAt(t, real, func(m *storemock.Store) {
			// The first Get (the waiting attempt's first poll) runs beforeGet first.
			m.EXPECT().Get(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, gp *oncekeystore.GetParams) (*oncekeystore.Record, error) {
				beforeGet()
				return real.Get(ctx, gp)
			}).Times(1)
		})
	}})
	key, epoch := preClaim(t, s.store, p, "t1")
	stored, err := converter.GetDefaultDataConverter().ToPayloads(Ticket{ID: "T-99", Customer: "acme", Subject: "printer on fire", Seq: 99})
	require.NoError(t, err)
	storedBytes, err := protoMarshal(stored)
	require.NoError(t, err)
	// The other attempt finishes while this one waits: the first poll sees it applied.
	beforeGet = func() {
		_, err := s.store.Complete(context.Background(), &oncekeystore.CompleteParams{Tenant: "t1", OperationKey: key, Epoch: epoch, Status: oncekeystore.StatusApplied, Result: storedBytes})
		require.NoError(t, err)
	}
	out := s.run(t, workflowInput{Tenant: "t1", Calls: []stepCall{{Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	require.Equal(t, "T-99", out[0].Ticket.ID, "the waiting call replayed the other attempt's result")
	_, bodies := ds.counts()
	require.Equal(t, 0, bodies)
}

func TestSuiteInFlightRescheduledThenGivesUp(t *testing.T) {
	ds := newDownstream()
	p := oncekey.Policy{Effect: oncekey.Effectful, Key: requestKey, WaitInFlight: -1}
	s := setupSuite(t, ds, p)
	preClaim(t, s.store, p, "t1")
	sleeps := timers(s.env)
	out := s.run(t, workflowInput{Tenant: "t1", MaxAttempts: 3, Calls: []stepCall{{Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeInFlight, out[0].Type, out[0].Err)
	_, bodies := ds.counts()
	require.Equal(t, 0, bodies, "the body never ran while another attempt held the claim")
	// The in-flight error's next-retry delay paces the workflow-side loop: with no run of the tool
	// observed on this worker, a third of the lease (30 s by default), not a fixed second.
	require.Equal(t, []time.Duration{10 * time.Second, 10 * time.Second}, sleeps())
}

func TestSuiteStoreUnavailableFailsClosed(t *testing.T) {
	ds := newDownstream()
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{store: func(real oncekeystore.Store) oncekeystore.Store {
		// Each attempt asks three times (a claim and two repeats): two attempts fail closed, and
		// the third claims once (Claim is not delegated: seven claims in all, no more).
		return unreachableClaims(t, real, 6, 1)
	}})
	sleeps := timers(s.env)
	out := s.run(t, workflowInput{Coefficient: 2, Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies, "the body was never entered while the store was unreachable")
	require.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, sleeps())
}

func TestSuiteStoreUnavailableIdempotentUsesTemporalRetries(t *testing.T) {
	ds := newDownstream()
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Idempotent}, suiteConfig{store: func(real oncekeystore.Store) oncekeystore.Store {
		// Two attempts of three claims each fail closed; Temporal retries, and the third claims once.
		return unreachableClaims(t, real, 6, 1)
	}})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	_, bodies := ds.counts()
	require.Equal(t, 1, bodies)
}

func TestSuiteBackoffFollowsUserRetryPolicy(t *testing.T) {
	ds := newDownstream(faultNotApplied, faultNotApplied, faultNotApplied, faultNotApplied)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	sleeps := timers(s.env)
	out := s.run(t, workflowInput{Initial: time.Second, Coefficient: 3, MaxInterval: 5 * time.Second,
		Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	require.Equal(t, []time.Duration{time.Second, 3 * time.Second, 5 * time.Second, 5 * time.Second}, sleeps())
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 5, bodies)
}

func TestSuiteScheduleToCloseBoundsTheLoop(t *testing.T) {
	ds := newDownstream(faultNotApplied, faultNotApplied, faultNotApplied, faultNotApplied, faultNotApplied)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	out := s.run(t, workflowInput{Initial: time.Second, Coefficient: 2, ScheduleToClose: 5 * time.Second,
		Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeNotApplied, out[0].Type)
	_, bodies := ds.counts()
	// Attempts at 0s, 1s, 3s; the next would start at 7s, past the 5s budget.
	require.Equal(t, 3, bodies)
}

func TestSuiteLocalActivityRefused(t *testing.T) {
	ds := newDownstream()
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1, Local: true}}})
	require.Equal(t, oncekey.ErrTypeConfig, out[0].Type)
	require.Contains(t, out[0].Detail, "local activity")
	_, bodies := ds.counts()
	require.Equal(t, 0, bodies)
}

// resolveLater signals the reconciliation workflow of the single unknown record once the
// workflow blocks, after checking (through the query) that it waits for a person.
func resolveLater(t *testing.T, s *suiteEnv, r reconcile.Resolution, check func(reconcile.StatusReport)) {
	s.env.RegisterDelayedCallback(func() {
		res, err := reconcile.List(context.Background(), s.store, oncekeystore.ListParams{})
		require.NoError(t, err)
		require.Len(t, res.Records, 1)
		key := res.Records[0].OperationKey
		v, err := s.env.QueryWorkflowByID(reconcile.WorkflowID(key), reconcile.QueryName)
		require.NoError(t, err)
		var st reconcile.StatusReport
		require.NoError(t, v.Get(&st))
		require.Equal(t, reconcile.StateWaiting, st.State)
		require.Equal(t, key, st.OperationKey)
		if check != nil {
			check(st)
		}
		s.env.SignalWorkflowByID(reconcile.WorkflowID(key), reconcile.SignalName, r)
	}, time.Minute)
}

func TestSuitePanicAfterCommitReconciledApplied(t *testing.T) {
	ds := newDownstream(faultPanicAfterCommit)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	resolved := Ticket{ID: "T-1", Customer: "acme", Subject: "printer on fire", Seq: 1}
	body, _ := json.Marshal(resolved)
	resolveLater(t, s, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: body, ResolvedBy: "dana"}, func(st reconcile.StatusReport) {
		require.Contains(t, st.Reason, "panicked")
	})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	require.Equal(t, resolved, out[0].Ticket, "the resolved result decodes into the declared type")
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
}

// A call whose outcome was unknown and that reconciliation settled as applied reads as applied,
// confirmed by the check, with its effect reference: not as a replay of an earlier call.
func TestSuiteReconciledAppliedIsConfirmed(t *testing.T) {
	ds := newDownstream(faultPanicAfterCommit)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	body, _ := json.Marshal(Ticket{ID: "T-1", Customer: "acme", Subject: "printer on fire", Seq: 1})
	resolveLater(t, s, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: body, EffectReference: "T-1", ResolvedBy: "dana"}, nil)
	out := s.run(t, workflowInput{RawLabels: true, Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Empty(t, out[0].Err)
	require.Equal(t, "T-1", out[0].Ticket.ID)
	require.Equal(t, oncekey.OutcomeApplied, out[0].Label, "the first call's own effect, not a replay")
	require.Equal(t, oncekey.ReasonConfirmed, out[0].Reason)
	require.Equal(t, "T-1", out[0].EffectReference)
	require.Equal(t, oncekey.OutcomeReplayed, out[1].Label, "a later call of the operation is a replay")
	require.Empty(t, out[1].Reason)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
}

func TestSuiteVerifyFailureIsUnknownThenFailed(t *testing.T) {
	ds := newDownstream()
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful, Verify: func(ctx context.Context, op oncekey.Operation, result any) error {
		if tk, ok := result.(Ticket); ok && tk.Customer == op.Args[0].(TicketRequest).Customer {
			return errors.New("ticket filed under the wrong queue")
		}
		return nil
	}})
	resolveLater(t, s, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Failed, Note: "ticket voided by hand", ResolvedBy: "erin"}, func(st reconcile.StatusReport) {
		require.Contains(t, st.Reason, "wrong queue")
	})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeFailed, out[0].Type)
	require.Contains(t, out[0].Detail, "ticket voided by hand")
	_, bodies := ds.counts()
	require.Equal(t, 1, bodies)
	recs := s.records(t)
	require.Equal(t, oncekeystore.StatusFailed, recs[0].Status)
	require.Equal(t, "erin", recs[0].ResolvedBy)
}

func TestSuiteInvalidSignalIgnored(t *testing.T) {
	ds := newDownstream(faultLostAfterCommit)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	var key string
	s.env.RegisterDelayedCallback(func() {
		res, err := reconcile.List(context.Background(), s.store, oncekeystore.ListParams{})
		require.NoError(t, err)
		key = res.Records[0].OperationKey
		// A signal that bypassed Resolve's validation, and one for another tenant.
		s.env.SignalWorkflowByID(reconcile.WorkflowID(key), reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: "perhaps"})
		s.env.SignalWorkflowByID(reconcile.WorkflowID(key), reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied, Tenant: "someone-else"})
	}, time.Minute)
	s.env.RegisterDelayedCallback(func() {
		v, err := s.env.QueryWorkflowByID(reconcile.WorkflowID(key), reconcile.QueryName)
		require.NoError(t, err)
		var st reconcile.StatusReport
		require.NoError(t, v.Get(&st))
		require.Equal(t, reconcile.StateWaiting, st.State, "invalid signals are ignored")
		require.Contains(t, st.LastInvalidSignal, "tenant")
		s.env.SignalWorkflowByID(reconcile.WorkflowID(key), reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":"T-1"}`)})
	}, 2*time.Minute)
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	require.Equal(t, "T-1", out[0].Ticket.ID)
}

func TestSuiteEscalationTimeout(t *testing.T) {
	ds := newDownstream(faultLostAfterCommit)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, func(o *interceptor.Options) { o.EscalationTimeout = time.Hour })
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeIndeterminate, out[0].Type)
	require.Contains(t, out[0].Detail, "nobody resolved")
	require.Contains(t, out[0].Detail, "1h0m0s")
	recs := s.records(t)
	require.Equal(t, oncekeystore.StatusUnknown, recs[0].Status, "an escalation loses nothing: the record stays unknown")
}

// Without EscalationTimeout set, a reconciliation nobody decides ends after the default: the
// workflow is not blocked for good, it gets the unknown outcome (what an agent's model reads), and
// the record stays unknown for a person.
func TestSuiteEscalationTimeoutDefault(t *testing.T) {
	ds := newDownstream(faultLostAfterCommit)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeIndeterminate, out[0].Type)
	require.Contains(t, out[0].Detail, "nobody resolved")
	require.Contains(t, out[0].Detail, interceptor.DefaultEscalationTimeout.String())
	require.Equal(t, oncekey.OutcomeUnknown, out[0].Label)
	require.Equal(t, oncekey.NextReconcile, out[0].Next)
	recs := s.records(t)
	require.Equal(t, oncekeystore.StatusUnknown, recs[0].Status)
}

// After an escalation no reconciliation waits for the key, so the error says to run the step
// again, or to write the decision to the store (resolve --direct) with the schema (from a store
// that names one), namespace and tenant it needs. Running the step
// again does start a new reconciliation, which a resolution then settles: the tool never runs a
// second time.
func TestSuiteEscalationThenRunTheStepAgain(t *testing.T) {
	ds := newDownstream(faultLostAfterCommit)
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{
		opts:  func(o *interceptor.Options) { o.EscalationTimeout = time.Hour },
		store: func(st oncekeystore.Store) oncekeystore.Store { return schemaNamingStore{st} },
	})
	s.env.RegisterDelayedCallback(func() {
		res, err := reconcile.List(context.Background(), s.store, oncekeystore.ListParams{})
		require.NoError(t, err)
		require.Len(t, res.Records, 1)
		s.env.SignalWorkflowByID(reconcile.WorkflowID(res.Records[0].OperationKey), reconcile.SignalName,
			reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":"T-1"}`)})
	}, 90*time.Minute)
	out := s.run(t, workflowInput{Tenant: "acme", Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	key := s.records(t)[0].OperationKey
	require.Equal(t, oncekey.ErrTypeIndeterminate, out[0].Type)
	require.Contains(t, out[0].Detail, "nobody resolved")
	require.Contains(t, out[0].Detail, "none waits for the key now: run the step again to start a new one")
	require.Contains(t, out[0].Detail, "write the decision to the store with `oncekey resolve "+key+" --direct --schema support --namespace "+testNamespace+
		" --tenant acme --epoch <epoch> --applied --ref <receipt> --result '<result JSON>'` (it landed), or the same with `--not-applied` (it did not) or `--failed`")
	// What the workflow's err.Error() says is the text for a model, with none of that.
	require.Equal(t, oncekey.ModelText(oncekey.OutcomeUnknown, oncekey.NextReconcile, "")+
		" (type: oncekey.IndeterminateOutcome, retryable: false)", out[0].Err)
	require.Empty(t, out[1].Err)
	require.Equal(t, "T-1", out[1].Ticket.ID, "the second run of the step was settled by the resolution")
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies, "the tool ran once; the second run found the record unknown")
}

func TestSuiteCodecDataConverterRoundTrip(t *testing.T) {
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), converter.NewZlibCodec(converter.ZlibCodecOptions{AlwaysEncode: true}))
	ds := newDownstream()
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{
		opts: func(o *interceptor.Options) { o.DataConverter = dc },
		env:  func(e *testsuite.TestWorkflowEnvironment) { e.SetDataConverter(dc) },
	})
	out := s.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Empty(t, out[0].Err)
	require.Equal(t, out[0].Ticket, out[1].Ticket)
	recs := s.records(t)
	ps, err := payloadsFrom(recs[0].Result)
	require.NoError(t, err)
	require.Equal(t, "binary/zlib", string(ps.Payloads[0].Metadata["encoding"]), "the stored result went through the codec")
	var back Ticket
	require.NoError(t, dc.FromPayloads(ps, &back))
	require.Equal(t, out[0].Ticket, back)
}

// capture is a logger and metrics handler that keep everything they are given.
type capture struct {
	mu       sync.Mutex
	lines    []string
	counters map[string]int64
	timers   map[string]int
	tags     map[string]string
}

func newCapture() *capture {
	return &capture{counters: map[string]int64{}, timers: map[string]int{}, tags: map[string]string{}}
}

func (c *capture) log(level, msg string, kv ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, level+" "+msg+" "+fmt.Sprint(kv...))
}
func (c *capture) Debug(msg string, kv ...any) { c.log("DEBUG", msg, kv...) }
func (c *capture) Info(msg string, kv ...any)  { c.log("INFO", msg, kv...) }
func (c *capture) Warn(msg string, kv ...any)  { c.log("WARN", msg, kv...) }
func (c *capture) Error(msg string, kv ...any) { c.log("ERROR", msg, kv...) }

var _ log.Logger = (*capture)(nil)

func TestSuiteObservability(t *testing.T) {
	ds := newDownstream()
	logs := newCapture()
	metrics := newMetrics()
	var mu sync.Mutex
	var events []interceptor.Event
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{
		suite: func(s *testsuite.WorkflowTestSuite) { s.SetLogger(logs); s.SetMetricsHandler(metrics) },
		opts: func(o *interceptor.Options) {
			o.OnEvent = func(e interceptor.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
		},
	})
	secret := TicketRequest{Customer: "zz-customer-secret", Subject: "zz-subject-secret", RequestID: "zz-request-secret"}
	out := s.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: secret},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: secret},
		{Tool: "LookupCustomer", Req: secret},
	}})
	require.Empty(t, out[0].Err)
	require.Empty(t, out[1].Err)

	require.Len(t, events, 2, "one event per claimed call; the ReadOnly call has none")
	require.Equal(t, oncekey.OutcomeApplied, events[0].Outcome)
	require.Equal(t, oncekey.OutcomeReplayed, events[1].Outcome)
	for _, e := range events {
		require.Equal(t, "CreateTicket", e.Tool)
		require.Equal(t, testNamespace, e.Tenant)
		require.Regexp(t, `^ok1_[0-9a-f]{8}$`, e.KeyPrefix)
		require.Positive(t, e.ClaimLatency)
		require.NoError(t, e.Err)
	}

	require.EqualValues(t, 1, metrics.counter(interceptor.MetricCalls, "CreateTicket", "applied"))
	require.EqualValues(t, 1, metrics.counter(interceptor.MetricCalls, "CreateTicket", "replayed"))
	require.Equal(t, 2, metrics.timerCount(interceptor.MetricClaimLatency, "CreateTicket"))

	logs.mu.Lock()
	all := strings.Join(logs.lines, "\n")
	logs.mu.Unlock()
	require.Contains(t, all, "oncekey: tool call")
	require.Contains(t, all, events[0].KeyPrefix)
	require.Contains(t, all, "replayed")
	for _, v := range []string{"zz-customer-secret", "zz-subject-secret", "zz-request-secret", "T-1"} {
		require.NotContains(t, all, v, "logs never carry arguments or results")
	}
}

// An activity type without a policy runs unclaimed, and the worker says so once, at Info level
// through the activity logger, naming Registry.SetAs: an activity registered under a name of its
// own with its policy set by function value is otherwise silently unprotected.
func TestSuiteNoPolicyLoggedOncePerType(t *testing.T) {
	ds := newDownstream()
	logs := newCapture()
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{
		suite: func(s *testsuite.WorkflowTestSuite) { s.SetLogger(logs) },
	})
	out := s.run(t, workflowInput{Calls: []stepCall{
		{Tool: "Untracked", Req: req1},
		{Tool: "Untracked", Req: req1},
		{Tool: "LookupCustomer", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	for _, r := range out {
		require.Empty(t, r.Err)
	}
	_, bodies := ds.counts()
	require.Equal(t, 4, bodies)

	logs.mu.Lock()
	defer logs.mu.Unlock()
	var noPolicy []string
	for _, l := range logs.lines {
		if strings.Contains(l, "no policy for activity type") {
			noPolicy = append(noPolicy, l)
		}
	}
	require.Len(t, noPolicy, 1, "one line for the first call of the unknown type, none for its second call or for registered types: %q", noPolicy)
	require.True(t, strings.HasPrefix(noPolicy[0], "INFO oncekey: no policy for activity type Untracked; it runs without a claim."), noPolicy[0])
	require.Contains(t, noPolicy[0], `Registry.SetAs("Untracked", fn, policy)`)
}

// A routed call naming a tool without a policy (a misspelt name: get_weather for get-weather)
// runs under the Route's Fallback, and the worker says so at Warn once per activity type and
// tool, naming the tool, the Fallback's class and the registered tools.
func TestSuiteRouteFallbackLoggedOncePerTool(t *testing.T) {
	ds := newDownstream()
	logs := newCapture()
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{
		suite: func(s *testsuite.WorkflowTestSuite) { s.SetLogger(logs) },
		opts: func(o *interceptor.Options) {
			// LookupCustomer's one argument, a string, names the tool.
			require.NoError(t, o.Registry.Route("LookupCustomer", oncekey.Route{Tool: func(args json.RawMessage) (string, bool) {
				var name string
				return name, json.Unmarshal(args, &name) == nil
			}}))
			require.NoError(t, oncekey.SetTool[string](o.Registry, "get-weather", oncekey.Policy{Effect: oncekey.ReadOnly}))
		},
	})
	call := func(step, tool string) stepCall {
		return stepCall{StepID: step, Tool: "LookupCustomer", Req: TicketRequest{Customer: tool}}
	}
	out := s.run(t, workflowInput{Calls: []stepCall{
		call("s1", "get_weather"), call("s2", "get_weather"), call("s3", "get-weather"), call("s4", "send_fax"),
	}})
	for _, r := range out {
		require.Empty(t, r.Err)
	}
	_, bodies := ds.counts()
	require.Equal(t, 4, bodies, "the Fallback runs the call")
	require.Len(t, s.records(t), 3, "the Fallback, Effectful, claims: s1, s2 and s4; the ReadOnly tool claims nothing")

	logs.mu.Lock()
	defer logs.mu.Unlock()
	var warned []string
	for _, l := range logs.lines {
		if strings.Contains(l, "which has no policy") {
			warned = append(warned, l)
		}
	}
	require.Len(t, warned, 2, "one line per tool, the first time: %q", warned)
	require.True(t, strings.HasPrefix(warned[0], `WARN oncekey: LookupCustomer called tool "get_weather", which has no policy; `+
		`it runs under the Route's Fallback, effectful.`), warned[0])
	require.Contains(t, warned[0], "get-weather", "the registered tools are named")
	require.Contains(t, warned[1], `"send_fax"`)
}

// schemaNamingStore is a store that names the schema of its table, as pgstore does.
type schemaNamingStore struct{ oncekeystore.Store }

func (schemaNamingStore) Schema() string { return "support" }

// Without RememberFailures a definite failure is not stored: the claim is given back, and a
// repeat of the operation runs the tool again (nothing landed either time).
func TestSuiteFailedIsNotRememberedByDefault(t *testing.T) {
	ds := newDownstream(faultFailed, faultFailed)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	out := s.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Equal(t, oncekey.ErrTypeFailed, out[0].Type)
	require.Equal(t, oncekey.ErrTypeFailed, out[1].Type)
	require.NotContains(t, out[1].Err, "replaying the remembered failure", "the repeat ran the tool")
	effects, bodies := ds.counts()
	require.Equal(t, 0, effects)
	require.Equal(t, 2, bodies, "the repeat ran the tool again")
	recs := s.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, oncekeystore.StatusReleased, recs[0].Status)
}
