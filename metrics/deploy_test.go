package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.yaml.in/yaml/v3"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/metricstest"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/metrics"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
	okworker "github.com/oncekey/oncekey/worker"
)

// The files an on-call team imports (docs/observability.md, "Dashboard and alerts").
const (
	dashboardFile  = "../deploy/grafana/oncekey-dashboard.json"
	rulesFile      = "../deploy/prometheus/oncekey-alerts.yml"
	rulesTestFile  = "../deploy/prometheus/oncekey-alerts_test.yml"
	metricsGoFile  = "metrics.go"
	promtoolNeeded = "promtool (Debian's prometheus package: apt-get install prometheus)"
)

// kind is how the SDK's metrics handler records a metric: the Prometheus names it gets depend on it.
type kind string

const (
	counter kind = "counter"
	gauge   kind = "gauge"
	timer   kind = "timer"
)

// kinds says how each name of package metrics is recorded. A new name must be added here (the
// test fails until it is), and the run in exportedSeries checks it for the names it records.
var kinds = map[string]kind{
	metrics.ToolCalls:                counter,
	metrics.ClaimLatency:             timer,
	metrics.ReconciliationsStarted:   counter,
	metrics.ReconciliationsSettled:   counter,
	metrics.ReconciliationsEscalated: counter,
	metrics.UnknownWait:              timer,
	metrics.UnknownsWaiting:          gauge,
	metrics.UnknownOldestWait:        gauge,
	metrics.ApprovalsWaiting:         gauge,
	metrics.ApprovalOldestWait:       gauge,
	metrics.ApprovalsNearDeadline:    gauge,
	metrics.ApprovalsEscalated:       counter,
	metrics.DecisionsRefused:         counter,
	metrics.HeadersRefused:           counter,
	metrics.OutboxPending:            gauge,
	metrics.OutboxFailing:            gauge,
	metrics.OutboxOldestPending:      gauge,
}

// sdkTags are the tags the Temporal SDK adds to what an activity or a workflow records, and
// scrapeLabels those a Prometheus scrape adds: a query may group or filter by them.
var (
	sdkTags      = []string{"namespace", "task_queue", "activity_type", "workflow_type"}
	scrapeLabels = []string{"job", "instance"}
)

// tagValues are the values a query may match for oncekey's own tags with an exact matcher.
var tagValues = map[string][]string{
	metrics.TagOutcome: {
		string(oncekey.OutcomeApplied), string(oncekey.OutcomeReplayed), string(oncekey.OutcomeInFlight), string(oncekey.OutcomeRejected),
		string(oncekey.OutcomeConflict), string(oncekey.OutcomeUnknown), string(oncekey.OutcomeExpired), string(oncekey.OutcomeFailed),
		string(reconcile.NotApplied),
	},
	metrics.TagSettledBy: {metrics.SettledByRecord, metrics.SettledByReceipt, metrics.SettledByPerson},
}

// promBase returns the name a metric of package metrics has under Prometheus naming: tally's
// scope from go.temporal.io/sdk/contrib/tally's NewPrometheusNamingScope (counters end in
// _total, timers in _seconds; no prefix).
func promBase(name string, k kind) string {
	suffix := map[kind]string{counter: "_total", timer: "_seconds"}[k]
	if !strings.HasSuffix(name, suffix) {
		name += suffix
	}
	return name
}

// promNames returns the names of a metric's series: a timer, reported as a histogram (tally's
// Prometheus reporter with TimerType histogram), has three.
func promNames(name string, k kind) []string {
	base := promBase(name, k)
	if k == timer {
		return []string{base + "_bucket", base + "_sum", base + "_count"}
	}
	return []string{base}
}

// constants returns the metric names package metrics declares (its string constants that start
// with "oncekey_") with their doc comments, read from its source.
func constants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), metricsGoFile, nil, parser.ParseComments)
	require.NoError(t, err)
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				name, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				if strings.HasPrefix(name, "oncekey_") {
					out[name] = strings.Join(strings.Fields(vs.Doc.Text()), " ")
				}
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

