package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/examples/ticketdesk/internal/desk"
	"github.com/oncekey/oncekey/examples/ticketdesk/internal/downstream"
	"github.com/oncekey/oncekey/examples/ticketdesk/internal/scripted"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var summaryRE = regexp.MustCompile(`^oncekey: operations=(\d+) effects=(\d+) double_effects=(\d+) replays=(\d+) reconciled=(\d+) reproposals=(\d+) read_unknown=(\d+) read_in_flight=(\d+) tx_operations=(\d+) tx_effects=(\d+) tx_unknown=(\d+) outbox_deliveries=(\d+) \| plain retries: double_effects=(\d+)$`)

// TestDemo plays the shipped requests on the test dev server and Postgres, with oncekey and with
// plain retries, and checks the outcome against what the data says should land — counted by the
// fake services' own ledgers.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("plays 44 requests twice on a dev server")
	}
	pool := testenv.Postgres(t)
	c := testenv.Temporal(t)
	requests, customers, err := load("")
	require.NoError(t, err)

	// What must land exactly once: a ticket and a confirmation per request, a refund per
	// request whose refund the allow-list and the limit permit.
	allowed := map[string]bool{}
	for _, cu := range customers {
		allowed[cu.ID] = cu.RefundsAllowed
	}
	wantRefunds, wantRefused := 0, 0
	for _, r := range requests {
		if r.Refund == nil {
			continue
		}
		if allowed[r.CustomerID] && r.Refund.AmountCents <= desk.RefundLimitCents {
			wantRefunds++
		} else {
			wantRefused++
		}
	}
	require.Positive(t, wantRefused, "the data must exercise the Authorize hook")

	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	rep, err := desk.Run(ctx, desk.Config{
		Client: c, Pool: pool, Requests: requests, Customers: customers, Seed: 1, TranscriptDir: dir,
		Progress: func(s string) { progress.WriteString(s + "\n") },
	})
	require.NoError(t, err)
	o, p := rep.Oncekey, rep.Plain
	t.Logf("progress:\n%s", progress.String())

	require.Empty(t, o.WorkflowErrors)
	require.Equal(t, len(requests), o.Completed)
	require.Equal(t, len(requests), p.Completed)

	// With oncekey: every intended effect landed exactly once, per the services' ledgers. The
	// model's e-mails about issued refunds (the e-mail tool with other arguments) are operations
	// of their own.
	require.Equal(t, 0, o.DoubleEffects, "landed twice: %v", o.Doubled)
	require.Positive(t, o.ChangedArguments, "the model asked for the same tool with other arguments")
	require.Equal(t, len(requests), o.PerService[downstream.ServiceTickets].Effects)
	// The model reads unknown for the ticket of the request the operator is away for (its
	// reconciliation gives up first), tells the customer, and sends no confirmation for it. On a
	// machine loaded enough that the operator takes longer than EscalationTimeout over another
	// reconciliation, that ticket's model reads unknown too and does the same: the counts below
	// follow the number of unknowns read, never fewer than the one the operator was away for.
	unknowns := o.Labels[oncekey.OutcomeUnknown]
	require.GreaterOrEqual(t, unknowns, 1, "the operation the operator was away for reaches its model unknown")
	require.Positive(t, o.Labels[oncekey.OutcomeInFlight], "the model proposed the same ticket twice in one message")
	// The Transactional tool: one row in the credit ledger per operation (counted in the table),
	// never unknown, under the same fault schedule (failures before the commit, answers lost
	// after it); and one confirmation e-mail per credit, delivered by the outbox relay with the
	// message's Idempotency-Key, however often the relay delivered it.
	credits := o.CreditOperations
	require.Positive(t, credits, "gold customers are granted a goodwill credit")
	ledger := o.PerService[desk.ServiceLedger]
	require.Equal(t, credits, ledger.Effects, "effects = operations, in the credit ledger")
	require.Zero(t, ledger.DoubleEffects)
	require.Zero(t, o.CreditUnknown, "a Transactional tool is never unknown")
	require.Positive(t, ledger.Faults[downstream.FaultErrorBeforeCommit]+ledger.Faults[downstream.FaultLostAfterCommit],
		"the credit ledger met the fault schedule")
	require.Equal(t, credits, o.CreditMails, "one confirmation e-mail per credit, at the e-mail service")
	require.GreaterOrEqual(t, o.OutboxDeliveries, credits)
	require.Equal(t, len(requests)-unknowns+o.ChangedArguments+credits, o.PerService[downstream.ServiceEmail].Effects,
		"a confirmation for every ticket but those whose model read unknown, and one per credit")
	require.Equal(t, wantRefunds, o.PerService[downstream.ServicePayments].Effects)
	require.Equal(t, 2*len(requests)-unknowns+wantRefunds+o.ChangedArguments+2*credits, o.Effects)
	require.Equal(t, wantRefunds, o.RefundsIssued)
	require.Equal(t, wantRefused, o.RefundsRefused)
	require.Equal(t, o.Effects, o.Operations+o.CreditMails, "one operation key per effect, the credit's e-mail going with its row")
	require.Equal(t, wantRefused, o.Outcomes[oncekey.OutcomeRejected], "Authorize refused each over-limit or not-allowed refund")

	// The faults really happened, and oncekey handled them: repeats were replayed, lost
	// responses were reconciled.
	require.Positive(t, o.Faults[downstream.FaultLostAfterCommit])
	require.Positive(t, o.Faults[downstream.FaultErrorBeforeCommit])
	require.Equal(t, 1, o.WorkerKills, "a worker died in the middle of one ticket call")
	require.Equal(t, 1, p.WorkerKills)
	require.Positive(t, o.Reproposals)
	require.Equal(t, o.Reproposals-o.Labels[oncekey.OutcomeInFlight], o.ReproposalsReplayed,
		"every call the model proposed again was answered as a replay, but the one made beside the first, in flight")
	require.Zero(t, o.OutOfTurns)
	require.Positive(t, o.Reconciled)
	// Every unknown outcome was reconciled: those the tools reported (OnEvent), and those whose
	// attempt timed out without a word, the killed worker's call among them (more on a machine
	// slow enough for a call to outlast its 8 s timeout).
	require.Zero(t, o.Unsettled, "no record is left unknown")
	// An operation can be reported unknown more than once (settled as not applied, run again
	// and lost again), so the reports are counted per operation; the killed worker's call is
	// reported by no event, its attempt having timed out.
	require.Positive(t, o.UnknownOperations)
	require.GreaterOrEqual(t, o.Reconciled, o.UnknownOperations, "every operation reported unknown was reconciled")
	require.GreaterOrEqual(t, o.Reconciled, o.WorkerKills, "the killed worker's call was reconciled")
	require.Positive(t, o.ReconciledByOperator)
	require.Positive(t, o.ReconciledByReceipt, "the e-mail receipt lookup settled lost confirmations")
	require.Contains(t, progress.String(), "[operator] ")

	// Plain retries: the same faults and the same repeats land operations twice.
	require.GreaterOrEqual(t, p.DoubleEffects, 1)
	require.Greater(t, p.Effects, o.Effects)
	require.Equal(t, wantRefunds, p.RefundsIssued, "plain tools enforce the allow-list inside the body")

	line := summaryLine(rep)
	m := summaryRE.FindStringSubmatch(line)
	require.NotNil(t, m, line)
	require.Equal(t, strconv.Itoa(o.Operations), m[1])
	require.Equal(t, strconv.Itoa(o.Effects), m[2])
	require.Equal(t, "0", m[3])
	require.Equal(t, strconv.Itoa(o.Reproposals), m[6])
	require.Equal(t, strconv.Itoa(o.Labels[oncekey.OutcomeUnknown]), m[7])
	require.Equal(t, strconv.Itoa(o.Labels[oncekey.OutcomeInFlight]), m[8])
	require.Equal(t, strconv.Itoa(credits), m[9])
	require.Equal(t, strconv.Itoa(ledger.Effects), m[10])
	require.Equal(t, "0", m[11])
	require.Equal(t, strconv.Itoa(o.OutboxDeliveries), m[12])
	require.Equal(t, strconv.Itoa(p.DoubleEffects), m[13])

	// One transcript per request and run.
	for _, mode := range []string{"oncekey", "plain"} {
		files, err := filepath.Glob(filepath.Join(dir, mode, "*.jsonl"))
		require.NoError(t, err)
		require.Len(t, files, len(requests), mode)
	}
	checkGoldenTranscripts(t, dir)

	// The approval scene: the large refund ran once, with the amount the operator edited it down
	// to, and the model read which argument changed; the other refund was denied, nothing ran, and
	// the model read the operator's message, never the reason.
	a := o.Approvals
	require.NotNil(t, a)
	require.Empty(t, a.Errors)
	require.Equal(t, 1, a.Edited)
	require.Equal(t, 1, a.Denied)
	require.Equal(t, 1, a.RefundEffects, "one refund landed in the scene")
	require.Equal(t, []int64{desk.SceneEditedCents}, a.Refunded)
	var read []string
	for _, r := range a.Read {
		read = append(read, r.RequestID+" "+r.ForModel)
	}
	joined := strings.Join(read, "\n")
	require.Contains(t, joined, desk.SceneEditRequest+` {"status":"applied"`)
	require.Contains(t, joined, `"reason":"edited"`)
	require.Contains(t, joined, `"changed":["amount_cents"]`)
	require.Contains(t, joined, desk.SceneDenyRequest+` {"status":"rejected"`)
	require.Contains(t, joined, desk.SceneDenyMessage)
	require.NotContains(t, joined, desk.SceneDenyReason)
	files, err := filepath.Glob(filepath.Join(dir, "approvals", "*.jsonl"))
	require.NoError(t, err)
	require.Len(t, files, 2)

	var out bytes.Buffer
	printReport(&out, rep)
	require.Contains(t, out.String(), "DOUBLE EFFECTS")
	t.Logf("report:\n%s%s", out.String(), line)
}

