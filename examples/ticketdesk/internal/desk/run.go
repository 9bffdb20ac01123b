// Package desk is the ticketdesk demo: the agent workflow, its tools, the operator that
// resolves unknown outcomes, and the runner that plays every request once with oncekey and once
// with plain Temporal retries, counting effects from the downstream services' own ledgers.
package desk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	tinterceptor "go.temporal.io/sdk/interceptor"
	tworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/examples/ticketdesk/internal/downstream"
	"github.com/oncekey/oncekey/examples/ticketdesk/internal/scripted"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	okworker "github.com/oncekey/oncekey/worker"
)

// Config configures a run.
type Config struct {
	// Client is a Temporal client; the runner starts its own workers on it. Required.
	Client client.Client
	// Pool is a Postgres pool whose search_path is a schema the run may own (it migrates it).
	// Required.
	Pool *pgxpool.Pool
	// Requests are the support requests to play. Required.
	Requests []Request
	// Customers is the customer directory (and the refund allow-list). Required.
	Customers []Customer
	// Seed selects the fault schedule and the scripted model's choices. Defaults to 1.
	Seed int64
	// Faults is the fault schedule. Defaults to downstream.DefaultFaults(Seed).
	Faults *downstream.Faults
	// Model is the model the agents ask. Its zero value is the scripted model on loopback.
	Model ModelConfig
	// RepeatPercent is the scripted model's chance, per effectful call that came back applied,
	// of proposing it again (scripted.Options.RepeatPercent). Defaults to 25; negative means
	// never.
	RepeatPercent int
	// ChangePercent is the scripted model's chance, per issued refund, of e-mailing about it too:
	// the e-mail tool with other arguments (scripted.Options.ChangePercent). Defaults to 40;
	// negative means never.
	ChangePercent int
	// MaxTurns bounds the model calls per request. Defaults to DefaultMaxTurns.
	MaxTurns int
	// Tenant keys the oncekey run's records. Defaults to "ticketdesk".
	Tenant string
	// TranscriptDir, if set, receives one JSONL transcript per request and run:
	// <TranscriptDir>/oncekey/<request ID>.jsonl and <TranscriptDir>/plain/<request ID>.jsonl.
	TranscriptDir string
	// Progress, if set, receives progress lines, one call at a time.
	Progress func(string)
	// Done, if set, is called each time a request's workflow ends, with the run's mode, the
	// requests done and the total.
	Done func(mode string, done, total int)
	// KillRequest is the request whose ticket call loses its worker mid-call (Kill), in both
	// runs. Defaults to the first request whose first ticket attempt meets no downstream fault;
	// "-" means none.
	KillRequest string
	// DuplicateRequest is the request whose first ticket call the model proposes twice in one
	// message, the first of the two held by a slow ticket system (Hold) so that the other finds
	// it in flight, in both runs. Defaults to the first request other than KillRequest whose first
	// ticket attempt meets no downstream fault; "-" means none.
	DuplicateRequest string
	// EscalationTimeout is the interceptor's (okworker.Options.EscalationTimeout): how long a
	// reconciliation waits for the operator. Defaults to 15 s, well past the operator's answers,
	// so that only the operation the operator is away for (KillRequest's ticket call) reaches
	// its agent as unknown.
	EscalationTimeout time.Duration
	// Timeout bounds each of the two runs. Defaults to 4 minutes.
	Timeout time.Duration
	// LeaveOne, if set, makes the operator leave the first operation it finds waiting for a
	// person to someone else, and call LeaveOne with it and the URL where the downstream lists
	// the effect its key landed. The run goes on when that operation is resolved (for instance
	// with `oncekey resolve`).
	LeaveOne func(rec *oncekeystore.Record, lookupURL string)
}

// ModelConfig names the model. With BaseURL and APIKey empty the runner starts the scripted model
// (package scripted) on loopback for each run.
type ModelConfig struct {
	// BaseURL is the OpenAI-compatible API base ("https://api.openai.com/v1"); "" means
	// openai-go's default (OPENAI_BASE_URL, else OpenAI's).
	BaseURL string
	// APIKey is the key; "" with BaseURL "" means the scripted model.
	APIKey string
	// Name is the model. Defaults to scripted.ModelName for the scripted model; required otherwise.
	Name string
}

// Scripted reports whether the config means the scripted model.
func (m ModelConfig) Scripted() bool { return m.BaseURL == "" && m.APIKey == "" }