// exported returns every Prometheus name oncekey exports, with the metric of package metrics
// it comes from.
func exported(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	declared := constants(t)
	for name := range declared {
		k, ok := kinds[name]
		require.True(t, ok, "metric %s of package metrics has no kind in this test's kinds: add it (and to the dashboard or the alerts if on-call needs it)", name)
		for _, p := range promNames(name, k) {
			out[p] = name
		}
	}
	for name := range kinds {
		_, ok := declared[name]
		require.True(t, ok, "kinds names %s, which package metrics does not declare", name)
	}
	return out
}

// series is one series as Prometheus would scrape it: its name and labels.
type series struct {
	name   string
	labels map[string]string
}

// Tickets and Cards are the tools of the run: a ticket system that answers, and a card processor
// that loses its answer (so the outcome is unknown and a person settles it).
type Tickets struct{}

func (Tickets) CreateTicket(_ context.Context, subject string) (string, error) {
	return "T-1 " + subject, nil
}

type Cards struct{}

func (Cards) ChargeCard(context.Context, int) (string, error) {
	return "", errors.New("connection reset after the request was sent")
}

// Desk calls CreateTicket twice under one step (applied, then replayed), once more under that
// step with other arguments (a conflict), and ChargeCard, whose outcome is unknown until a
// person settles it.
func Desk(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	open := oncekey.WithStepID(ctx, "open_ticket")
	for _, subject := range []string{"printer on fire", "printer on fire"} {
		if err := workflow.ExecuteActivity(open, "CreateTicket", subject).Get(ctx, nil); err != nil {
			return err
		}
	}
	if err := workflow.ExecuteActivity(open, "CreateTicket", "printer still on fire").Get(ctx, nil); err == nil {
		return errors.New("other arguments under the same step were not refused")
	}
	return workflow.ExecuteActivity(oncekey.WithStepID(ctx, "charge"), "ChargeCard", 12000).Get(ctx, nil)
}

// exportedSeries runs oncekey's code on the SDK's test environment with a capturing metrics
// handler, as a worker started with okworker.Options would: a workflow's tool calls through the
// interceptor, a reconciliation a person settles, and the plugin's sampler over the store (an
// unknown record, approvals of which one is near its deadline). It returns the series recorded,
// under Prometheus naming, and the Prometheus text exposition of them.
// outboxStore is the test's memstore with an outbox holding one failing message, as
// pgstore.Store.OutboxStats would count it.
type outboxStore struct{ *memstore.Store }

func (outboxStore) OutboxStats(context.Context) (*oncekeystore.OutboxStats, error) {
	return &oncekeystore.OutboxStats{Pending: 1, Failing: 1, OldestPending: time.Now().Add(-time.Hour), MostAttempts: 3}, nil
}