func TestUnreachablePostgresSaysWhatToSet(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/nowhere?connect_timeout=2")
	var stdout, stderr bytes.Buffer
	code := run(nil, &stdout, &stderr)
	require.Equal(t, exitEnv, code)
	msg := stderr.String()
	require.Contains(t, msg, "cannot reach Postgres")
	require.Contains(t, msg, "DATABASE_URL=postgres://user@host:5432/db")
	require.Contains(t, msg, "PGHOST")
}

func TestShippedRequests(t *testing.T) {
	requests, customers, err := load("")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(requests), 40)
	require.NotEmpty(t, customers)
	refunds := 0
	for _, r := range requests {
		if r.Refund != nil {
			refunds++
			require.Positive(t, r.Refund.AmountCents, r.ID)
		}
	}
	require.Positive(t, refunds)
	require.Less(t, refunds, len(requests))
}

func TestParseRequestsRejectsBadInput(t *testing.T) {
	for name, in := range map[string]string{
		"duplicate id":  `{"id":"A","customer_id":"C","subject":"s"}` + "\n" + `{"id":"A","customer_id":"C","subject":"t"}`,
		"unknown field": `{"id":"A","customer_id":"C","subject":"s","amount":3}`,
		"missing id":    `{"customer_id":"C","subject":"s"}`,
		"not JSON":      `id=A`,
		"empty":         "\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseRequests([]byte(in))
			require.Error(t, err)
		})
	}
	got, err := parseRequests([]byte(strings.Join([]string{
		`{"id":"A","customer_id":"C","subject":"s"}`, "", `{"id":"B","customer_id":"C","subject":"t","refund":{"order_id":"O","amount_cents":5,"currency":"EUR","reason":"r"}}`,
	}, "\n")))
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, int64(5), got[1].Refund.AmountCents)
}

