package oncekeytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	okworker "github.com/oncekey/oncekey/worker"
)

// Config configures a Kit. Registry and Effects are required; every other field has a default.
type Config struct {
	// Registry holds the policies of the tools under test, as the worker has them. Required, also
	// with Disabled: the kit names each call's tool by it.
	Registry *oncekey.Registry

	// Effects reports how many effects each tool has landed downstream so far, by tool name (the
	// activity type, or the name a Route gives the call), as the test's own downstream counts
	// them: a fake service's ledger, or a Counter the tool functions add to. Required. The kit
	// reads it when New returns and again for each Report, and counts the difference.
	Effects func() map[string]int

	// Plan chooses the faults. Nil injects none.
	Plan Plan

	// Store is the store oncekey claims in. Defaults to a new memstore on the test environment;
	// required with Client (a pgstore.Store for the store production runs).
	Store oncekeystore.Store

	// Options are the rest of oncekey's worker options (Tenant, EscalationTimeout, ...). Store and
	// Registry above replace Options.Store and Options.Registry; Options.OnEvent is called after
	// the kit has counted the event.
	Options okworker.Options

	// Disabled runs the same workflows, activities and faults without oncekey: no interceptor, no
	// reconciliation, Temporal's retries as the workflow asks. It is the control a test compares
	// with, to show that the plan does produce double effects.
	Disabled bool

	// Client, when set, runs on that Temporal server (a dev server) instead of the SDK's test
	// environment: the kit starts a worker on TaskQueue with the registered workflows and
	// activities at the first ExecuteWorkflow, and stops it when the test ends.
	Client client.Client

	// Namespace is Client's namespace, for a Reset. Defaults to "default".
	Namespace string

	// TaskQueue is the worker's task queue with Client. Defaults to "oncekeytest-", the test's
	// name and the kit's number in the test binary, so two kits never share a worker.
	TaskQueue string

	// Settle decides each unknown outcome of the kit's workflows, as the person on call or a
	// receipt lookup would. Defaults to SettleSeen. It may be called from the test environment's
	// workflow goroutine or from the kit's own: it must not block for long.
	Settle func(ctx context.Context, u Unknown) Decision

	// Approve decides each approval request of the kit's workflows. Defaults to ApproveAll.
	Approve func(ctx context.Context, a oncekeystore.Approval) Decision

	// Intent names the effect a call intends: calls with equal names are one intended effect,
	// which must land at most once. It is given the call and its arguments document (canonical
	// JSON; for a routed call the part at Route.Args). Defaults to the workflow ID and the call's
	// step ID when the workflow gave one (oncekey.WithStepID), else the workflow ID, the tool and
	// the arguments: a repeat with the same arguments in the same workflow is the same intention.
	// Name by your business key when one effect spans workflows (one refund per order).
	Intent func(c Call, args json.RawMessage) string

	// Timeout bounds each ExecuteWorkflow, every run of it included. Defaults to 2 minutes.
	Timeout time.Duration

	// Logger receives the SDK's and oncekey's logs. Defaults to none.
	Logger sdklog.Logger
}

// Kit runs a test's workflows and tools under a fault plan, settles what needs a person, and
// counts what landed. Make one per test with New; its methods are safe for concurrent use.
type Kit struct {
	t   testing.TB
	cfg Config
	dc  converter.DataConverter
	ok  okworker.Options // with Store and Registry set; unused when Disabled
	// number tells the kits of one test binary apart: their task queues and workflow IDs.
	number int64
	// defaultSettle: Config.Settle was nil, so an unknown the kit did not cause fails the test.
	defaultSettle bool

	mu          sync.Mutex
	workflows   []registration
	activities  []registration
	baseline    map[string]int
	passes      map[string]int // workflow ID → the run under way
	executions  map[string]int // workflow ID → its ExecuteWorkflow's number
	attempts    map[string]int // workflow ID, tool, N → attempts made
	intents     map[string]map[string]bool
	toolOrder   []string
	faults      map[string]map[Fault]int
	reads       []Read
	seen        map[string]seenAttempt // operation key → what the kit saw of an attempt it killed
	replays     map[string]int
	unknowns    map[string]int
	settled     map[string]bool // key and epoch, or approval key and episode, decided
	decisions   map[string]map[string]int
	pending     map[string]Call // workflow ID → the call a Reset or Rerun returns to
	ids         map[string]bool
	runs        int
	worker      sdkworker.Worker
	stopOperate func()
	sending     sync.WaitGroup // decisions being sent to a server
}

