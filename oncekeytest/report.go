package oncekeytest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/oncekey/oncekey"
)

// Counter counts effects by tool, for tests whose downstream keeps no ledger of its own: the
// test's tool functions call Add when their effect lands, and Config.Effects is Counts. Its zero
// value is ready to use and it is safe for concurrent use.
type Counter struct {
	mu sync.Mutex
	n  map[string]int
}

// Add counts one effect of tool.
func (c *Counter) Add(tool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[tool]++
}

// Counts returns the effects counted so far, by tool.
func (c *Counter) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return copyCounts(c.n)
}

// Read is one answer a tool call gave the workflow: what an agent loop hands its model.
type Read struct {
	// Call is the call; Attempt is 0.
	Call Call
	// Repeat is true for the answer to a repeat the kit made (Repropose).
	Repeat bool
	// Claimed is true when the tool's policy claims its calls (Effectful, Idempotent,
	// Transactional).
	Claimed bool
	// Result is the result's JSON, nil for an error.
	Result json.RawMessage
	// Err is the error the workflow got, nil for a result.
	Err error
	// Text is what a loop shaped like Temporal's AI cookbook hands its model: the result's JSON,
	// or the error's text (err.Error()).
	Text string
	// Label is oncekey.Label of the answer: the outcome a model is told.
	Label oncekey.ToolResult
}

// maxModelErrorBytes bounds the text of an error a model reads, the ActivityError's own words
// (tool name, event IDs, worker identity) included, when no reviewer's message comes with it.
const maxModelErrorBytes = 600

// Problem says what makes the answer unfit for a model, or "" when nothing does: an error text
// over 600 bytes (more with a reviewer's message) or holding operator detail (an operation key,
// the workflow ID, an oncekey command or a flag); or, for a tool whose policy claims its calls, a
// success that carries no operation key, which no record backs (oncekey was off, or did not see
// the call).
func (r Read) Problem() string {
	if r.Err == nil {
		if r.Claimed && r.Label.OperationKey == "" {
			return "a success no record backs: the result carries no operation key (is oncekey installed on the worker?)"
		}
		return ""
	}
	limit := maxModelErrorBytes
	if r.Label.Message != "" {
		limit += len(r.Label.Message)
	}
	if len(r.Text) > limit {
		return fmt.Sprintf("the error text is %d bytes, over %d", len(r.Text), limit)
	}
	for _, leak := range []struct{ s, what string }{
		{"ok1_", "an operation key"}, {r.Call.WorkflowID, "the workflow ID"}, {"oncekey ", "an oncekey command"}, {" --", "a command's flag"},
	} {
		if leak.s != "" && strings.Contains(r.Text, leak.s) {
			return "the error text holds " + leak.what + ", operator detail"
		}
	}
	return ""
}

// Reads returns every answer the kit's workflows got from their tool calls, in order.
func (k *Kit) Reads() []Read {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Read(nil), k.reads...)
}

// RequireModelSafe fails the test for each answer whose Problem is not "", naming the call and
// quoting what the model would read.
func (k *Kit) RequireModelSafe() {
	k.t.Helper()
	for _, r := range k.Reads() {
		if p := r.Problem(); p != "" {
			k.t.Errorf("oncekeytest: what the model read from %s: %s:\n%s", r.Call, p, r.Text)
		}
	}
}

// Row is one tool's line of a Report.
type Row struct {
	Tool string
	// Intended is the number of distinct effects the workflows intended (Config.Intent).
	Intended int
	// Landed is the number of effects the downstream counted (Config.Effects) since New.
	Landed int
	// Replays is the number of answers oncekey gave from a stored result.
	Replays int
	// Unknowns is the number of attempts oncekey reported unknown.
	Unknowns int
	// Faults counts the faults the kit injected into the tool's calls.
	Faults map[Fault]int
	// Decisions counts the kit's decisions on the tool's unknowns and approvals, by
	// Decision.String.
	Decisions map[string]int
	// Read counts the answers the workflows got, by oncekey.Label status.
	Read map[oncekey.Outcome]int
}

// Doubles is the number of effects that landed beyond one per intended effect.
func (r Row) Doubles() int {
	if r.Landed > r.Intended {
		return r.Landed - r.Intended
	}
	return 0
}

// Report is what the kit counted, one Row per tool.
type Report struct {
	Rows []Row
	// Disabled is Config.Disabled.
	Disabled bool
}

