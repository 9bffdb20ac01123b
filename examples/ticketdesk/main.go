// Command ticketdesk is oncekey's main demo: a model-driven support agent, one workflow per
// request from testdata/requests.jsonl. The workflow asks a model (through the official OpenAI
// client, Chat Completions with tools) what to do, runs the tool calls it returns (look up the
// customer over MCP, open a ticket, e-mail the customer, issue a refund, grant a gold customer a
// goodwill credit), hands the results back and asks again until the model answers without tool
// calls. The tools call fake downstream
// services that lose responses, fail and stall on a seeded schedule. Every request is played once
// with oncekey and once with plain Temporal retries; effects are counted by the downstream
// services themselves, and the credits by the rows of the credit ledger, a table in the demo's
// schema that the Transactional tool GrantCredit writes with its confirmation e-mail in the outbox.
//
// The model is a scripted one on loopback (an OpenAI-compatible server, deterministic per -seed)
// unless OPENAI_API_KEY is set: then it is that API's model (-model, OPENAI_BASE_URL).
//
// It starts a Temporal dev server (the CLI installed by `make temporal`) unless TEMPORAL_ADDRESS
// is set, and uses Postgres from DATABASE_URL or the libpq variables (PGHOST, PGUSER, …) in a
// schema of its own that it drops at exit. It writes one JSONL transcript per request and run
// under -out (default demo-out).
//
// The last line of its output is, exactly:
//
//	oncekey: operations=N effects=N double_effects=N replays=N reconciled=N reproposals=N read_unknown=N read_in_flight=N tx_operations=N tx_effects=N tx_unknown=N outbox_deliveries=N | plain retries: double_effects=N
//
// Exit codes: 0 success; 1 an operation landed twice with oncekey, or a workflow failed; 2 the
// environment is not usable (Postgres or Temporal unreachable, bad flags or data).
package main

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oncekey/oncekey/examples/internal/exampleenv"
	"github.com/oncekey/oncekey/examples/ticketdesk/internal/desk"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
)

//go:embed testdata/requests.jsonl testdata/customers.json
var data embed.FS