type registration struct {
	fn   any
	wf   workflow.RegisterOptions
	act  activityOptions
	opts bool
}

type activityOptions struct{ name string }

type seenAttempt struct {
	fault Fault
	d     Decision
}

// New returns a Kit for t. It fails t at once when cfg is incomplete.
func New(t testing.TB, cfg Config) *Kit {
	t.Helper()
	if cfg.Registry == nil {
		t.Fatal("oncekeytest: Config.Registry is required: the Registry your worker gives oncekey")
	}
	if cfg.Effects == nil {
		t.Fatal("oncekeytest: Config.Effects is required: a function returning the effects each tool landed downstream (a Counter's Counts, or your fake service's ledger)")
	}
	if cfg.Store == nil {
		if cfg.Client != nil {
			t.Fatal("oncekeytest: Config.Store is required with Config.Client: the store your workers claim in (pgstore.New)")
		}
		cfg.Store = memstore.New(nil)
	}
	defaultSettle := cfg.Settle == nil
	if defaultSettle {
		cfg.Settle = SettleSeen
	}
	if cfg.Approve == nil {
		cfg.Approve = ApproveAll
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	number := kits.Add(1)
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = fmt.Sprintf("oncekeytest-%s-%d", idSafe.ReplaceAllString(t.Name(), "_"), number)
	}
	if cfg.Logger == nil {
		cfg.Logger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	k := &Kit{
		t: t, cfg: cfg, defaultSettle: defaultSettle, number: number,
		passes: map[string]int{}, executions: map[string]int{}, attempts: map[string]int{}, intents: map[string]map[string]bool{},
		faults: map[string]map[Fault]int{}, seen: map[string]seenAttempt{}, replays: map[string]int{},
		unknowns: map[string]int{}, settled: map[string]bool{}, decisions: map[string]map[string]int{},
		pending: map[string]Call{}, ids: map[string]bool{},
	}
	k.dc = cfg.Options.DataConverter
	if k.dc == nil {
		k.dc = converter.GetDefaultDataConverter()
	}
	k.ok = cfg.Options
	k.ok.Store, k.ok.Registry = cfg.Store, cfg.Registry
	userEvent := cfg.Options.OnEvent
	k.ok.OnEvent = func(e okworker.Event) {
		k.onEvent(e)
		if userEvent != nil {
			userEvent(e)
		}
	}
	if !cfg.Disabled {
		// A wrong registration fails the test here, as it would fail the worker.
		if _, err := okworker.NewInterceptor(k.ok); err != nil {
			t.Fatalf("oncekeytest: %v", err)
		}
	}
	k.baseline = copyCounts(cfg.Effects())
	t.Cleanup(k.stop)
	return k
}

// Store returns the store oncekey claims in: Config.Store, or the kit's memstore.
func (k *Kit) Store() oncekeystore.Store { return k.cfg.Store }

// RegisterWorkflow registers a workflow function of the test, as worker.RegisterWorkflow does.
// Register everything before the first ExecuteWorkflow.
func (k *Kit) RegisterWorkflow(w any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.workflows = append(k.workflows, registration{fn: w})
}

// RegisterWorkflowWithOptions registers a workflow function under options.
func (k *Kit) RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.workflows = append(k.workflows, registration{fn: w, wf: options, opts: true})
}

// RegisterActivity registers an activity function, or a struct whose methods are activities, as
// worker.RegisterActivity does. These are the test's real tool functions: the kit injects its
// faults around them, never in them.
func (k *Kit) RegisterActivity(a any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.activities = append(k.activities, registration{fn: a})
}

// RegisterActivityAs registers an activity function under name.
func (k *Kit) RegisterActivityAs(a any, name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.activities = append(k.activities, registration{fn: a, act: activityOptions{name: name}, opts: true})
}

// Run is one ExecuteWorkflow: the workflow's last run after every Reset and Rerun of the plan.
type Run struct {
	// WorkflowID is the workflow's ID.
	WorkflowID string
	// Passes is how many times the workflow ran: 1, plus one per Reset or Rerun.
	Passes int
	get    func(valuePtr any) error
	err    error
}