func exportedSeries(t *testing.T) ([]series, string) {
	t.Helper()
	var offset atomic.Int64 // the store's clock, moved back to ask an approval in the past
	store := memstore.New(&memstore.Options{Clock: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(Tickets{}.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	require.NoError(t, reg.Set(Cards{}.ChargeCard, oncekey.Policy{Effect: oncekey.Effectful}))
	opts := okworker.Options{Store: store, Registry: reg}

	h := metricstest.New()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	suite.SetMetricsHandler(h)
	env := suite.NewTestWorkflowEnvironment()
	wo, err := okworker.WorkerOptions(opts, sdkworker.Options{})
	require.NoError(t, err)
	env.SetWorkerOptions(wo)
	require.NoError(t, okworker.Register(env, opts))
	env.RegisterActivity(Tickets{}.CreateTicket)
	env.RegisterActivity(Cards{}.ChargeCard)
	env.RegisterWorkflow(Desk)

	ctx := context.Background()
	ask := func(key string, ago, timeout time.Duration) {
		offset.Store(int64(-ago))
		defer offset.Store(0)
		res, err := store.RequestApproval(ctx, &oncekeystore.RequestApprovalParams{Tenant: "default", OperationKey: key, Tool: "IssueRefund",
			Fingerprint: "fp", WorkflowID: "wf", StepID: key, Summary: "refund 120.00 EUR", Timeout: timeout})
		require.NoError(t, err)
		require.True(t, res.Created)
	}
	ask("ok1_near", 50*time.Minute, time.Hour) // 10 minutes to go: in the last quarter
	ask("ok1_far", time.Minute, time.Hour)
	// The sampler reads an outbox from a store that has one (pgstore): what such a store answers
	// is given here, the gauges are the sampler's own.
	sampler := &okworker.UnknownsSampler{Store: outboxStore{Store: store}, Handler: h}
	sampled := false
	env.RegisterDelayedCallback(func() {
		// While ChargeCard's outcome waits for a person: what the plugin's sampler reports.
		require.NoError(t, sampler.Sample(ctx))
		page, err := store.List(ctx, &oncekeystore.ListParams{Status: oncekeystore.StatusUnknown})
		require.NoError(t, err)
		require.Len(t, page.Records, 1)
		r := page.Records[0]
		env.SignalWorkflowByID(reconcile.WorkflowID(r.OperationKey), reconcile.SignalName, reconcile.Resolution{
			Epoch: r.Epoch, Outcome: reconcile.Applied, EffectReference: "ch_1", Result: json.RawMessage(`"ch_1"`), ResolvedBy: "gina"})
		sampled = true
	}, time.Minute) // before the reconciliation escalates (okworker.DefaultEscalationTimeout)
	env.ExecuteWorkflow(Desk)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.True(t, sampled)

	// The exposition, as tally's Prometheus reporter writes it (one histogram bucket, +Inf, is
	// enough for the names), with each metric's doc comment as its HELP.
	docs := constants(t)
	var out []series
	var text strings.Builder
	tagsOf := func(id string) map[string]string { // metricstest.ID's "name{k=v,k=v}"
		_, rest, _ := strings.Cut(id, "{")
		labels := map[string]string{}
		for kv := range strings.SplitSeq(strings.TrimSuffix(rest, "}"), ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = v
			}
		}
		return labels
	}
	for _, name := range slices.Sorted(maps.Keys(kinds)) {
		k := kinds[name]
		var ids []string
		switch k {
		case counter:
			ids = slices.Collect(maps.Keys(h.Counters(name)))
		case gauge:
			ids = slices.Collect(maps.Keys(h.Gauges(name)))
		case timer:
			ids = slices.Collect(maps.Keys(h.Timers(name)))
		}
		for _, other := range []kind{counter, gauge, timer} {
			if other == k {
				continue
			}
			n := map[kind]int{counter: len(h.Counters(name)), gauge: len(h.Gauges(name)), timer: len(h.Timers(name))}[other]
			require.Zero(t, n, "%s is recorded as a %s, but kinds says %s", name, other, k)
		}
		if len(ids) == 0 {
			continue
		}
		slices.Sort(ids)
		base, typ := promBase(name, k), map[kind]string{counter: "counter", gauge: "gauge", timer: "histogram"}[k]
		fmt.Fprintf(&text, "# HELP %s %s\n# TYPE %s %s\n", base, docs[name], base, typ)
		for _, id := range ids {
			labels := tagsOf(id)
			for _, p := range promNames(name, k) {
				l := maps.Clone(labels)
				if strings.HasSuffix(p, "_bucket") {
					l["le"] = "+Inf"
				}
				out = append(out, series{name: p, labels: l})
				fmt.Fprintf(&text, "%s%s 1\n", p, promLabels(l))
			}
		}
	}
	return out, text.String()
}

func promLabels(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+strconv.Quote(l[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// promtool returns the path of promtool, or skips (fails with CI set) without it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Missing(t, "%s, for the alerting rules' checks", promtoolNeeded)
	}
	return p
}

// The alerting rules are valid and their unit tests pass.
func TestAlertingRulesPromtool(t *testing.T) {
	t.Parallel()
	pt := promtool(t)
	for _, args := range [][]string{{"check", "rules", filepath.Base(rulesFile)}, {"test", "rules", filepath.Base(rulesTestFile)}} {
		cmd := exec.Command(pt, args...)
		cmd.Dir = filepath.Dir(rulesFile)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// query is one PromQL expression of the dashboard or the rules, and where it is.
type query struct{ where, expr string }

// queries returns the PromQL of the dashboard's panels and variables and of the alerting rules.
func queries(t *testing.T) []query {
	t.Helper()
	var out []query
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var dash struct {
		Inputs []struct {
			Name     string `json:"name"`
			PluginID string `json:"pluginId"`
		} `json:"__inputs"`
		Panels []struct {
			Title      string `json:"title"`
			Type       string `json:"type"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash), dashboardFile)
	require.Len(t, dash.Inputs, 1)
	require.Equal(t, "DS_PROMETHEUS", dash.Inputs[0].Name)
	require.Equal(t, "prometheus", dash.Inputs[0].PluginID)
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		require.Equal(t, "${DS_PROMETHEUS}", p.Datasource.UID, "panel %q: its datasource is the import's input", p.Title)
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			out = append(out, query{"dashboard panel " + strconv.Quote(p.Title), tg.Expr})
		}
	}
	for _, v := range dash.Templating.List {
		if m := regexp.MustCompile(`^label_values\((\w+),\s*\w+\)$`).FindStringSubmatch(v.Definition); m != nil {
			out = append(out, query{"dashboard variable $" + v.Name, m[1]})
		}
	}

	raw, err = os.ReadFile(rulesFile)
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rules), rulesFile)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, query{"alert " + r.Alert, r.Expr})
		}
	}
	return out
}

var (
	// selectorRE finds a metric name with its matchers; matcherRE one matcher; groupingRE the
	// labels of a by (…) clause.
	selectorRE = regexp.MustCompile(`\b(oncekey_[a-zA-Z0-9_]*)\b(\{[^}]*\})?`)
	matcherRE  = regexp.MustCompile(`(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	groupingRE = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	// grafanaVars are the variables of the dashboard's queries, with a value that makes them
	// PromQL for promtool.
	grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$tool", ".*")
)

// Every metric the dashboard and the alerting rules query is one oncekey exports under
// Prometheus naming, with the labels its series carry; every input series of the rules' unit
// tests is one a run of oncekey's code records. Neither drifts from the code.
func TestDashboardAndAlertsQueryExportedMetrics(t *testing.T) {
	t.Parallel()
	names := exported(t)
	run, text := exportedSeries(t)

	// The run records every name the dashboard and the alerts use below, except those only an
	// escalation records.
	labelsOf := map[string]map[string]bool{}
	for _, s := range run {
		require.Contains(t, names, s.name, "the run recorded %s, which is not a name of package metrics", s.name)
		if labelsOf[s.name] == nil {
			labelsOf[s.name] = map[string]bool{}
		}
		for k := range s.labels {
			labelsOf[s.name][k] = true
		}
	}
	allowed := func(name string) map[string]bool {
		l := map[string]bool{metrics.TagTool: true, metrics.TagTenant: true}
		maps.Copy(l, labelsOf[name])
		if _, recorded := labelsOf[name]; !recorded {
			// Not recorded by the run (an escalation): the tags its constant's doc names.
			maps.Copy(l, map[string]bool{metrics.TagOutcome: true, metrics.TagSettledBy: true})
		}
		for _, k := range append(slices.Clone(sdkTags), scrapeLabels...) {
			l[k] = true
		}
		if strings.HasSuffix(name, "_bucket") {
			l["le"] = true
		}
		return l
	}
	notRecorded := []string{}
	for p, name := range names {
		if _, ok := labelsOf[p]; !ok && !slices.Contains(notRecorded, name) {
			notRecorded = append(notRecorded, name)
		}
	}
	slices.Sort(notRecorded)
	require.Equal(t, []string{metrics.ApprovalsEscalated, metrics.DecisionsRefused, metrics.HeadersRefused, metrics.ReconciliationsEscalated}, notRecorded,
		"the run records every metric but the escalations', the refused decisions' and the refused headers'; series:\n%s", text)

	// The exposition passes promtool's lint (naming, types, help).
	if pt, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(pt, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool check metrics:\n%s\non:\n%s", out, text)
	}

	qs := queries(t)
	used := map[string]bool{}
	var bad []string
	for _, q := range qs {
		sels := selectorRE.FindAllStringSubmatch(q.expr, -1)
		if len(sels) == 0 {
			bad = append(bad, q.where+": queries no oncekey metric: "+q.expr)
		}
		groupable := map[string]bool{}
		for _, m := range sels {
			name := m[1]
			if _, ok := names[name]; !ok {
				bad = append(bad, fmt.Sprintf("%s: %s is not a metric oncekey exports (package metrics under Prometheus naming)", q.where, name))
				continue
			}
			used[names[name]] = true
			ok := allowed(name)
			maps.Copy(groupable, ok)
			for _, mm := range matcherRE.FindAllStringSubmatch(m[2], -1) {
				label, op, value := mm[1], mm[2], mm[3]
				if !ok[label] {
					bad = append(bad, fmt.Sprintf("%s: %s has no label %q", q.where, name, label))
					continue
				}
				for _, v := range strings.Split(value, "|") {
					if vals, known := tagValues[label]; known && (op == "=" || op == "=~") && !slices.Contains(vals, v) {
						bad = append(bad, fmt.Sprintf("%s: %s{%s} is never %q (one of %v)", q.where, name, label, v, vals))
					}
				}
			}
		}
		for _, g := range groupingRE.FindAllStringSubmatch(q.expr, -1) {
			for l := range strings.SplitSeq(g[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !groupable[l] {
					bad = append(bad, fmt.Sprintf("%s: groups by %q, a label none of its series carries", q.where, l))
				}
			}
		}
	}

	// The rules' unit tests feed series a run records: the same names and labels.
	raw, err := os.ReadFile(rulesTestFile)
	require.NoError(t, err)
	var rt struct {
		Tests []struct {
			InputSeries []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
		} `yaml:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rt))
	for _, tc := range rt.Tests {
		for _, in := range tc.InputSeries {
			m := selectorRE.FindStringSubmatch(in.Series)
			if m == nil || m[0] != in.Series {
				bad = append(bad, "rules test input "+in.Series+": not an oncekey series")
				continue
			}
			name := m[1]
			if _, ok := names[name]; !ok {
				bad = append(bad, fmt.Sprintf("rules test input %s: %s is not a metric oncekey exports", in.Series, name))
				continue
			}
			ok := allowed(name)
			for _, mm := range matcherRE.FindAllStringSubmatch(m[2], -1) {
				if !ok[mm[1]] {
					bad = append(bad, fmt.Sprintf("rules test input %s: %s has no label %q", in.Series, name, mm[1]))
				}
				if vals, known := tagValues[mm[1]]; known && !slices.Contains(vals, mm[3]) {
					bad = append(bad, fmt.Sprintf("rules test input %s: %s is never %q", in.Series, mm[1], mm[3]))
				}
			}
		}
	}
	require.Empty(t, bad, "the dashboard, the alerts and their tests against what oncekey exports:\n%s", strings.Join(bad, "\n"))

	// What the person on call needs from the issue is on the dashboard.
	for _, name := range []string{metrics.UnknownsWaiting, metrics.UnknownOldestWait, metrics.ApprovalsWaiting, metrics.ApprovalsNearDeadline,
		metrics.ToolCalls, metrics.ClaimLatency} {
		require.True(t, used[name], "neither the dashboard nor the alerts show %s", name)
	}

	// The dashboard's queries are PromQL: promtool checks them as recording rules.
	pt := promtool(t)
	var rules bytes.Buffer
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range qs {
		expr, err := json.Marshal(grafanaVars.Replace(q.expr)) // a JSON string is a YAML string
		require.NoError(t, err)
		fmt.Fprintf(&rules, "      - record: dashboard_query_%d\n        expr: %s\n", i, expr)
	}
	f := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	require.NoError(t, os.WriteFile(f, rules.Bytes(), 0o600))
	out, err := exec.Command(pt, "check", "rules", f).CombinedOutput()
	require.NoError(t, err, "promtool check rules on the dashboard's queries:\n%s\n%s", out, rules.String())
}