func (c *Config) defaults() error {
	if c.Client == nil || c.Pool == nil {
		return errors.New("desk: Config.Client and Config.Pool are required")
	}
	if len(c.Requests) == 0 {
		return errors.New("desk: no requests")
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Faults == nil {
		f := downstream.DefaultFaults(c.Seed)
		c.Faults = &f
	}
	if c.Model.Scripted() && c.Model.Name == "" {
		c.Model.Name = scripted.ModelName
	}
	if c.Model.Name == "" {
		return errors.New("desk: Config.Model.Name is required for a model other than the scripted one")
	}
	if c.Tenant == "" {
		c.Tenant = "ticketdesk"
	}
	if c.KillRequest == "" {
		// The first request whose first ticket attempt meets no downstream fault: the kill is
		// then the only thing that goes wrong with that call.
		c.KillRequest = c.Requests[0].ID
		for _, r := range c.Requests {
			if c.Faults.For(downstream.ServiceTickets, r.ID, 1) == downstream.FaultNone {
				c.KillRequest = r.ID
				break
			}
		}
	}
	if c.DuplicateRequest == "" {
		c.DuplicateRequest = "-"
		for _, r := range c.Requests {
			if r.ID != c.KillRequest && c.Faults.For(downstream.ServiceTickets, r.ID, 1) == downstream.FaultNone {
				c.DuplicateRequest = r.ID
				break
			}
		}
	}
	if c.EscalationTimeout == 0 {
		c.EscalationTimeout = 15 * time.Second
	}
	if c.Progress == nil {
		c.Progress = func(string) {}
	} else {
		// The runner and the operator report from their own goroutines: one line at a time.
		var mu sync.Mutex
		progress := c.Progress
		c.Progress = func(s string) {
			mu.Lock()
			defer mu.Unlock()
			progress(s)
		}
	}
	if c.Done == nil {
		c.Done = func(string, int, int) {}
	}
	if c.Timeout == 0 {
		c.Timeout = 4 * time.Minute
	}
	return nil
}

// Report is what both runs produced.
type Report struct {
	Oncekey *ModeReport
	Plain   *ModeReport
}

// ModeReport is what one run produced. Effects are counted from the downstream ledgers.
type ModeReport struct {
	// Mode is "oncekey" or "plain retries".
	Mode string
	// Approvals is the approval scene, played after the oncekey run (nil for plain retries).
	Approvals *ApprovalScene
	Requests  int
	// Completed and Failed count agent workflows.
	Completed, Failed int
	// WorkflowErrors lists failed workflows ("REQ-007: ...").
	WorkflowErrors []string
	// ToolCalls counts the calls the model proposed; Reproposals those it proposed again with the
	// same material arguments, ReproposalsReplayed those of them answered as replays, and
	// ChangedArguments effectful calls proposed again with other arguments (new operations).
	ToolCalls, Reproposals, ReproposalsReplayed, ChangedArguments int
	// Labels counts the tool results the model read, by status.
	Labels map[oncekey.Outcome]int
	// ModelCalls counts the model activity's completions (turns), OutOfTurns the requests that
	// hit MaxTurns.
	ModelCalls, OutOfTurns int
	// Effects, DoubleEffects and Doubled come from the ledgers of the three effectful services
	// and from the credit ledger table (ServiceLedger).
	Effects, DoubleEffects int
	Doubled                []string
	// PerService is each service's ledger snapshot.
	PerService map[string]downstream.Stats
	// Faults counts the faults the services injected.
	Faults map[downstream.Fault]int
	// WorkerKills counts the calls whose worker died mid-call (Config.KillRequest).
	WorkerKills int
	// RefundsIssued and RefundsRefused count the agents' refund outcomes.
	RefundsIssued, RefundsRefused int
	// Operations is the number of operation keys in the store (oncekey only).
	Operations int
	// Outcomes counts claimed tool calls by outcome label, from the interceptor's OnEvent hook
	// (oncekey only).
	Outcomes map[oncekey.Outcome]int
	// Replays is Outcomes[replayed].
	Replays int
	// UnknownOperations counts the distinct operations the interceptor reported unknown at least
	// once (oncekey only); Outcomes[unknown] counts the reports.
	UnknownOperations int
	// Unsettled counts records still unknown at the end (oncekey only).
	Unsettled int
	// CreditOperations counts GrantCredit's operation keys (oncekey only); CreditUnknown its
	// operations reported unknown (oncekey only: never, the class cannot be unknown).
	// CreditMails counts the credit confirmations the e-mail service landed (its ledger).
	CreditOperations, CreditUnknown, CreditMails int
	// OutboxDeliveries counts the relay's deliveries that the e-mail service accepted,
	// OutboxAttempts all it tried (oncekey only).
	OutboxDeliveries, OutboxAttempts int
	// Reconciled counts records resolved by reconciliation; ByOperator and ByReceipt split it.
	Reconciled, ReconciledByOperator, ReconciledByReceipt int
	Duration                                              time.Duration
}

// Run plays every request with oncekey, then with plain Temporal retries, and returns both
// reports.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	tag := randomTag()
	if _, err := cfg.Pool.Exec(ctx, creditLedgerDDL); err != nil {
		return nil, fmt.Errorf("desk: create the credit ledger: %w", err)
	}
	once, err := runOncekey(ctx, cfg, tag)
	if err != nil {
		return nil, err
	}
	plain, err := runPlain(ctx, cfg, tag)
	if err != nil {
		return nil, err
	}
	return &Report{Oncekey: once, Plain: plain}, nil
}