const (
	exitOK    = 0
	exitFault = 1
	exitEnv   = 2
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// defaultRealModel is the model asked when OPENAI_API_KEY is set and -model is not.
const defaultRealModel = "gpt-4o-mini"

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ticketdesk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Int64("seed", 1, "seed of the fault schedule and of the scripted model's choices")
	requestsPath := fs.String("requests", "", "JSONL file of support requests (default: the shipped testdata/requests.jsonl)")
	repeat := fs.Int("repeat", 25, "scripted model: chance in percent that it proposes an applied effectful call again")
	change := fs.Int("change", 40, "scripted model: chance in percent that it also e-mails about an issued refund (same tool, other arguments)")
	model := fs.String("model", "", "model to ask when OPENAI_API_KEY is set (default "+defaultRealModel+"); \"scripted\" uses the scripted model even then")
	turns := fs.Int("turns", desk.DefaultMaxTurns, "most model calls per request")
	out := fs.String("out", "demo-out", "directory for the JSONL transcripts (oncekey/ and plain/, one file per request)")
	verbose := fs.Bool("v", false, "show Temporal SDK and dev server logs")
	manual := fs.Bool("manual", false, "leave one unknown operation for you to resolve with the oncekey CLI; the demo waits for it")
	if err := fs.Parse(args); err != nil {
		return exitEnv
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	requests, customers, err := load(*requestsPath)
	if err != nil {
		fmt.Fprintf(stderr, "ticketdesk: %v\n", err)
		return exitEnv
	}
	mc := modelConfig(*model, os.Getenv)
	pr := newProgress(stdout, stderr)
	env, err := exampleenv.Open(ctx, "ticketdesk", exampleenv.Options{MaxConns: 16, Verbose: *verbose}, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitEnv
	}
	defer env.Close()
	pg, tc := env.PG, env.Temporal

	percent := func(p int) int {
		if p == 0 {
			return -1 // desk.Config: 0 means the default, negative means never
		}
		return p
	}
	who := "the scripted model on loopback (seed " + strconv.FormatInt(*seed, 10) + ")"
	if !mc.Scripted() {
		who = "model " + mc.Name + " at " + orDefault(mc.BaseURL, "OpenAI")
	}
	pr.line(fmt.Sprintf("playing %d support requests with %s, first with oncekey, then with plain Temporal retries", len(requests), who))
	start := time.Now()
	cfg := desk.Config{
		Client:        tc.Client,
		Pool:          pg.Pool,
		Requests:      requests,
		Customers:     customers,
		Seed:          *seed,
		Model:         mc,
		RepeatPercent: percent(*repeat),
		ChangePercent: percent(*change),
		MaxTurns:      *turns,
		TranscriptDir: *out,
		Progress:      pr.line,
		Done:          pr.done,
	}
	if *manual {
		cfg.Timeout = 30 * time.Minute
		cfg.LeaveOne = func(rec *oncekeystore.Record, lookupURL string) {
			pr.line(manualInstructions(rec, lookupURL, pg.Schema, tc))
		}
	}
	report, err := desk.Run(ctx, cfg)
	pr.finish()
	if err != nil {
		fmt.Fprintf(stderr, "ticketdesk: %v\n", err)
		return exitEnv
	}
	printReport(stdout, report)
	fmt.Fprintf(stdout, "transcripts: %s (one JSONL file per request: what the model saw)\n",
		strings.Join([]string{filepath.Join(*out, "oncekey", "*.jsonl"), filepath.Join(*out, "approvals", "*.jsonl"), filepath.Join(*out, "plain", "*.jsonl")}, ", "))
	fmt.Fprintf(stdout, "total time %s\n", time.Since(start).Round(100*time.Millisecond))
	fmt.Fprintln(stdout, summaryLine(report))
	switch {
	case report.Oncekey.DoubleEffects != 0:
		fmt.Fprintf(stderr, "ticketdesk: %d operation(s) landed twice with oncekey\n", report.Oncekey.DoubleEffects)
		return exitFault
	case report.Oncekey.Failed != 0 || report.Plain.Failed != 0:
		fmt.Fprintf(stderr, "ticketdesk: %d workflow(s) failed\n", report.Oncekey.Failed+report.Plain.Failed)
		return exitFault
	}
	return exitOK
}

// modelConfig picks the model: the scripted one unless OPENAI_API_KEY is set (and -model is not
// "scripted"); then the API at OPENAI_BASE_URL (openai-go's default when unset) and model name,
// else defaultRealModel.
func modelConfig(name string, getenv func(string) string) desk.ModelConfig {
	key := getenv("OPENAI_API_KEY")
	if key == "" || name == "scripted" {
		return desk.ModelConfig{}
	}
	if name == "" {
		name = defaultRealModel
	}
	return desk.ModelConfig{APIKey: key, BaseURL: getenv("OPENAI_BASE_URL"), Name: name}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// manualInstructions tells the person at the terminal how to settle the operation left to them.
func manualInstructions(rec *oncekeystore.Record, lookupURL, schema string, tc *exampleenv.Temporal) string {
	flags := fmt.Sprintf("--schema %s --tenant %s", shell.Word(schema), shell.Word(rec.Tenant))
	temporal := fmt.Sprintf("--address %s", shell.Word(tc.HostPort))
	if tc.Namespace != "default" {
		temporal += " --namespace " + shell.Word(tc.Namespace)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n*** -manual: one operation is left for you. Its outcome is unknown: %s for %s (key %s).\n", rec.Tool, rec.WorkflowID, rec.OperationKey)
	fmt.Fprintf(&b, "*** In another terminal, in this repository, with the same DATABASE_URL / PG variables as the demo:\n")
	fmt.Fprintf(&b, "***   go install -C cmd/oncekey .    # the CLI, once (into $(go env GOPATH)/bin; it is a module of its own)\n")
	fmt.Fprintf(&b, "***   oncekey list --status unknown %s\n", flags)
	fmt.Fprintf(&b, "***   curl -s '%s'    # what the downstream landed for this key (404: nothing)\n", lookupURL)
	fmt.Fprintf(&b, "***   oncekey resolve %s %s %s --epoch %d --applied --ref <id> --result '<the JSON curl printed>'\n", rec.OperationKey, flags, temporal, rec.Epoch)
	fmt.Fprintf(&b, "***   (or --not-applied if curl found nothing)\n")
	fmt.Fprintf(&b, "*** The demo goes on once it is resolved.\n\n")
	return b.String()
}

// load reads the requests (from path, or the shipped file when path is "") and the customers.
func load(path string) ([]desk.Request, []desk.Customer, error) {
	var raw []byte
	var err error
	if path == "" {
		raw, err = data.ReadFile("testdata/requests.jsonl")
	} else {
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read requests: %w", err)
	}
	requests, err := parseRequests(raw)
	if err != nil {
		return nil, nil, err
	}
	cb, err := data.ReadFile("testdata/customers.json")
	if err != nil {
		return nil, nil, err
	}
	var customers []desk.Customer
	if err := json.Unmarshal(cb, &customers); err != nil {
		return nil, nil, fmt.Errorf("customers.json: %w", err)
	}
	known := map[string]bool{}
	for _, c := range customers {
		known[c.ID] = true
	}
	for _, r := range requests {
		if !known[r.CustomerID] {
			return nil, nil, fmt.Errorf("request %s: unknown customer %s", r.ID, r.CustomerID)
		}
	}
	return requests, customers, nil
}

// parseRequests decodes JSONL: one request per non-empty line, IDs unique.
func parseRequests(raw []byte) ([]desk.Request, error) {
	var out []desk.Request
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var r desk.Request
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("requests line %d: %w", n, err)
		}
		if r.ID == "" || r.CustomerID == "" || r.Subject == "" {
			return nil, fmt.Errorf("requests line %d: id, customer_id and subject are required", n)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("requests line %d: duplicate id %s", n, r.ID)
		}
		seen[r.ID] = true
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no requests")
	}
	return out, nil
}