// Err returns the workflow's error, nil when it completed.
func (r *Run) Err() error { return r.err }

// Get decodes the workflow's result into valuePtr, or returns its error.
func (r *Run) Get(valuePtr any) error {
	if r.err != nil {
		return r.err
	}
	return r.get(valuePtr)
}

// ExecuteWorkflow runs the workflow wf with args under the kit's workflow ID for it (the test's
// name, the kit's number and the run's), to its end; then, when the plan asked for a Reset or a Rerun, runs it
// again, and so on (at most 3 runs in all). It fails the test when a run cannot start or does
// not end within Config.Timeout; the workflow's own failure is Run.Err.
func (k *Kit) ExecuteWorkflow(wf any, args ...any) *Run {
	k.t.Helper()
	k.mu.Lock()
	k.runs++
	id := fmt.Sprintf("%s-k%d-%d", idSafe.ReplaceAllString(k.t.Name(), "_"), k.number, k.runs)
	k.mu.Unlock()
	return k.ExecuteWorkflowID(id, wf, args...)
}

var idSafe = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// kits counts the kits made in the test binary.
var kits atomic.Int64

// maxPasses bounds the runs of one ExecuteWorkflow.
const maxPasses = 3

// ExecuteWorkflowID is ExecuteWorkflow under the workflow ID id.
func (k *Kit) ExecuteWorkflowID(id string, wf any, args ...any) *Run {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), k.cfg.Timeout)
	defer cancel()
	k.mu.Lock()
	k.ids[id] = true
	k.passes[id] = 1
	if k.executions[id] == 0 {
		k.executions[id] = len(k.executions) + 1
	}
	k.mu.Unlock()
	run := &Run{WorkflowID: id}
	var reset func(context.Context, Call) (client.WorkflowRun, error)
	for pass := 1; ; pass++ {
		run.Passes = pass
		var err error
		if k.cfg.Client == nil {
			err = k.runTestEnv(ctx, run, id, wf, args)
		} else {
			var wr client.WorkflowRun
			if reset != nil {
				k.mu.Lock()
				c := k.pending[id]
				delete(k.pending, id)
				k.mu.Unlock()
				wr, err = reset(ctx, c)
			} else {
				wr, err = k.start(ctx, id, wf, args)
			}
			if err == nil {
				err = wr.Get(ctx, nil)
				run.get = func(v any) error { return wr.Get(context.Background(), v) }
			}
		}
		if ctx.Err() != nil {
			k.t.Fatalf("oncekeytest: workflow %s did not end within %s (Config.Timeout): %v", id, k.cfg.Timeout, err)
		}
		run.err = err
		k.mu.Lock()
		c, again := k.pending[id]
		if again && pass < maxPasses {
			k.passes[id] = pass + 1
		}
		k.mu.Unlock()
		if !again || pass >= maxPasses {
			return run
		}
		reset = nil
		if k.cfg.Client != nil {
			if c.fault(k) == Reset {
				reset = k.reset(id)
			} else {
				k.mu.Lock()
				delete(k.pending, id)
				k.mu.Unlock()
			}
		} else {
			k.mu.Lock()
			delete(k.pending, id)
			k.mu.Unlock()
		}
	}
}

// fault is the per-call fault the plan gave c.
func (c Call) fault(k *Kit) Fault { return k.callFault(c) }

// workerOptions returns the worker options with the kit's interceptors around oncekey's.
func (k *Kit) workerOptions() (sdkworker.Options, error) {
	wo := sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{&outer{k: k}}}
	if !k.cfg.Disabled {
		var err error
		if wo, err = okworker.WorkerOptions(k.ok, wo); err != nil {
			return wo, err
		}
	}
	wo.Interceptors = append(wo.Interceptors, &inner{k: k})
	return wo, nil
}