// TestDemoLeavesOneForAPerson plays a few requests with -manual's hook: the operator leaves the
// first unknown operation alone, and the test acts as the person: it looks the key up in the
// downstream and resolves it with reconcile.Resolve, as `oncekey resolve` does.
func TestDemoLeavesOneForAPerson(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a dev server")
	}
	pool := testenv.Postgres(t)
	c := testenv.Temporal(t)
	requests, customers, err := load("")
	require.NoError(t, err)
	requests = requests[:12]

	left := make(chan string, 1)
	errs := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := desk.Run(ctx, desk.Config{
		Client: c, Pool: pool, Requests: requests, Customers: customers, Seed: 1,
		LeaveOne: func(rec *oncekeystore.Record, lookupURL string) {
			left <- rec.OperationKey
			go func() {
				body, lerr := fetch(ctx, lookupURL)
				if lerr != nil {
					errs <- lerr
					return
				}
				errs <- reconcile.Resolve(ctx, c, rec.Tenant, rec.OperationKey, reconcile.Resolution{
					Epoch: rec.Epoch, Outcome: reconcile.Applied, Result: body, ResolvedBy: "person", Note: "checked by hand",
				})
			}()
		},
	})
	require.NoError(t, err)
	var key string
	select {
	case key = <-left:
	default:
		t.Fatal("the operator left nothing for a person: seed 1 must lose a response in the first 12 requests")
	}
	require.NoError(t, <-errs)
	require.Equal(t, 0, rep.Oncekey.DoubleEffects)
	require.Equal(t, len(requests), rep.Oncekey.Completed)
	require.Positive(t, rep.Plain.DoubleEffects)

	rec, err := pgstore.New(pool, nil).Get(ctx, &oncekeystore.GetParams{Tenant: "ticketdesk", OperationKey: key})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, "person", rec.ResolvedBy)
}

