// Command agentloop is the agent shape of Temporal's AI cookbook for Go (recipe
// agentic_loop_tool_call_openai_golang), written for this repository, under oncekey by
// registration alone. A workflow asks a model through the OpenAI Responses API (openai-go, against
// a scripted model on loopback), runs every tool call through one generic activity,
// ToolExecutor(ctx, ToolExecutorInput{tool_name, arguments}), and hands the results back until
// the model answers with text. The workflow, the activities and the tools know nothing of oncekey;
// registration.go adds a Route for ToolExecutor, a policy per tool and the plugin.
//
// Two conversations run, with faults: the weather service is unavailable once, the ticket
// system loses the answer to the first ticket after opening it, the model proposes the same
// ticket again in a later turn, the worker dies while the second conversation's ticket call
// waits for its answer (another takes over), and the second conversation asks to refund the order the first one
// refunded. They run once with oncekey and once on plain Temporal; the services count the
// tickets and refunds themselves.
//
// It starts a Temporal dev server (the CLI `make temporal` installs) unless TEMPORAL_ADDRESS is
// set, and uses Postgres from DATABASE_URL or the libpq variables in a schema of its own, dropped
// at exit. Run it from its module: go -C examples/agentloop run .
//
// The last line is, exactly:
//
//	agentloop: oncekey: tickets=N refunds=N | plain retries: tickets=N refunds=N
//
// It exits 1 when oncekey's run opened more tickets than the model meant (two) or made more than
// one refund, 2 when the environment is not usable.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey/examples/internal/exampleenv"
	"github.com/oncekey/oncekey/pgstore"
)

// The two conversations: their user messages, and what the scripted model does in each.
const (
	FirstConversation  = "My order A-1001 arrived broken. Is it raining in Berlin, where the courier is? Please open a ticket and refund the order."
	SecondConversation = "I asked about order A-1001 earlier today: please refund it, it arrived broken. And the courier was rude."
)

// CourierTicket is the subject of the second conversation's ticket, whose call is in flight when
// the worker restarts.
const CourierTicket = "Courier complaint, order A-1001"

// Scripts are the scripted model's conversations. In the first it proposes the ticket a second
// time in a later turn, with the same arguments, as models do when a result looks lost.
func Scripts() map[string]Script {
	ticket := map[string]any{"subject": "Order A-1001 arrived broken", "body": "The customer received order A-1001 broken and asks for a refund."}
	return map[string]Script{
		FirstConversation: {Calls: []ScriptedCall{
			{Tool: ToolWeather, Args: map[string]any{"city": "Berlin"}},
			{Tool: ToolTicket, Args: ticket},
			{Tool: ToolTicket, Args: ticket},
			{Tool: ToolRefund, Args: map[string]any{"order_id": "A-1001", "amount_cents": 4200, "reason": "arrived broken"}},
		}, Final: "I opened a ticket and refunded order A-1001."},
		SecondConversation: {Calls: []ScriptedCall{
			{Tool: ToolTicket, Args: map[string]any{"subject": CourierTicket, "body": "The customer says the courier was rude."}},
			{Tool: ToolRefund, Args: map[string]any{"order_id": "A-1001", "amount_cents": 4200, "reason": "customer reports the order arrived broken"}},
		}, Final: "I opened a ticket about the courier; order A-1001 is refunded."},
	}
}

// RunFaults are the services' faults in both runs. The courier ticket's call is in flight, the
// ticket opened, when its worker dies; another worker takes over.
var RunFaults = Faults{WeatherUnavailable: 1, LoseTicketAnswers: 1, HoldTicket: CourierTicket}

// Config is what Run needs.
type Config struct {
	Client client.Client
	// HostPort and Namespace are Client's frontend address and namespace: the worker that dies
	// mid-call dials a connection of its own there, which is closed to cut it off.
	HostPort, Namespace string
	Pool                *pgxpool.Pool
}

// Report is what both runs did.
type Report struct {
	Oncekey, Plain ModeReport
}

// ModeReport is one run: the services' ledger, the model's last answers and the tool outputs it
// read, by conversation, and how many times the worker restarted.
type ModeReport struct {
	Mode     string
	Ledger   Ledger
	Answers  map[string]string
	Read     map[string][]string
	Restarts int
	// WorkflowIDs are the conversations' workflow IDs, in order.
	WorkflowIDs []string
}

// Run plays both conversations with oncekey, then on plain Temporal.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := pgstore.Migrate(ctx, cfg.Pool); err != nil {
		return nil, fmt.Errorf("agentloop: migrate: %w", err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	once, err := runMode(ctx, cfg, "oncekey", tag)
	if err != nil {
		return nil, err
	}
	plain, err := runMode(ctx, cfg, "plain", tag)
	if err != nil {
		return nil, err
	}
	return &Report{Oncekey: *once, Plain: *plain}, nil
}