// register registers oncekey's workflows (unless Disabled) and the test's on r.
func (k *Kit) register(r sdkworker.Registry) error {
	if !k.cfg.Disabled {
		if err := okworker.Register(r, k.ok); err != nil {
			return err
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.workflows {
		if w.opts {
			r.RegisterWorkflowWithOptions(w.fn, w.wf)
		} else {
			r.RegisterWorkflow(w.fn)
		}
	}
	for _, a := range k.activities {
		if a.opts {
			r.RegisterActivityWithOptions(a.fn, activity.RegisterOptions{Name: a.act.name})
		} else {
			r.RegisterActivity(a.fn)
		}
	}
	return nil
}

// runTestEnv runs one pass on a new test environment that shares the kit's store.
func (k *Kit) runTestEnv(ctx context.Context, run *Run, id string, wf any, args []any) error {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(k.cfg.Logger)
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(k.cfg.Timeout)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id, TaskQueue: k.cfg.TaskQueue})
	if k.cfg.Options.DataConverter != nil {
		env.SetDataConverter(k.cfg.Options.DataConverter)
	}
	wo, err := k.workerOptions()
	if err != nil {
		k.t.Fatalf("oncekeytest: %v", err)
	}
	env.SetWorkerOptions(wo)
	if err := k.register(env); err != nil {
		k.t.Fatalf("oncekeytest: %v", err)
	}
	if !k.cfg.Disabled {
		var poll func()
		poll = func() {
			k.operate(ctx, func(key string, r reconcile.Resolution) error {
				return env.SignalWorkflowByID(reconcile.WorkflowID(key), reconcile.SignalName, r)
			}, func(key string, d reconcile.Decision) error {
				return env.SignalWorkflowByID(reconcile.ApprovalWorkflowID(key), reconcile.DecideSignalName, d)
			})
			env.RegisterDelayedCallback(poll, pollEvery)
		}
		env.RegisterDelayedCallback(poll, pollEvery)
	}
	env.ExecuteWorkflow(wf, args...)
	if !env.IsWorkflowCompleted() {
		k.t.Fatalf("oncekeytest: workflow %s did not complete on the test environment", id)
	}
	run.get = env.GetWorkflowResult
	return env.GetWorkflowError()
}

// pollEvery is how often (test environment time, or wall time on a server) the kit looks for
// unknown outcomes and approval requests to decide.
const pollEvery = time.Second

// start starts the workflow on the server, with the kit's worker running.
func (k *Kit) start(ctx context.Context, id string, wf any, args []any) (client.WorkflowRun, error) {
	if err := k.startWorker(); err != nil {
		k.t.Fatalf("oncekeytest: %v", err)
	}
	wr, err := k.cfg.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: k.cfg.TaskQueue}, wf, args...)
	if err != nil {
		k.t.Fatalf("oncekeytest: start workflow %s: %v", id, err)
	}
	return wr, nil
}

// startWorker starts, once, the worker and the operator of a server run.
func (k *Kit) startWorker() error {
	k.mu.Lock()
	if k.worker != nil {
		k.mu.Unlock()
		return nil
	}
	k.mu.Unlock()
	wo, err := k.workerOptions()
	if err != nil {
		return err
	}
	w := sdkworker.New(k.cfg.Client, k.cfg.TaskQueue, wo)
	if err := k.register(w); err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("start the worker on task queue %s: %w", k.cfg.TaskQueue, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if !k.cfg.Disabled {
		go func() {
			defer close(done)
			tick := time.NewTicker(pollEvery / 10)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				k.operate(ctx, func(key string, r reconcile.Resolution) error {
					c, cancel := context.WithTimeout(ctx, 30*time.Second)
					defer cancel()
					return reconcile.Resolve(c, k.cfg.Client, r.Tenant, key, r)
				}, func(key string, d reconcile.Decision) error {
					c, cancel := context.WithTimeout(ctx, 30*time.Second)
					defer cancel()
					_, err := reconcile.Decide(c, k.cfg.Client, key, d)
					return err
				})
			}
		}()
	} else {
		close(done)
	}
	k.mu.Lock()
	k.worker = w
	k.stopOperate = func() { cancel(); <-done; k.sending.Wait() }
	k.mu.Unlock()
	return nil
}

func (k *Kit) stop() {
	k.mu.Lock()
	w, stop := k.worker, k.stopOperate
	k.worker, k.stopOperate = nil, nil
	k.mu.Unlock()
	if stop != nil {
		stop()
	}
	if w != nil {
		w.Stop()
	}
}