func fetch(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// TestRealModelWiring runs the program as a user with a real model would: OPENAI_API_KEY,
// OPENAI_BASE_URL and -model set. CI cannot reach a model, so the base URL is a scripted model
// server this test starts; the program must then talk to it (and start none of its own), with
// the model name given, and end with the summary line.
func TestRealModelWiring(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a dev server")
	}
	srv, err := scripted.Start(scripted.Options{Seed: 2})
	require.NoError(t, err)
	defer srv.Close()
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("OPENAI_BASE_URL", srv.BaseURL)
	t.Setenv("TEMPORAL_ADDRESS", testenv.TemporalHostPort(t))
	pgURL, _ := testenv.PostgresURL(t)
	t.Setenv("DATABASE_URL", pgURL)

	requests, _, err := load("")
	require.NoError(t, err)
	var lines []string
	for _, r := range requests[:6] {
		b, err := json.Marshal(r)
		require.NoError(t, err)
		lines = append(lines, string(b))
	}
	dir := t.TempDir()
	reqFile := filepath.Join(dir, "requests.jsonl")
	require.NoError(t, os.WriteFile(reqFile, []byte(strings.Join(lines, "\n")), 0o644))

	var stdout, stderr bytes.Buffer
	code := run([]string{"-requests", reqFile, "-model", "my-model", "-out", filepath.Join(dir, "out")}, &stdout, &stderr)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	out := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Contains(t, stdout.String(), "with model my-model at "+srv.BaseURL)
	require.Regexp(t, summaryRE, out[len(out)-1], "the summary is the last line")
	require.Positive(t, srv.Requests(), "the program asked the model at OPENAI_BASE_URL")
	require.Contains(t, stderr.String(), "[oncekey] 6/6 requests done", "progress on stderr")
	require.Contains(t, stderr.String(), "[plain retries] 6/6 requests done")

	files, err := filepath.Glob(filepath.Join(dir, "out", "oncekey", "*.jsonl"))
	require.NoError(t, err)
	require.Len(t, files, 6)
}

func TestModelConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	require.True(t, modelConfig("", env(nil)).Scripted(), "no key: the scripted model")
	require.True(t, modelConfig("gpt-x", env(nil)).Scripted(), "-model alone does not leave the scripted model without a key")
	c := modelConfig("", env(map[string]string{"OPENAI_API_KEY": "k"}))
	require.Equal(t, defaultRealModel, c.Name)
	require.False(t, c.Scripted())
	c = modelConfig("m", env(map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}))
	require.Equal(t, "m", c.Name)
	require.Equal(t, "http://127.0.0.1:1/v1", c.BaseURL)
	require.True(t, modelConfig("scripted", env(map[string]string{"OPENAI_API_KEY": "k"})).Scripted())
}

func TestProgressWithoutTerminal(t *testing.T) {
	var out, errw bytes.Buffer
	p := newProgress(&out, &errw)
	for i := 1; i <= 8; i++ {
		p.done("oncekey", i, 8)
	}
	p.line("hello")
	p.finish()
	require.Equal(t, "[oncekey] 2/8 requests done\n[oncekey] 4/8 requests done\n[oncekey] 6/8 requests done\n[oncekey] 8/8 requests done\n", errw.String(),
		"not a terminal: a line at each quarter, nothing rewritten in place")
	require.Equal(t, "hello\n", out.String())
}

var update = flag.Bool("update", false, "rewrite testdata/golden-transcripts.txt from this run's transcripts")

const goldenPath = "testdata/golden-transcripts.txt"

// checkGoldenTranscripts compares what the model read in the run's transcripts (under dir) with
// testdata/golden-transcripts.txt: with oncekey, each status, next action and reason with its
// text; with plain retries, the shapes of the tool messages (a result, an error), none of which
// may carry oncekey's texts. Any change to what a model reads shows as a diff of that file; go
// test -run '^TestDemo$' -update rewrites it.
func checkGoldenTranscripts(t *testing.T, dir string) {
	t.Helper()
	texts := map[string]bool{}
	for _, e := range oncekey.ModelTexts() {
		texts[e.Text] = true
	}
	read := func(mode string, each func(content string)) {
		files, err := filepath.Glob(filepath.Join(dir, mode, "*.jsonl"))
		require.NoError(t, err)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var l struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				}
				require.NoError(t, json.Unmarshal([]byte(line), &l), f)
				if l.Role == "tool" {
					each(l.Content)
				}
			}
		}
	}
	seen := map[string]bool{}
	read("oncekey", func(content string) {
		var m struct {
			Status     string `json:"status"`
			NextAction string `json:"next_action"`
			Reason     string `json:"reason"`
			Text       string `json:"text"`
		}
		require.NoError(t, json.Unmarshal([]byte(content), &m), content)
		require.True(t, texts[m.Text], "a text not in oncekey's table: %s", m.Text)
		seen[fmt.Sprintf("oncekey  %s/%s/%s: %s", m.Status, m.NextAction, m.Reason, m.Text)] = true
	})
	read("plain", func(content string) {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(content), &m), content)
		for k := range texts {
			require.NotContains(t, content, k, "the plain run shows oncekey's text")
		}
		require.NotContains(t, m, "status", "the plain run shows an oncekey label: %s", content)
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		seen["plain    tool message with "+strings.Join(keys, ", ")] = true
	})
	var lines []string
	for l := range seen {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	got := "# What the model read in the demo's tool messages (seed 1): with oncekey, each status/next_action/reason\n" +
		"# and its text; with plain retries, the shape of the message. Regenerate: go test -run '^TestDemo$' -update\n" +
		strings.Join(lines, "\n") + "\n"
	if *update {
		require.NoError(t, os.WriteFile(goldenPath, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(goldenPath)
	require.NoError(t, err, "no golden transcripts: run go test -run '^TestDemo$' -update in examples/ticketdesk")
	require.Equal(t, string(want), got, "what the model reads changed: if meant, run go test -run '^TestDemo$' -update in examples/ticketdesk and commit the diff")
}