func randomTag() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// eventCounter tallies the interceptor's events.
type eventCounter struct {
	mu sync.Mutex
	by map[oncekey.Outcome]int
	// unknownKeys holds the key prefix of every operation reported unknown: one operation can be
	// unknown more than once (settled as not applied, run again, lost again).
	unknownKeys map[string]bool
	// unknownTools counts the unknown reports per tool.
	unknownTools map[string]int
}

func (e *eventCounter) add(ev okworker.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.by == nil {
		e.by = map[oncekey.Outcome]int{}
	}
	e.by[ev.Outcome]++
	if ev.Outcome == oncekey.OutcomeUnknown && ev.KeyPrefix != "" {
		if e.unknownKeys == nil {
			e.unknownKeys = map[string]bool{}
		}
		e.unknownKeys[ev.KeyPrefix] = true
	}
	if ev.Outcome == oncekey.OutcomeUnknown {
		if e.unknownTools == nil {
			e.unknownTools = map[string]int{}
		}
		e.unknownTools[ev.Tool]++
	}
}

func (e *eventCounter) unknownOf(tool string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.unknownTools[tool]
}

func (e *eventCounter) unknownOperations() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.unknownKeys)
}

func (e *eventCounter) snapshot() map[oncekey.Outcome]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[oncekey.Outcome]int{}
	for k, v := range e.by {
		out[k] = v
	}
	return out
}

// stack is what one run's workers need: the downstream services, the MCP directory, the model
// and the tools.
type stack struct {
	services *downstream.Set
	dir      *DirectoryServer
	scripted *scripted.Server // nil for a real model
	tools    *Tools
	proxy    *McpProxy
	model    *Model
	registry *oncekey.Registry
}

// startStack starts a run's stack; run labels its rows in the credit ledger.
func startStack(cfg Config, plain bool, run string) (_ *stack, err error) {
	st := &stack{}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	if st.services, err = downstream.Start(*cfg.Faults, cfg.Customers); err != nil {
		return nil, err
	}
	st.tools = NewTools(st.services, cfg.Customers, plain)
	st.tools.Pool, st.tools.Run, st.tools.Faults = cfg.Pool, run, *cfg.Faults
	if cfg.KillRequest != "-" {
		st.tools.Kill = NewKill(cfg.KillRequest)
	}
	if cfg.DuplicateRequest != "-" {
		st.tools.Hold = &Hold{Request: cfg.DuplicateRequest, For: HoldFor}
	}
	if st.registry, err = st.tools.Policies(); err != nil {
		return nil, err
	}
	if st.dir, err = StartDirectoryServer(st.services.Directory.URL, downstream.NewClient(5*time.Second), st.registry); err != nil {
		return nil, err
	}
	st.proxy = &McpProxy{Servers: map[string]string{ToolsetDirectory: st.dir.URL}}
	defs, err := ToolDefinitions(st.registry)
	if err != nil {
		return nil, err
	}
	m := cfg.Model
	if m.Scripted() {
		dup := cfg.DuplicateRequest
		if dup == "-" {
			dup = ""
		}
		if st.scripted, err = scripted.Start(scripted.Options{Seed: cfg.Seed, RepeatPercent: cfg.RepeatPercent, ChangePercent: cfg.ChangePercent, DuplicateRequest: dup}); err != nil {
			return nil, err
		}
		m.BaseURL, m.APIKey = st.scripted.BaseURL, "scripted"
	}
	st.model = NewModel(m.BaseURL, m.APIKey, m.Name, defs, &http.Client{Timeout: 90 * time.Second})
	return st, nil
}