// operate decides the unknown outcomes and approval requests of the kit's workflows that are
// waiting, once each, through resolve and decide.
func (k *Kit) operate(ctx context.Context, resolve func(string, reconcile.Resolution) error, decide func(string, reconcile.Decision) error) {
	page, err := k.cfg.Store.List(ctx, &oncekeystore.ListParams{Status: oncekeystore.StatusUnknown, Limit: 1000})
	if err == nil {
		for _, r := range page.Records {
			id := r.OperationKey + "@" + strconv.FormatInt(r.Epoch, 10)
			k.mu.Lock()
			skip := !k.ids[r.WorkflowID] || k.settled[id]
			s := k.seen[r.OperationKey]
			k.mu.Unlock()
			if skip {
				continue
			}
			u := Unknown{Record: *r, Fault: s.fault, Seen: s.d}
			d := k.cfg.Settle(ctx, u)
			if !d.forUnknown() {
				k.t.Errorf("oncekeytest: Config.Settle answered %s for the unknown outcome of %s (%s): an unknown outcome is Applied, NotApplied or Wait", d, r.Tool, r.OperationKey)
				d = NotApplied()
			}
			if s.fault == NoFault && d.kind == decideWait && k.defaultSettle {
				k.t.Errorf("oncekeytest: %s ended unknown (operation %s) and the kit did not cause it: the tool's body returned an error or timed out; "+
					"give Config.Settle a receipt lookup that says whether its effect landed. Settled as not applied so the run can end.", r.Tool, r.OperationKey)
				d = NotApplied()
			}
			// Counted before it is sent: the workflow may end before the sender hears back.
			k.mu.Lock()
			k.settled[id] = true
			k.decided(r.Tool, d, 1)
			k.mu.Unlock()
			if d.kind != decideWait {
				tool, key, res := r.Tool, r.OperationKey, d.resolution(*r)
				k.send(func() error { return resolve(key, res) }, func() {
					k.mu.Lock()
					delete(k.settled, id) // the reconciliation may not wait yet: next time
					k.decided(tool, d, -1)
					k.mu.Unlock()
				})
			}
		}
	}
	as, ok := k.cfg.Store.(oncekeystore.ApprovalStore)
	if !ok {
		return
	}
	ap, err := as.ListApprovals(ctx, &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending, Limit: 1000})
	if err != nil {
		return
	}
	for _, a := range ap.Approvals {
		id := "approval " + a.OperationKey + "@" + strconv.FormatInt(a.Episode, 10)
		k.mu.Lock()
		skip := !k.ids[a.WorkflowID] || k.settled[id]
		k.mu.Unlock()
		if skip {
			continue
		}
		d := k.cfg.Approve(ctx, *a)
		if !d.forApproval() {
			k.t.Errorf("oncekeytest: Config.Approve answered %s for the approval of %s (%s): an approval is Approve, Deny or Wait", d, a.Tool, a.OperationKey)
			d = Deny("")
		}
		k.mu.Lock()
		k.settled[id] = true
		k.decided(a.Tool, d, 1)
		k.mu.Unlock()
		if d.kind != decideWait {
			tool, key, dec := a.Tool, a.OperationKey, d.decision(*a)
			k.send(func() error { return decide(key, dec) }, func() {
				k.mu.Lock()
				delete(k.settled, id)
				k.decided(tool, d, -1)
				k.mu.Unlock()
			})
		}
	}
}

// send sends a decision and calls undo when it did not land: at once on the test environment
// (a signal, in the environment's own goroutine), in a goroutine of its own on a server, so that
// one decision waiting for its confirmation holds up no other.
func (k *Kit) send(f func() error, undo func()) {
	if k.cfg.Client == nil {
		if f() != nil {
			undo()
		}
		return
	}
	k.sending.Add(1)
	go func() {
		defer k.sending.Done()
		if f() != nil {
			undo()
		}
	}()
}

// decided adds n to the count of d for tool; k.mu is held.
func (k *Kit) decided(tool string, d Decision, n int) {
	if k.decisions[tool] == nil {
		k.decisions[tool] = map[string]int{}
	}
	k.decisions[tool][d.String()] += n
	if k.decisions[tool][d.String()] == 0 {
		delete(k.decisions[tool], d.String())
	}
}

// --- what the interceptors tell the kit ---