// runMode plays the conversations on a worker of their own, with the oncekey plugin when mode is
// "oncekey", against fresh services and a fresh model.
func runMode(ctx context.Context, cfg Config, mode, tag string) (*ModeReport, error) {
	svc, err := StartServices(RunFaults)
	if err != nil {
		return nil, err
	}
	defer svc.Close()
	model, err := StartModel(Scripts())
	if err != nil {
		return nil, err
	}
	defer model.Close()

	// The tools' HTTP client sends a claimed call's operation key (none on plain Temporal),
	// which the receipt lookups find the effect by.
	hc := NewHTTPClient()
	acts := &Activities{ModelBaseURL: model.BaseURL, APIKey: "scripted", Tools: NewTools(svc.URL, hc)}
	taskQueue := "agentloop-" + mode + "-" + tag
	var opts worker.Options
	if mode == "oncekey" {
		reg, err := NewRegistry(svc.URL, hc)
		if err != nil {
			return nil, fmt.Errorf("agentloop: registry: %w", err)
		}
		plugin, err := NewPlugin(pgstore.New(cfg.Pool, nil), reg)
		if err != nil {
			return nil, fmt.Errorf("agentloop: plugin: %w", err)
		}
		opts.Plugins = append(opts.Plugins, plugin)
	}
	start := func(c client.Client) (worker.Worker, error) {
		w := worker.New(c, taskQueue, opts)
		w.RegisterWorkflow(AgentWorkflow)
		w.RegisterActivity(acts)
		if err := w.Start(); err != nil {
			return nil, fmt.Errorf("agentloop: start worker: %w", err)
		}
		return w, nil
	}
	// The first worker has a connection of its own, so that it can die: once that connection is
	// closed, nothing it does reaches Temporal, as after a crash.
	doomed, err := client.Dial(client.Options{HostPort: cfg.HostPort, Namespace: cfg.Namespace, Logger: exampleenv.Quiet{}})
	if err != nil {
		return nil, fmt.Errorf("agentloop: dial %s: %w", cfg.HostPort, err)
	}
	defer doomed.Close()
	w, err := start(doomed)
	if err != nil {
		return nil, err
	}
	defer func() { w.Stop() }()

	rep := &ModeReport{Mode: mode, Answers: map[string]string{}, Read: map[string][]string{}}
	for i, user := range []string{FirstConversation, SecondConversation} {
		id := fmt.Sprintf("agentloop-%s-%s-%d", tag, mode, i+1)
		rep.WorkflowIDs = append(rep.WorkflowIDs, id)
		run, err := cfg.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, AgentWorkflow, user)
		if err != nil {
			return nil, fmt.Errorf("agentloop: start %s: %w", id, err)
		}
		if user == SecondConversation && RunFaults.HoldTicket != "" {
			// The worker dies while the courier ticket's call waits for its answer: the ticket is
			// open, no result reaches Temporal, the attempt times out (the loop's 30 s
			// start-to-close timeout) and a new worker takes the task queue.
			select {
			case <-svc.Held():
			case <-ctx.Done():
				return nil, fmt.Errorf("agentloop: %s: the held ticket call never came: %w", id, ctx.Err())
			}
			doomed.Close()
			w.Stop()
			if w, err = start(cfg.Client); err != nil {
				return nil, err
			}
			rep.Restarts++
		}
		var answer string
		if err := run.Get(ctx, &answer); err != nil {
			return nil, fmt.Errorf("agentloop: %s: %w", id, err)
		}
		rep.Answers[user], rep.Read[user] = answer, model.Read(user)
	}
	rep.Ledger = svc.Ledger()
	return rep, nil
}

// Summary is the report's last line.
func (r *Report) Summary() string {
	return fmt.Sprintf("agentloop: oncekey: tickets=%d refunds=%d | plain retries: tickets=%d refunds=%d",
		len(r.Oncekey.Ledger.Tickets), len(r.Oncekey.Ledger.Refunds), len(r.Plain.Ledger.Tickets), len(r.Plain.Ledger.Refunds))
}

// print writes what each run's model read and the summary.
func (r *Report) print(out io.Writer) {
	for _, m := range []ModeReport{r.Oncekey, r.Plain} {
		fmt.Fprintf(out, "%s:\n", m.Mode)
		for i, user := range []string{FirstConversation, SecondConversation} {
			fmt.Fprintf(out, "  conversation %d, the tool outputs the model read:\n", i+1)
			for _, s := range m.Read[user] {
				fmt.Fprintf(out, "    %s\n", s)
			}
		}
	}
	fmt.Fprintln(out, r.Summary())
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err := exampleenv.Open(ctx, "agentloop", exampleenv.Options{}, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	rep, err := Run(ctx, Config{Client: env.Temporal.Client, HostPort: env.Temporal.HostPort, Namespace: env.Temporal.Namespace, Pool: env.PG.Pool})
	env.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rep.print(os.Stdout)
	if len(rep.Oncekey.Ledger.Tickets) != 2 || len(rep.Oncekey.Ledger.Refunds) != 1 {
		os.Exit(1)
	}
}
