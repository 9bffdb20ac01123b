package interceptor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/internal/workflows"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storemock"
	"github.com/oncekey/oncekey/pgstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// suiteStores are the stores of the suite tests where the store's own part matters: the suite's
// memstore as it is, and pgstore in a fresh migrated schema (skipped with -short). store returns
// the one the test runs against, given the suite's memstore.
var suiteStores = []struct {
	name  string
	store func(t *testing.T, mem oncekeystore.Store) oncekeystore.Store
}{
	{"memstore", func(t *testing.T, mem oncekeystore.Store) oncekeystore.Store { return mem }},
	{"pgstore", func(t *testing.T, _ oncekeystore.Store) oncekeystore.Store {
		if testing.Short() {
			t.Skip("needs Postgres")
		}
		pool := testenv.Postgres(t)
		require.NoError(t, pgstore.Migrate(context.Background(), pool))
		return pgstore.New(pool, nil)
	}},
}

// suiteEnv is an SDK test environment with the interceptor installed through worker options,
// the fake downstream's tools registered for real (no mocks) and memstore as the store.
type suiteEnv struct {
	env   *testsuite.TestWorkflowEnvironment
	store *memstore.Store
	ds    *downstream
	reg   *oncekey.Registry
}

// suiteConfig adjusts setupSuite.
type suiteConfig struct {
	suite func(*testsuite.WorkflowTestSuite)
	store func(oncekeystore.Store) oncekeystore.Store // wraps memstore (fault injection)
	// fault, if set, puts a gomock mock of the store in front of it (after store), with the
	// exact-point faults fault sets; every other call goes through (faultAt).
	fault func(*storemock.Store)
	opts  func(*interceptor.Options)
	env   func(*testsuite.TestWorkflowEnvironment)
	mem   *memstore.Options // options of the memstore (a fake clock)
	// ticketTool, if set, is registered as CreateTicket instead of ds.CreateTicket.
	ticketTool any
}

func setupSuite(t *testing.T, ds *downstream, ticketPolicy oncekey.Policy, mutate ...func(*interceptor.Options)) *suiteEnv {
	t.Helper()
	return setupSuiteWith(t, ds, ticketPolicy, suiteConfig{opts: func(o *interceptor.Options) {
		for _, m := range mutate {
			m(o)
		}
	}})
}

func setupSuiteWith(t *testing.T, ds *downstream, ticketPolicy oncekey.Policy, cfg suiteConfig) *suiteEnv {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	if cfg.suite != nil {
		cfg.suite(&s)
	}
	env := s.NewTestWorkflowEnvironment()
	if cfg.env != nil {
		cfg.env(env)
	}
	var ticketTool any = ds.CreateTicket
	if cfg.ticketTool != nil {
		ticketTool = cfg.ticketTool
	}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(ticketTool, ticketPolicy))
	require.NoError(t, reg.Set(ds.LookupCustomer, oncekey.Policy{Effect: oncekey.ReadOnly}))
	mem := memstore.New(cfg.mem)
	var store oncekeystore.Store = mem
	if cfg.store != nil {
		store = cfg.store(mem)
	}
	if cfg.fault != nil {
		store = faultAt(t, store, cfg.fault)
	}
	opts := interceptor.Options{Store: store, Registry: reg}
	if cfg.opts != nil {
		cfg.opts(&opts)
	}
	ic, err := interceptor.New(opts)
	require.NoError(t, err)
	env.SetWorkerOptions(sdkworker.Options{
		Interceptors: []tinterceptor.WorkerInterceptor{ic},
		// Under the race detector on a busy machine a workflow task of the test environment can
		// take longer than the SDK's default deadlock detection (1 s).
		DeadlockDetectionTimeout: time.Minute,
	})
	env.RegisterWorkflow(AgentWorkflow)
	env.RegisterActivity(ticketTool)
	env.RegisterActivity(ds.LookupCustomer)
	env.RegisterActivity(ds.Untracked)
	acts, err := activities.NewWithOptions(store, activities.Options{DataConverter: opts.DataConverter, Registry: reg, ResultSealer: opts.ResultSealer})
	require.NoError(t, err)
	acts.Register(env)
	workflows.Register(env)
	return &suiteEnv{env: env, store: mem, ds: ds, reg: reg}
}

func (s *suiteEnv) run(t *testing.T, in workflowInput) []callResult {
	t.Helper()
	s.env.ExecuteWorkflow(AgentWorkflow, in)
	require.True(t, s.env.IsWorkflowCompleted())
	require.NoError(t, s.env.GetWorkflowError())
	var out []callResult
	require.NoError(t, s.env.GetWorkflowResult(&out))
	require.Len(t, out, len(in.Calls))
	return out
}

func (s *suiteEnv) records(t *testing.T) []*oncekeystore.Record {
	t.Helper()
	res, err := s.store.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	return res.Records
}

var req1 = TicketRequest{Customer: "acme", Subject: "printer on fire", RequestID: "r-1"}