// resolve names the tool of a call of activityType, with its arguments document, and reports
// whether its policy claims it and whether the kit tracks it (it has a policy or a Route).
func (k *Kit) resolve(activityType string, args []any) (tool string, doc json.RawMessage, claimed, tracked bool) {
	reg := k.cfg.Registry
	p, has := reg.Policy(activityType)
	if !has && !reg.Routed(activityType) {
		return activityType, nil, false, false
	}
	doc, err := oncekey.CanonicalArgs(args)
	if err != nil {
		return activityType, nil, has && p.Effect.Claimed(), true
	}
	r, ok, err := reg.Resolve(activityType, doc)
	if err != nil {
		return activityType, doc, false, true
	}
	return r.Tool, r.Args, ok && r.Policy.Effect.Claimed(), true
}

func (k *Kit) pass(workflowID string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.passes[workflowID]; p > 0 {
		return p
	}
	return 1
}

// execution is the number of the ExecuteWorkflow that runs workflowID.
func (k *Kit) execution(workflowID string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.executions[workflowID]
}

func (k *Kit) callFault(c Call) Fault {
	if k.cfg.Plan == nil {
		return NoFault
	}
	c.Attempt = 0
	if f := k.cfg.Plan.Fault(c); !f.attemptFault() {
		return f
	}
	return NoFault
}

func (k *Kit) attemptFault(c Call) Fault {
	if k.cfg.Plan == nil {
		return NoFault
	}
	if f := k.cfg.Plan.Fault(c); f.attemptFault() {
		return f
	}
	return NoFault
}

// attempt counts an attempt of the call m names and returns it.
func (k *Kit) attempt(m callMark) Call {
	k.mu.Lock()
	defer k.mu.Unlock()
	id := m.WorkflowID + "\x00" + m.Tool + "\x00" + strconv.Itoa(m.N)
	k.attempts[id]++
	return Call{WorkflowID: m.WorkflowID, Execution: m.Execution, Tool: m.Tool, N: m.N, Pass: m.Pass, Attempt: k.attempts[id]}
}

func (k *Kit) intend(c Call, args json.RawMessage, step string, hasStep bool) {
	var name string
	switch {
	case k.cfg.Intent != nil:
		name = k.cfg.Intent(c, args)
	case hasStep:
		name = c.WorkflowID + "\x00step\x00" + step
	default:
		name = c.WorkflowID + "\x00" + c.Tool + "\x00" + string(args)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.addTool(c.Tool)
	if k.intents[c.Tool] == nil {
		k.intents[c.Tool] = map[string]bool{}
	}
	k.intents[c.Tool][name] = true
}

// addTool lists tool in the report; k.mu is held.
func (k *Kit) addTool(tool string) {
	for _, t := range k.toolOrder {
		if t == tool {
			return
		}
	}
	k.toolOrder = append(k.toolOrder, tool)
}

func (k *Kit) injected(c Call, f Fault) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.faults[c.Tool] == nil {
		k.faults[c.Tool] = map[Fault]int{}
	}
	k.faults[c.Tool][f]++
}

func (k *Kit) wantPass(c Call, f Fault) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.pending[c.WorkflowID]; !ok {
		k.pending[c.WorkflowID] = c
	}
}

func (k *Kit) saw(key string, af attemptFault, d Decision) {
	if key == "" {
		return // oncekey is off, or the tool claims nothing: no record to settle
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seen[key] = seenAttempt{fault: af.fault, d: d}
}

func (k *Kit) onEvent(e okworker.Event) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch e.Outcome {
	case oncekey.OutcomeReplayed:
		k.replays[e.Tool]++
	case oncekey.OutcomeUnknown:
		k.unknowns[e.Tool]++
	}
}

func (k *Kit) read(c Call, repeat, claimed bool, raw converter.RawValue, err error) {
	r := Read{Call: c, Repeat: repeat, Claimed: claimed, Err: err}
	if err != nil {
		r.Text = err.Error()
		r.Label = oncekey.Label(nil, err)
	} else {
		r.Label = oncekey.Label(raw, nil)
		if raw.Payload() != nil {
			var v json.RawMessage
			if k.dc.FromPayload(raw.Payload(), &v) == nil {
				r.Result = v
				r.Text = string(v)
			}
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reads = append(k.reads, r)
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sortedFaults lists the faults of m in their order.
func sortedFaults(m map[Fault]int) []Fault {
	var out []Fault
	for f := range m {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