func (st *stack) register(w tworker.Worker) {
	w.RegisterWorkflowWithOptions((&Agent{Registry: st.registry}).Run, workflow.RegisterOptions{Name: AgentWorkflow})
	w.RegisterActivity(st.tools)
	w.RegisterActivityWithOptions(st.model.CallModel, activity.RegisterOptions{Name: ActivityCallModel})
	w.RegisterActivityWithOptions(st.proxy.CallMcpTool, activity.RegisterOptions{Name: ActivityCallMcpTool})
}

func (st *stack) close() {
	if st.tools != nil {
		st.tools.Kill.Release()
	}
	if st.proxy != nil {
		st.proxy.Close()
	}
	if st.scripted != nil {
		st.scripted.Close()
	}
	if st.dir != nil {
		st.dir.Close()
	}
	if st.services != nil {
		st.services.Close()
	}
}

func runOncekey(ctx context.Context, cfg Config, tag string) (*ModeReport, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start := time.Now()
	if err := pgstore.Migrate(ctx, cfg.Pool); err != nil {
		return nil, fmt.Errorf("desk: migrate: %w", err)
	}
	run := "oncekey-" + tag
	st, err := startStack(cfg, false, run)
	if err != nil {
		return nil, err
	}
	defer st.close()
	store := pgstore.New(cfg.Pool, nil)
	var events eventCounter
	taskQueue := "ticketdesk-oncekey-" + tag
	// The plugin installs the interceptor and registers oncekey's reconciliation workflow and
	// activities on this worker only; the plain run's worker stays untouched.
	plugin, err := okworker.NewPlugin(okworker.Options{
		Store:    store,
		Registry: st.registry,
		Tenant:   constTenant(cfg.Tenant),
		// The plugin goes on this worker only (not on cfg.Client), where it cannot see the
		// client's data converter: name it. cfg.Client has the SDK's default one, no codec.
		DataConverter:     converter.GetDefaultDataConverter(),
		OnEvent:           events.add,
		EscalationTimeout: cfg.EscalationTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("desk: oncekey plugin: %w", err)
	}
	// answerLoss is first: outside oncekey's interceptor, it loses an answer after the commit.
	w := tworker.New(cfg.Client, taskQueue, tworker.Options{Plugins: []tworker.Plugin{plugin}, Interceptors: answerLosses()})
	st.register(w)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("desk: start worker: %w", err)
	}
	defer w.Stop()

	op := &operator{client: cfg.Client, store: store, tenant: cfg.Tenant, services: st.services, http: downstream.NewClient(5 * time.Second), progress: cfg.Progress, leaveOne: cfg.LeaveOne}
	if cfg.KillRequest != "-" {
		op.awayFor = cfg.KillRequest
	}
	opCtx, stopOp := context.WithCancel(ctx)
	opDone := make(chan struct{})
	go func() { defer close(opDone); op.run(opCtx) }()
	// The outbox relay delivers the credits' confirmation e-mails, as a worker runs it.
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		// A pass that fails (the server unreachable) is said, and the relay goes on after a poll.
		_ = store.Relay(relayCtx, st.tools.deliverEmail, &relayOptions, func(err error) {
			cfg.Progress("outbox relay: " + err.Error() + " (it tries again)")
		})
	}()
	defer func() { stopRelay(); <-relayDone }()

	rep := &ModeReport{Mode: "oncekey", Requests: len(cfg.Requests)}
	results := playAll(ctx, cfg, taskQueue, "ticketdesk-"+tag+"-oncekey-", rep)
	st.tools.Kill.Release()
	if st.tools.Kill.Hit() {
		rep.WorkerKills++
	}
	stopOp()
	<-opDone
	if err := drainOutbox(ctx, store); err != nil {
		return nil, err
	}
	stopRelay()
	<-relayDone
	// Back at the desk: what was left while away is settled now, straight in the store (its
	// reconciliation gave up waiting, and the agent told the customer the outcome is unknown).
	op.comeBack(ctx)
	tally(rep, results, st.services)

	outcomes := events.snapshot()
	rep.Outcomes = outcomes
	rep.UnknownOperations = events.unknownOperations()
	rep.Replays = outcomes[oncekey.OutcomeReplayed]
	rep.CreditUnknown = events.unknownOf(ToolGrantCredit)
	rep.OutboxDeliveries, rep.OutboxAttempts = int(st.tools.deliveries.Load()), int(st.tools.deliveryAttempts.Load())
	if err := tallyCredits(ctx, rep, cfg.Pool, st.tools); err != nil {
		return nil, err
	}
	if err := countRecords(ctx, store, cfg.Tenant, rep); err != nil {
		return nil, err
	}
	// After the main run's tally, in a tenant of its own: refunds that wait for a person.
	if rep.Approvals, err = runApprovalScene(ctx, cfg, st, tag); err != nil {
		return nil, err
	}
	if cfg.TranscriptDir != "" {
		if err := writeTranscripts(filepath.Join(cfg.TranscriptDir, "oncekey"), results); err != nil {
			return nil, err
		}
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

func runPlain(ctx context.Context, cfg Config, tag string) (*ModeReport, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start := time.Now()
	run := "plain-" + tag
	st, err := startStack(cfg, true, run)
	if err != nil {
		return nil, err
	}
	defer st.close()
	taskQueue := "ticketdesk-plain-" + tag
	w := tworker.New(cfg.Client, taskQueue, tworker.Options{Interceptors: answerLosses()})
	st.register(w)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("desk: start plain worker: %w", err)
	}
	defer w.Stop()
	rep := &ModeReport{Mode: "plain retries", Requests: len(cfg.Requests)}
	results := playAll(ctx, cfg, taskQueue, "ticketdesk-"+tag+"-plain-", rep)
	st.tools.Kill.Release()
	if st.tools.Kill.Hit() {
		rep.WorkerKills++
	}
	tally(rep, results, st.services)
	if err := tallyCredits(ctx, rep, cfg.Pool, st.tools); err != nil {
		return nil, err
	}
	if cfg.TranscriptDir != "" {
		if err := writeTranscripts(filepath.Join(cfg.TranscriptDir, "plain"), results); err != nil {
			return nil, err
		}
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

func constTenant(t string) func(okworker.TenantInfo) string {
	return func(okworker.TenantInfo) string { return t }
}

// playAll starts one agent workflow per request and waits for all of them.
func playAll(ctx context.Context, cfg Config, taskQueue, idPrefix string, rep *ModeReport) []AgentResult {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		results []AgentResult
		done    int
	)
	for _, req := range cfg.Requests {
		in := AgentInput{Request: req, Tenant: cfg.Tenant, MaxTurns: cfg.MaxTurns, Plain: rep.Mode != "oncekey"}
		run, err := cfg.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                       idPrefix + req.ID,
			TaskQueue:                taskQueue,
			WorkflowExecutionTimeout: cfg.Timeout,
		}, AgentWorkflow, in)
		if err != nil {
			mu.Lock()
			rep.Failed++
			rep.WorkflowErrors = append(rep.WorkflowErrors, fmt.Sprintf("%s: start: %v", req.ID, err))
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res AgentResult
			err := run.Get(ctx, &res)
			mu.Lock()
			defer mu.Unlock()
			done++
			if err != nil {
				rep.Failed++
				rep.WorkflowErrors = append(rep.WorkflowErrors, fmt.Sprintf("%s: %v", req.ID, err))
			} else {
				rep.Completed++
				results = append(results, res)
			}
			cfg.Done(rep.Mode, done, len(cfg.Requests))
		}()
	}
	wg.Wait()
	sort.Strings(rep.WorkflowErrors)
	return results
}