func TestSuiteReadOnlyAndUnpolicedPassThrough(t *testing.T) {
	ds := newDownstream()
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	out := s.run(t, workflowInput{Calls: []stepCall{
		{Tool: "LookupCustomer", Req: req1}, {Tool: "LookupCustomer", Req: req1}, {Tool: "Untracked", Req: req1},
	}})
	require.Equal(t, "customer:acme", out[0].Text)
	require.Equal(t, "customer:acme", out[1].Text)
	require.Equal(t, "untracked:acme", out[2].Text)
	_, bodies := ds.counts()
	require.Equal(t, 3, bodies, "read-only and unpoliced tools run every time")
	require.Empty(t, s.records(t), "nothing is claimed for them")
}

func TestSuiteEffectfulReplaySameStep(t *testing.T) {
	ds := newDownstream()
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	out := s.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Empty(t, out[0].Err)
	require.Empty(t, out[1].Err)
	require.Equal(t, "T-1", out[0].Ticket.ID)
	require.Equal(t, out[0].Ticket, out[1].Ticket, "the repeat gets the first result")
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies, "the repeat never entered the body")
	recs := s.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, oncekeystore.StatusApplied, recs[0].Status)
	require.Equal(t, []string{recs[0].OperationKey}, ds.keys, "the body saw its operation key")
}

func TestSuiteFingerprintMismatchRejected(t *testing.T) {
	ds := newDownstream()
	logs := newCapture()
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{
		suite: func(s *testsuite.WorkflowTestSuite) { s.SetLogger(logs) },
	})
	other := req1
	other.Subject = "something else"
	out := s.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: other},
	}})
	require.Empty(t, out[0].Err)
	require.Equal(t, oncekey.ErrTypeFingerprintMismatch, out[1].Type, out[1].Err)
	require.Equal(t, oncekey.OutcomeConflict, out[1].Label, "a conflict, not a refusal to ask approval for")
	require.Equal(t, oncekey.NextFix, out[1].Next)
	// An expected refusal: benign, so the SDK logs no "Activity error." at ERROR for it, and
	// oncekey logs one line at WARN.
	require.True(t, out[1].Benign, "the mismatch is an expected refusal")
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	recs := s.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, oncekeystore.StatusApplied, recs[0].Status, "the record is untouched")

	logs.mu.Lock()
	defer logs.mu.Unlock()
	var conflict []string
	for _, l := range logs.lines {
		require.False(t, strings.HasPrefix(l, "ERROR") && strings.Contains(l, "arguments"), "an expected refusal logged as an error: %s", l)
		if strings.Contains(l, "oncekey: tool call") && strings.Contains(l, string(oncekey.OutcomeConflict)) {
			conflict = append(conflict, l)
		}
	}
	require.Len(t, conflict, 1, "%q", logs.lines)
	require.True(t, strings.HasPrefix(conflict[0], "WARN oncekey: tool call"), conflict[0])
	require.NotContains(t, conflict[0], "\n", "one line")
}

func TestSuiteExcludedFieldDoesNotChangeFingerprint(t *testing.T) {
	ds := newDownstream()
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"request_id"}})
	other := req1
	other.RequestID = "r-2"
	out := s.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: other},
	}})
	require.Empty(t, out[1].Err)
	require.Equal(t, out[0].Ticket, out[1].Ticket)
	effects, _ := ds.counts()
	require.Equal(t, 1, effects)
}

func TestSuiteIdempotentRetriedAfterPlainError(t *testing.T) {
	ds := newDownstream(faultErrorBeforeCommit, faultErrorBeforeCommit)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Idempotent})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	require.Equal(t, "T-1", out[0].Ticket.ID)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 3, bodies, "Temporal retried the body after each plain error")
	recs := s.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, oncekeystore.StatusApplied, recs[0].Status)
}

func TestSuiteNotAppliedRescheduledByWorkflow(t *testing.T) {
	ds := newDownstream(faultNotApplied, faultNotApplied)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	var attempts []int32
	s.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "CreateTicket" {
			attempts = append(attempts, info.Attempt)
		}
	})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	require.Equal(t, "T-1", out[0].Ticket.ID)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 3, bodies)
	// Each run was a fresh activity with Temporal retries off: the workflow side re-scheduled it.
	require.Equal(t, []int32{1, 1, 1}, attempts)
}

func TestSuiteNotAppliedStopsAtMaximumAttempts(t *testing.T) {
	ds := newDownstream(faultNotApplied, faultNotApplied, faultNotApplied)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	out := s.run(t, workflowInput{MaxAttempts: 2, Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeNotApplied, out[0].Type, out[0].Err)
	effects, bodies := ds.counts()
	require.Equal(t, 0, effects)
	require.Equal(t, 2, bodies, "the user's MaximumAttempts bounds the workflow-side loop")
}

func TestSuiteRequireStepID(t *testing.T) {
	ds := newDownstream()
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful, RequireStepID: true})
	out := s.run(t, workflowInput{Calls: []stepCall{
		{Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Equal(t, oncekey.ErrTypeConfig, out[0].Type)
	require.Contains(t, out[0].Detail, "WithStepID")
	require.Contains(t, out[0].Detail, "CreateTicket")
	require.Equal(t, oncekey.OutcomeFailed, out[0].Label, "Label reads the refusal made in workflow code")
	require.Equal(t, oncekey.NextStop, out[0].Next)
	require.Empty(t, out[1].Err)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies, "the call without a step ID never reached the worker")
}