// Report returns what the kit has counted so far.
func (k *Kit) Report() Report {
	effects := k.cfg.Effects()
	k.mu.Lock()
	defer k.mu.Unlock()
	tools := append([]string(nil), k.toolOrder...)
	for t := range effects {
		found := false
		for _, x := range tools {
			found = found || x == t
		}
		if !found && effects[t] != k.baseline[t] {
			tools = append(tools, t)
		}
	}
	rep := Report{Disabled: k.cfg.Disabled}
	for _, t := range tools {
		row := Row{Tool: t, Intended: len(k.intents[t]), Landed: effects[t] - k.baseline[t], Replays: k.replays[t], Unknowns: k.unknowns[t],
			Faults: map[Fault]int{}, Decisions: map[string]int{}, Read: map[oncekey.Outcome]int{}}
		for f, n := range k.faults[t] {
			row.Faults[f] = n
		}
		for d, n := range k.decisions[t] {
			row.Decisions[d] = n
		}
		for _, r := range k.reads {
			if r.Call.Tool == t {
				row.Read[r.Label.Status]++
			}
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep
}

// Doubles is the number of double effects across the tools.
func (r Report) Doubles() int {
	n := 0
	for _, row := range r.Rows {
		n += row.Doubles()
	}
	return n
}

// Faults counts the faults injected across the tools, by kind.
func (r Report) Faults() map[Fault]int {
	out := map[Fault]int{}
	for _, row := range r.Rows {
		for f, n := range row.Faults {
			out[f] += n
		}
	}
	return out
}

// String is the report as a table, like `make demo`'s: tool, intended, landed, doubles,
// replays, unknowns, the faults injected, the decisions made and what the model read.
func (r Report) String() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "tool\tintended\tlanded\tdoubles\treplays\tunknowns\tfaults\tdecisions\tmodel read")
	for _, row := range r.Rows {
		var faults, read []string
		for _, f := range sortedFaults(row.Faults) {
			faults = append(faults, fmt.Sprintf("%s=%d", f, row.Faults[f]))
		}
		for s, n := range row.Read {
			read = append(read, fmt.Sprintf("%s=%d", s, n))
		}
		sort.Strings(read)
		var decisions []string
		for d, n := range row.Decisions {
			decisions = append(decisions, fmt.Sprintf("%s=%d", d, n))
		}
		sort.Strings(decisions)
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", row.Tool, row.Intended, row.Landed, row.Doubles(), row.Replays, row.Unknowns,
			orDash(strings.Join(faults, " ")), orDash(strings.Join(decisions, " ")), orDash(strings.Join(read, " ")))
	}
	w.Flush()
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// RequireAtMostOnce fails the test when any tool landed more effects than its workflows
// intended, with CheckAtMostOnce's error: each such tool named, and the Report.
func (k *Kit) RequireAtMostOnce() {
	k.t.Helper()
	if err := k.CheckAtMostOnce(); err != nil {
		k.t.Errorf("%v", err)
	}
}

// CheckAtMostOnce returns nil when every tool landed at most one effect per intended effect,
// else an error naming each tool that landed more, how many, and what its policy suggests,
// followed by the Report's table.
func (k *Kit) CheckAtMostOnce() error {
	rep := k.Report()
	if rep.Doubles() == 0 {
		return nil
	}
	var lines []string
	for _, row := range rep.Rows {
		if row.Doubles() == 0 {
			continue
		}
		line := fmt.Sprintf("%s landed %d effects for %d intended: %d double effect(s)", row.Tool, row.Landed, row.Intended, row.Doubles())
		switch p, ok := k.cfg.Registry.Policy(row.Tool); {
		case k.cfg.Disabled:
			line += " (oncekey is off: Config.Disabled)"
		case !ok:
			line += " (it has no policy: oncekey passes it through; give it one with Registry.Set or a Route)"
		case p.Effect == oncekey.Idempotent:
			line += " (its policy is Idempotent: a repeat runs its body again, which only its downstream can deduplicate; register it Effectful if it does not)"
		case !p.Effect.Claimed():
			line += fmt.Sprintf(" (its policy is %s, which claims nothing)", p.Effect)
		}
		lines = append(lines, line)
	}
	return fmt.Errorf("oncekeytest: %s\n%s", strings.Join(lines, "\n"), rep)
}