// tally counts the agents' calls and the services' ledgers.
func tally(rep *ModeReport, results []AgentResult, services *downstream.Set) {
	rep.Labels = map[oncekey.Outcome]int{}
	for _, r := range results {
		rep.ToolCalls += len(r.Calls)
		rep.ModelCalls += r.Turns
		if r.OutOfTurns {
			rep.OutOfTurns++
		}
		for i, kind := range classify(r.Calls) {
			c := r.Calls[i]
			rep.Labels[c.Outcome.Status]++
			switch kind {
			case KindReproposal:
				rep.Reproposals++
				if c.Outcome.Status == oncekey.OutcomeReplayed {
					rep.ReproposalsReplayed++
				}
			case KindChanged:
				rep.ChangedArguments++
			}
		}
		switch refundStatus(r.Calls) {
		case "issued":
			rep.RefundsIssued++
		case "refused":
			rep.RefundsRefused++
		}
	}
	rep.PerService = map[string]downstream.Stats{}
	rep.Faults = map[downstream.Fault]int{}
	for _, s := range append(services.Effectful(), services.Directory) {
		st := s.Ledger.Stats()
		rep.PerService[s.Name] = st
		for f, n := range st.Faults {
			rep.Faults[f] += n
		}
		if s == services.Directory {
			continue
		}
		rep.Effects += st.Effects
		rep.DoubleEffects += st.DoubleEffects
		for _, id := range st.Doubled {
			rep.Doubled = append(rep.Doubled, s.Name+":"+id)
		}
	}
}

// refundStatus reads a request's refund from its last IssueRefund call: "none", "issued",
// "refused" (by the allow-list: the policy's Authorize hook, or inside the tool without oncekey)
// or "failed".
func refundStatus(calls []Call) string {
	st := "none"
	for _, c := range calls {
		if c.Tool != ToolIssueRefund {
			continue
		}
		switch {
		case c.Outcome.Status == oncekey.OutcomeApplied || c.Outcome.Status == oncekey.OutcomeReplayed:
			st = "issued"
		case c.Outcome.Status == "" && c.Outcome.Error == "":
			st = "issued" // plain Temporal: the tool returned a result
		case c.Outcome.ErrorType == ErrTypeRefundNotAllowed:
			st = "refused"
		case c.Outcome.Status == oncekey.OutcomeRejected || c.Outcome.ErrorType == ErrTypeRefundNotAllowed:
			st = "refused"
		default:
			st = "failed"
		}
	}
	return st
}

// countRecords counts the tenant's operation keys and how many were resolved by reconciliation.
func countRecords(ctx context.Context, store oncekeystore.Store, tenant string, rep *ModeReport) error {
	cursor := ""
	for {
		page, err := store.List(ctx, &oncekeystore.ListParams{Tenant: tenant, Cursor: cursor, Limit: 1000})
		if err != nil {
			return fmt.Errorf("desk: list records: %w", err)
		}
		for _, r := range page.Records {
			rep.Operations++
			if r.Tool == ToolGrantCredit {
				rep.CreditOperations++
			}
			if r.Status == oncekeystore.StatusUnknown {
				rep.Unsettled++
			}
			switch {
			case r.ResolvedBy == "":
			case strings.HasPrefix(r.ResolvedBy, "receipt:"):
				rep.Reconciled++
				rep.ReconciledByReceipt++
			default:
				rep.Reconciled++
				rep.ReconciledByOperator++
			}
		}
		if page.Next == "" {
			return nil
		}
		cursor = page.Next
	}
}

// relayOptions make the demo's relay quick: a short poll, and a failed delivery tried again
// after 200 ms.
var relayOptions = pgstore.RelayOptions{Poll: 100 * time.Millisecond, Backoff: func(int) time.Duration { return 200 * time.Millisecond }}

// drainOutbox waits until the relay has delivered every message in the outbox (within ctx).
func drainOutbox(ctx context.Context, store *pgstore.Store) error {
	for {
		st, err := store.OutboxStats(ctx)
		if err != nil {
			return fmt.Errorf("desk: outbox: %w", err)
		}
		if st.Pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("desk: %d outbox message(s) still pending: %w", st.Pending, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tallyCredits adds the credit ledger's rows of the run (tools.Run) to the effects, its faults
// to the faults, and counts the credits' confirmation e-mails the e-mail service landed.
func tallyCredits(ctx context.Context, rep *ModeReport, pool *pgxpool.Pool, tools *Tools) error {
	st, err := creditLedger(ctx, pool, tools.Run)
	if err != nil {
		return err
	}
	st.Faults = tools.credits.snapshot()
	rep.PerService[ServiceLedger] = st
	rep.Effects += st.Effects
	rep.DoubleEffects += st.DoubleEffects
	for _, id := range st.Doubled {
		rep.Doubled = append(rep.Doubled, ServiceLedger+":"+id)
	}
	for f, n := range st.Faults {
		rep.Faults[f] += n
	}
	for _, e := range tools.Services.Email.Ledger.Effects() {
		if strings.HasSuffix(e.Identity, "/"+TemplateCreditGranted) {
			rep.CreditMails++
		}
	}
	return nil
}

// answerLosses is the worker's own interceptors: answerLoss, first (outermost).
func answerLosses() []tinterceptor.WorkerInterceptor {
	return []tinterceptor.WorkerInterceptor{&answerLoss{}}
}
