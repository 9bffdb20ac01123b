package oncekey_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/argsdoc"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/internal/wire"
)

func baseOp() oncekey.Operation {
	return oncekey.Operation{
		Namespace: "default", Tenant: "acme", WorkflowID: "support-42", RunID: "5f0c6f55-7c1a-4a57-9c55-3c1f1e0b9a10",
		ActivityID: "7", StepID: "create_ticket", Tool: "CreateTicket",
		Args: []any{map[string]any{"subject": "Printer on fire", "priority": 2, "trace_id": "t-1"}},
	}
}

func mustKey(t *testing.T, p oncekey.Policy, op oncekey.Operation) string {
	t.Helper()
	k, err := oncekey.Key(p, op)
	require.NoError(t, err)
	return k
}

func mustFingerprint(t *testing.T, p oncekey.Policy, op oncekey.Operation) string {
	t.Helper()
	fp, err := oncekey.Fingerprint(p, op)
	require.NoError(t, err)
	return fp
}

// TestKeyFormatPinned pins the printable operation key format and concrete keys.
//
// CHANGING ANY VALUE HERE IS A BREAKING CHANGE: stored records are found by these keys, so a
// different derivation orphans every record and lets a repeat of a completed operation run its
// effect a second time. A new derivation needs a new prefix ("ok2_") and a migration story once a release is out.
// (The call identity without a step ID and the tool in ExplicitKey keys changed these values
// before any release, under the same prefix: see CHANGELOG.md.)
func TestKeyFormatPinned(t *testing.T) {
	t.Parallel()
	require.Equal(t, "ok1_", oncekey.KeyPrefix)
	format := regexp.MustCompile(`^ok1_[0-9a-f]{64}$`)

	op := baseOp()
	noStep := op
	noStep.StepID = ""
	explicit := oncekey.ExplicitKey(func(oncekey.Operation) (string, error) { return "order-1001/refund", nil })
	pinned := []struct {
		name string
		p    oncekey.Policy
		op   oncekey.Operation
		want string
	}{
		{"step key, explicit step ID", oncekey.Policy{}, op,
			"ok1_5e6e34c4f21405e716a159d2c556efc4da389f07b19048e8c7d9ff068ae68041"},
		{"step key without a step ID: workflow ID, tool, material arguments", oncekey.Policy{Key: oncekey.StepKey()}, noStep,
			"ok1_9fda5d369b9895ee1515cc29f5a545e07fc0f42979299e3c6791182dcfc59f92"},
		{"step key without a step ID, trace ID excluded", oncekey.Policy{Exclude: []string{"trace_id"}}, noStep,
			"ok1_8c899d3809cb5ab323daa1f5924b646e7e14b60758726b5680bd107513dbfb84"},
		{"args key", oncekey.Policy{Key: oncekey.ArgsKey("subject", "priority")}, op,
			"ok1_375ce489e64d38b47870cf78b4854e56967bcca80054e379030d3c1e513b6f0d"},
		{"explicit key", oncekey.Policy{Key: explicit}, op,
			"ok1_3c14d7d9a1f6d6d524959d1b56f4d87812ee83558e165642fb04449930d8f798"},
		{"step key of a Nexus operation: caller key, operation, material input", oncekey.Policy{Exclude: []string{"trace_id"}}, nexusOp(),
			"ok1_c7696d4a0fad8468bd1175d9309e5b8a729a221dd4edde34a54c2d39c8fd3879"},
	}
	for _, c := range pinned {
		got := mustKey(t, c.p, c.op)
		require.Regexp(t, format, got, c.name)
		require.Equal(t, c.want, got, c.name)
	}
}

// lengthPrefixed is the documented key encoding, written out again independently: each part as
// its byte length (big-endian uint64) and its bytes, SHA-256, "ok1_" + hex.
func lengthPrefixed(parts ...string) string {
	var b []byte
	for _, p := range parts {
		n := uint64(len(p))
		b = append(b, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		b = append(b, p...)
	}
	return "ok1_" + sha256Hex(b)
}

func TestKeyEncodingDocumented(t *testing.T) {
	t.Parallel()
	op := baseOp()
	require.Equal(t, lengthPrefixed("default", "acme", "step", "support-42", "create_ticket"), mustKey(t, oncekey.Policy{}, op))
	op.StepID = ""
	require.Equal(t, lengthPrefixed("default", "acme", "call", "support-42", "CreateTicket", `{"priority":2,"subject":"Printer on fire","trace_id":"t-1"}`),
		mustKey(t, oncekey.Policy{}, op))
	require.Equal(t, lengthPrefixed("default", "acme", "call", "support-42", "CreateTicket", `{"priority":2,"subject":"Printer on fire"}`),
		mustKey(t, oncekey.Policy{Exclude: []string{"trace_id"}}, op))
	op = baseOp()
	require.Equal(t, lengthPrefixed("default", "acme", "args", "support-42", "CreateTicket", "priority", "2", "subject", `"Printer on fire"`),
		mustKey(t, oncekey.Policy{Key: oncekey.ArgsKey("subject", "priority")}, op))
	require.Equal(t, lengthPrefixed("default", "acme", "explicit", "CreateTicket", "order-1001/refund"),
		mustKey(t, oncekey.Policy{Key: oncekey.ExplicitKey(func(oncekey.Operation) (string, error) { return "order-1001/refund", nil })}, op))
	require.Equal(t, lengthPrefixed("default", "acme", "nexus", "req-9", "create-ticket", `{"priority":2,"subject":"Printer on fire"}`),
		mustKey(t, oncekey.Policy{Exclude: []string{"trace_id"}}, nexusOp()))
}

// nexusOp is baseOp as a Nexus operation's synchronous handler sees it: keyed by the request ID
// "req-9", the operation create-ticket.
func nexusOp() oncekey.Operation {
	op := baseOp()
	op.WorkflowID, op.NexusKey, op.RunID, op.ActivityID, op.StepID, op.Tool = "req-9", "req-9", "", "", "create-ticket", "create-ticket"
	return op
}

func TestKeyPartsUnambiguous(t *testing.T) {
	t.Parallel()
	a, b := baseOp(), baseOp()
	a.WorkflowID, a.StepID = "a:b", "c"
	b.WorkflowID, b.StepID = "a", "b:c"
	require.NotEqual(t, mustKey(t, oncekey.Policy{}, a), mustKey(t, oncekey.Policy{}, b))

	a, b = baseOp(), baseOp()
	a.Namespace, a.Tenant = "ns", "t1x"
	b.Namespace, b.Tenant = "nst", "1x"
	require.NotEqual(t, mustKey(t, oncekey.Policy{}, a), mustKey(t, oncekey.Policy{}, b))

	// An explicit step ID that spells "<runID>/<activityID>" is still another step.
	a, b = baseOp(), baseOp()
	a.StepID = ""
	b.StepID = a.RunID + "/" + a.ActivityID
	require.NotEqual(t, mustKey(t, oncekey.Policy{}, a), mustKey(t, oncekey.Policy{}, b))

	// Same step, other tenant: another operation.
	a, b = baseOp(), baseOp()
	b.Tenant = "globex"
	require.NotEqual(t, mustKey(t, oncekey.Policy{}, a), mustKey(t, oncekey.Policy{}, b))

	// The explicit key "support-42" is not the step key of workflow support-42.
	explicit := oncekey.Policy{Key: oncekey.ExplicitKey(func(op oncekey.Operation) (string, error) { return op.WorkflowID, nil })}
	require.NotEqual(t, mustKey(t, explicit, baseOp()), mustKey(t, oncekey.Policy{}, baseOp()))
}

func TestKeyStepIgnoresArgumentsAndRun(t *testing.T) {
	t.Parallel()
	a, b := baseOp(), baseOp()
	b.Args = []any{"something else"}
	b.Tool = "OtherTool"
	b.RunID, b.ActivityID = "another-run", "99"
	require.Equal(t, mustKey(t, oncekey.Policy{}, a), mustKey(t, oncekey.Policy{}, b),
		"an explicit step ID survives a reset and is tool-independent: another tool there is a mismatch, not a new operation")
}

// TestKeyDefaultIdentity: without a step ID, the operation is the workflow ID, the tool and the
// material arguments, whatever run, activity ID or excluded field the call comes with.
func TestKeyDefaultIdentity(t *testing.T) {
	t.Parallel()
	p := oncekey.Policy{Exclude: []string{"trace_id"}}
	a := baseOp()
	a.StepID = ""
	later := a
	later.RunID, later.ActivityID, later.FirstActivityID = "a-new-run", "31", "" // a reset, continue-as-new, a new run
	later.Args = []any{map[string]any{"subject": "Printer on fire", "priority": 2.0, "trace_id": "t-2"}}
	require.Equal(t, mustKey(t, p, a), mustKey(t, p, later), "the same call proposed again with a new trace ID")

	other := a
	other.Args = []any{map[string]any{"subject": "Printer on fire", "priority": 3, "trace_id": "t-1"}}
	require.NotEqual(t, mustKey(t, p, a), mustKey(t, p, other), "other material arguments")
	require.NotEqual(t, mustKey(t, oncekey.Policy{}, a), mustKey(t, oncekey.Policy{}, later), "without Exclude the trace ID counts")

	tool := a
	tool.Tool = "SendEmail"
	require.NotEqual(t, mustKey(t, p, a), mustKey(t, p, tool), "the tool is part of the identity")
	wf := a
	wf.WorkflowID = "support-43"
	require.NotEqual(t, mustKey(t, p, a), mustKey(t, p, wf), "the workflow is part of the identity")
	step := a
	step.StepID = "second-invoice"
	require.NotEqual(t, mustKey(t, p, a), mustKey(t, p, step), "a step ID makes it another operation")

	// The arguments as scheduled (ArgsJSON) win over the decoded ones: 2^53+1 survives a
	// map[string]any decode on the worker only through them.
	big, small := a, a
	big.Args = []any{map[string]any{"order": float64(9007199254740993)}}
	small.Args = []any{map[string]any{"order": float64(9007199254740992)}}
	require.Equal(t, mustKey(t, p, big), mustKey(t, p, small), "what a float64 decode does")
	big.ArgsJSON = json.RawMessage(`{"order":9007199254740993}`)
	small.ArgsJSON = json.RawMessage(`{"order":9007199254740992}`)
	require.NotEqual(t, mustKey(t, p, big), mustKey(t, p, small))
	require.NotEqual(t, mustFingerprint(t, p, big), mustFingerprint(t, p, small))
	spaced := small
	spaced.ArgsJSON = json.RawMessage(` { "order" : 9007199254740992.0 } `)
	require.Equal(t, mustKey(t, p, small), mustKey(t, p, spaced), "equal JSON is one call")

	// An explicit key is scoped to the tool: two tools may return one business ID.
	ek := oncekey.Policy{Key: oncekey.ExplicitKey(func(oncekey.Operation) (string, error) { return "order-1001", nil })}
	refund, cancel := baseOp(), baseOp()
	cancel.Tool = "CancelOrder"
	require.NotEqual(t, mustKey(t, ek, refund), mustKey(t, ek, cancel))
}

func TestArgsKey(t *testing.T) {
	t.Parallel()
	p := oncekey.Policy{Key: oncekey.ArgsKey("subject", "priority")}
	base := mustKey(t, p, baseOp())

	other := baseOp()
	other.Args = []any{map[string]any{"subject": "Printer on fire", "priority": 2.0, "trace_id": "t-2"}}
	other.StepID, other.RunID = "another-step", "another-run"
	require.Equal(t, base, mustKey(t, p, other), "unnamed fields, step and run do not matter; 2 == 2.0")
	require.Equal(t, base, mustKey(t, oncekey.Policy{Key: oncekey.ArgsKey("priority", "subject", "priority")}, other), "field order and repeats do not matter")

	other.Args = []any{map[string]any{"subject": "Printer on fire", "priority": "2"}}
	require.NotEqual(t, base, mustKey(t, p, other), `"2" is not 2`)
	other.Args = []any{map[string]any{"subject": "Printer on fire", "priority": 3}}
	require.NotEqual(t, base, mustKey(t, p, other))

	other = baseOp()
	other.Tool = "SendEmail"
	require.NotEqual(t, base, mustKey(t, p, other), "the tool is part of an args key")
	other = baseOp()
	other.WorkflowID = "support-43"
	require.NotEqual(t, base, mustKey(t, p, other), "the workflow is part of an args key")

	type Order struct {
		ID    string `json:"id"`
		Total float64
	}
	type Input struct {
		Order  Order
		Amount int
	}
	nested := oncekey.Policy{Key: oncekey.ArgsKey("Order.id")}
	x, y := baseOp(), baseOp()
	x.Args = []any{Input{Order: Order{ID: "o-1", Total: 3}, Amount: 1}}
	y.Args = []any{&Input{Order: Order{ID: "o-1", Total: 4}, Amount: 2}}
	require.Equal(t, mustKey(t, nested, x), mustKey(t, nested, y))
	y.Args = []any{&Input{Order: Order{ID: "o-2"}}}
	require.NotEqual(t, mustKey(t, nested, x), mustKey(t, nested, y))

	multi := oncekey.Policy{Key: oncekey.ArgsKey("1.id")}
	x.Args = []any{"first", map[string]any{"id": 5}}
	y.Args = []any{"other first", map[string]any{"id": 5}}
	require.Equal(t, mustKey(t, multi, x), mustKey(t, multi, y))
}

func TestKeyEmptyPartsAreErrNoKey(t *testing.T) {
	t.Parallel()
	explicit := func(s string, err error) oncekey.Policy {
		return oncekey.Policy{Key: oncekey.ExplicitKey(func(oncekey.Operation) (string, error) { return s, err })}
	}
	fnErr := errors.New("no order ID in the arguments")
	cases := []struct {
		name string
		p    oncekey.Policy
		edit func(*oncekey.Operation)
	}{
		{"empty namespace", oncekey.Policy{}, func(op *oncekey.Operation) { op.Namespace = "" }},
		{"blank tenant", oncekey.Policy{}, func(op *oncekey.Operation) { op.Tenant = " \t" }},
		{"blank workflow ID", oncekey.Policy{}, func(op *oncekey.Operation) { op.WorkflowID = "\n" }},
		{"blank step ID", oncekey.Policy{}, func(op *oncekey.Operation) { op.StepID = "\u00a0 " }},
		{"no step ID and a blank tool", oncekey.Policy{}, func(op *oncekey.Operation) { op.StepID, op.Tool = "", " " }},
		{"no step ID and arguments not JSON", oncekey.Policy{}, func(op *oncekey.Operation) { op.StepID, op.ArgsJSON = "", json.RawMessage("{") }},
		{"no step ID and arguments not encodable", oncekey.Policy{}, func(op *oncekey.Operation) {
			op.StepID, op.Args = "", []any{map[string]any{"f": func() {}}}
		}},
		{"explicit key empty", explicit("", nil), nil},
		{"explicit key blank", explicit("  ", nil), nil},
		{"explicit key error", explicit("x", fnErr), nil},
		{"explicit key nil", oncekey.Policy{Key: oncekey.ExplicitKey(nil)}, nil},
		{"args key without fields", oncekey.Policy{Key: oncekey.ArgsKey()}, nil},
		{"args field absent", oncekey.Policy{Key: oncekey.ArgsKey("order_id")}, nil},
		{"args field null", oncekey.Policy{Key: oncekey.ArgsKey("subject")}, func(op *oncekey.Operation) {
			op.Args = []any{map[string]any{"subject": nil}}
		}},
		{"args field blank", oncekey.Policy{Key: oncekey.ArgsKey("subject")}, func(op *oncekey.Operation) {
			op.Args = []any{map[string]any{"subject": " "}}
		}},
		{"args field path through a string", oncekey.Policy{Key: oncekey.ArgsKey("subject.x")}, nil},
		{"args not encodable", oncekey.Policy{Key: oncekey.ArgsKey("subject")}, func(op *oncekey.Operation) {
			op.Args = []any{map[string]any{"subject": "x", "f": func() {}}}
		}},
	}
	for _, c := range cases {
		op := baseOp()
		if c.edit != nil {
			c.edit(&op)
		}
		k, err := oncekey.Key(c.p, op)
		require.ErrorIs(t, err, oncekey.ErrNoKey, c.name)
		require.Empty(t, k, c.name)
		if c.name == "explicit key error" {
			require.ErrorIs(t, err, fnErr)
		}
	}
}

func TestFingerprintPinned(t *testing.T) {
	t.Parallel()
	// CHANGING THIS VALUE IS A BREAKING CHANGE: every stored record carries its fingerprint, and a
	// repeat whose fingerprint differs is rejected instead of replayed.
	require.Equal(t, "757fb2d5133a163c9a16c858c5d75c84829935aa332842ca195a521279a3ea1a",
		mustFingerprint(t, oncekey.Policy{Version: "v1"}, baseOp()))
	// The documented form: SHA-256 of canonical {"args":…,"tool":…,"version":…}.
	require.Equal(t, sha256Hex([]byte(`{"args":{"priority":2,"subject":"Printer on fire","trace_id":"t-1"},"tool":"CreateTicket","version":"v1"}`)),
		mustFingerprint(t, oncekey.Policy{Version: "v1"}, baseOp()))
}

func TestFingerprintEquivalences(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	at := time.Date(2025, 10, 26, 0, 59, 59, 999, time.UTC)
	type Refund struct {
		OrderID string    `json:"order_id"`
		Amount  any       `json:"amount"`
		At      time.Time `json:"at"`
		TraceID string    `json:"trace_id"`
	}
	cases := []struct {
		name string
		a, b any
		same bool
	}{
		{"int 2 vs float64 2.0", 2, 2.0, true},
		{"bool true vs int 1", true, 1, false},
		{"NFC vs NFD", "Café crème", "Cafe\u0301 cre\u0300me", true},
		{"2^53+1 vs 2^53", int64(9007199254740993), int64(9007199254740992), false},
		{"2^53+1 vs 2^53 as uint64", uint64(9007199254740993), uint64(9007199254740992), false},
		{"same instant in two time zones", at, at.In(berlin), true},
		{"instants a nanosecond apart", at, at.Add(time.Nanosecond), false},
		{"struct vs the same JSON map", Refund{OrderID: "o", Amount: 2, At: at},
			map[string]any{"amount": 2.0, "order_id": "o", "at": "2025-10-26T00:59:59.000000999Z", "trace_id": ""}, true},
		{"string vs number", "2", 2, false},
		{"null vs missing member", map[string]any{"a": nil}, map[string]any{}, false},
		{"array order", []int{1, 2}, []int{2, 1}, false},
	}
	for _, c := range cases {
		a, b := baseOp(), baseOp()
		a.Args, b.Args = []any{c.a}, []any{c.b}
		fa, fb := mustFingerprint(t, oncekey.Policy{}, a), mustFingerprint(t, oncekey.Policy{}, b)
		if c.same {
			require.Equal(t, fa, fb, c.name)
		} else {
			require.NotEqual(t, fa, fb, c.name)
		}
	}
}

func TestFingerprintExcludeVersionTool(t *testing.T) {
	t.Parallel()
	type Item struct {
		SKU       string `json:"sku"`
		RequestID string `json:"request_id"`
	}
	type Input struct {
		Item      Item   `json:"item"`
		RequestID string `json:"request_id"`
		Qty       int    `json:"qty"`
	}
	p := oncekey.Policy{Exclude: []string{"request_id", "item.request_id"}, Version: "v1"}
	a, b := baseOp(), baseOp()
	a.Args = []any{Input{Item{"s", "r1"}, "r1", 1}}
	b.Args = []any{Input{Item{"s", "r2"}, "r2", 1}}
	require.Equal(t, mustFingerprint(t, p, a), mustFingerprint(t, p, b), "excluded fields are ignored")
	require.NotEqual(t, mustFingerprint(t, oncekey.Policy{Version: "v1"}, a), mustFingerprint(t, oncekey.Policy{Version: "v1"}, b),
		"without Exclude they count")
	b.Args = []any{Input{Item{"s", "r2"}, "r2", 2}}
	require.NotEqual(t, mustFingerprint(t, p, a), mustFingerprint(t, p, b), "a field not excluded counts")

	v2 := p
	v2.Version = "v2"
	require.NotEqual(t, mustFingerprint(t, p, a), mustFingerprint(t, v2, a), "the version is in the fingerprint")
	other := a
	other.Tool = "OtherTool"
	require.NotEqual(t, mustFingerprint(t, p, a), mustFingerprint(t, p, other), "the tool is in the fingerprint")

	// The key parts other than the arguments are not in the fingerprint.
	moved := a
	moved.WorkflowID, moved.StepID, moved.Tenant = "w2", "s2", "t2"
	require.Equal(t, mustFingerprint(t, p, a), mustFingerprint(t, p, moved))

	// Several arguments: paths start with the argument index.
	multi := oncekey.Policy{Exclude: []string{"1.trace"}}
	a.Args = []any{"x", map[string]any{"trace": "t1", "n": 1}}
	b.Args = []any{"x", map[string]any{"trace": "t2", "n": 1}}
	require.Equal(t, mustFingerprint(t, multi, a), mustFingerprint(t, multi, b))
}

// TestFingerprintTakenAtCallTime: a fingerprint is a value computed from the arguments when
// Fingerprint is called; a body that later mutates its map or pointer argument cannot change it.
func TestFingerprintTakenAtCallTime(t *testing.T) {
	t.Parallel()
	type Input struct{ Amount int }
	in := &Input{Amount: 10}
	m := map[string]any{"to": "a@example.com"}
	op := baseOp()
	op.Args = []any{in, m}
	p := oncekey.Policy{Version: "v1"}
	before := mustFingerprint(t, p, op)

	in.Amount = 11 // what a tool body might do to its arguments
	m["to"] = "b@example.com"
	m["cc"] = "c@example.com"

	after := mustFingerprint(t, p, op)
	require.NotEqual(t, before, after, "the mutation is visible to a new fingerprint")
	in.Amount = 10
	delete(m, "cc")
	m["to"] = "a@example.com"
	require.Equal(t, before, mustFingerprint(t, p, op), "and only the arguments' values determine it")
}

// TestFingerprintVectors: canonical.json cases passed as raw JSON arguments fingerprint the same
// exactly when their canonical values are equal; error cases have no fingerprint.
func TestFingerprintVectors(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(testenv.VectorsDir(t), "canonical.json"))
	require.NoError(t, err)
	var doc struct {
		Cases []struct {
			Name      string  `json:"name"`
			Input     string  `json:"input"`
			Canonical *string `json:"canonical"`
			Error     bool    `json:"error"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	byFP := map[string]string{}
	byCanon := map[string]string{}
	for _, c := range doc.Cases {
		op := baseOp()
		op.Args = []any{json.RawMessage(c.Input)}
		fp, err := oncekey.Fingerprint(oncekey.Policy{}, op)
		if c.Error {
			require.Error(t, err, c.Name)
			continue
		}
		require.NoError(t, err, c.Name)
		if prev, ok := byFP[fp]; ok {
			require.Equal(t, prev, *c.Canonical, "%s: same fingerprint, different canonical value", c.Name)
		}
		if prev, ok := byCanon[*c.Canonical]; ok {
			require.Equal(t, prev, fp, "%s: same canonical value, different fingerprint", c.Name)
		}
		byFP[fp], byCanon[*c.Canonical] = *c.Canonical, fp
	}
	require.Greater(t, len(byCanon), 20)
}

func TestFingerprintRefusesUnencodable(t *testing.T) {
	t.Parallel()
	op := baseOp()
	op.Args = []any{map[string]any{"price": func() {}}}
	_, err := oncekey.Fingerprint(oncekey.Policy{}, op)
	require.Error(t, err)
	require.Contains(t, err.Error(), "CreateTicket")
	require.Contains(t, err.Error(), ".price")
}

// TestKeyedFingerprintPinned pins the keyed fingerprint: "k1_" and the hex HMAC-SHA-256 under the
// secret of the same canonical JSON the unkeyed fingerprint digests (checked here by
// recomputing both from that JSON). CHANGING IT IS A BREAKING CHANGE, like the unkeyed format.
func TestKeyedFingerprintPinned(t *testing.T) {
	op := oncekey.Operation{Tool: "T", Args: []any{map[string]any{"to": "alice@example.com", "amount": 10}}}
	p := oncekey.Policy{Version: "v1"}
	doc := []byte(`{"args":{"amount":10,"to":"alice@example.com"},"tool":"T","version":"v1"}`)
	sum := sha256.Sum256(doc)
	require.Equal(t, hex.EncodeToString(sum[:]), mustFingerprint(t, p, op), "the canonical JSON digested")
	secret := []byte("0123456789abcdef0123456789abcdef")
	mac := hmac.New(sha256.New, secret)
	mac.Write(doc)
	got, err := oncekey.KeyedFingerprint(p, op, secret)
	require.NoError(t, err)
	require.Equal(t, oncekey.KeyedFingerprintPrefix+hex.EncodeToString(mac.Sum(nil)), got)
	other, err := oncekey.KeyedFingerprint(p, op, []byte("another secret, also 32 bytes..."))
	require.NoError(t, err)
	require.NotEqual(t, got, other)
	none, err := oncekey.KeyedFingerprint(p, op, nil)
	require.NoError(t, err)
	require.Equal(t, mustFingerprint(t, p, op), none)
}

// A mismatch error prints no digest digits; across secrets it says so.
func TestFingerprintMismatchPrintsNoDigits(t *testing.T) {
	stored, got := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	msg := (&oncekey.FingerprintMismatchError{OperationKey: "ok1_k", Tool: "T", Stored: stored, Got: got}).Error()
	require.NotContains(t, msg, "abab")
	require.NotContains(t, msg, "cdcd")
	require.Contains(t, msg, "with different arguments")
	msg = (&oncekey.FingerprintMismatchError{OperationKey: "ok1_k", Tool: "T", Stored: stored, Got: oncekey.KeyedFingerprintPrefix + got}).Error()
	require.Contains(t, msg, "made without a fingerprint secret while this worker's is made with a fingerprint secret")
	require.NotContains(t, msg, "cdcd")
}

// TestWireNamesPinned pins the names oncekey sends across Temporal and Nexus. CHANGING ONE IS A
// BREAKING CHANGE (docs/compatibility.md): workers of two versions read each other's headers,
// and workflows match error types by name.
func TestWireNamesPinned(t *testing.T) {
	t.Parallel()
	for got, want := range map[string]string{
		wire.HeaderStepID:              "oncekey-step-id",
		wire.HeaderTenant:              "oncekey-tenant",
		wire.HeaderFirstActivityID:     "oncekey-first-activity-id",
		wire.HeaderArgs:                "oncekey-args",
		wire.HeaderCheck:               "oncekey-check",
		wire.HeaderBinding:             "oncekey-binding",
		wire.NexusHeaderKey:            "oncekey-key",
		oncekey.ErrTypeAsyncCompletion: "oncekey.AsyncCompletion",
		oncekey.ErrTypeUnboundHeaders:  "oncekey.UnboundHeaders",
	} {
		require.Equal(t, want, got)
	}
}

// standaloneOp is baseOp as a standalone activity: no workflow, the caller's activity ID.
func standaloneOp() oncekey.Operation {
	op := baseOp()
	op.WorkflowID, op.RunID, op.StepID = "", "", ""
	op.ActivityID, op.Standalone = "refund-order-1001", true
	return op
}

// TestKeyStandalone: a standalone activity's key is (namespace, tenant, activity ID, tool,
// material arguments), apart from every workflow's key, pinned like the others (changing a value
// here is a breaking change, see TestKeyFormatPinned).
func TestKeyStandalone(t *testing.T) {
	t.Parallel()
	op := standaloneOp()
	require.Equal(t, lengthPrefixed("default", "acme", "activity", "refund-order-1001", "CreateTicket", `{"priority":2,"subject":"Printer on fire","trace_id":"t-1"}`),
		mustKey(t, oncekey.Policy{}, op))
	require.Equal(t, lengthPrefixed("default", "acme", "activity args", "refund-order-1001", "CreateTicket", "priority", "2", "subject", `"Printer on fire"`),
		mustKey(t, oncekey.Policy{Key: oncekey.ArgsKey("subject", "priority")}, op))
	require.Equal(t, "ok1_4fb3cb6cdf0d00dbc9d868a6cc22cca0c90af696568701467226b6d19a44d019", mustKey(t, oncekey.Policy{}, op))
	require.Equal(t, "activity/refund-order-1001", op.Step())

	p := oncekey.Policy{Exclude: []string{"trace_id"}}
	again := op
	again.Args = []any{map[string]any{"subject": "Printer on fire", "priority": 2.0, "trace_id": "t-2"}}
	require.Equal(t, mustKey(t, p, op), mustKey(t, p, again), "the same call under the same activity ID")
	otherID := op
	otherID.ActivityID = "refund-order-1002"
	require.NotEqual(t, mustKey(t, p, op), mustKey(t, p, otherID), "the activity ID names the effect")
	otherArgs := op
	otherArgs.Args = []any{map[string]any{"subject": "Printer on fire", "priority": 3}}
	require.NotEqual(t, mustKey(t, p, op), mustKey(t, p, otherArgs), "other material arguments")

	// No workflow's call shares a standalone activity's key, whatever its IDs.
	wf := baseOp()
	wf.StepID, wf.WorkflowID = "", op.ActivityID
	require.NotEqual(t, mustKey(t, oncekey.Policy{}, op), mustKey(t, oncekey.Policy{}, wf))
	wf.StepID = op.ActivityID
	require.NotEqual(t, mustKey(t, oncekey.Policy{}, op), mustKey(t, oncekey.Policy{}, wf))

	empty := op
	empty.ActivityID = " "
	_, err := oncekey.Key(oncekey.Policy{}, empty)
	require.ErrorIs(t, err, oncekey.ErrNoKey)
}

// TestMarkedCanonicalArgs: an operation whose arguments document the interceptor marked canonical
// (argsdoc.MarkCanonical) has the identity the same operation has unmarked; one whose ArgsJSON is
// set again after the mark, to a document not in canonical form, is encoded again, so it has the
// identity of that document's canonical form.
func TestMarkedCanonicalArgs(t *testing.T) {
	t.Parallel()
	p := oncekey.Policy{Version: "v2", Exclude: []string{"trace_id"}}
	canon, err := oncekey.CanonicalArgs([]any{map[string]any{"subject": "Printer on fire", "priority": 2, "trace_id": "t-1"}})
	require.NoError(t, err)
	op := baseOp()
	op.StepID = ""
	op.ArgsJSON = canon
	want, err := oncekey.Identities(p, op, []byte("secret"))
	require.NoError(t, err)

	marked := op
	argsdoc.MarkCanonical(&marked)
	got, err := oncekey.Identities(p, marked, []byte("secret"))
	require.NoError(t, err)
	require.Equal(t, want, got)

	marked.ArgsJSON = json.RawMessage(` { "trace_id" : "t-1", "subject":"Printer on fire","priority":2.0 }`)
	got, err = oncekey.Identities(p, marked, []byte("secret"))
	require.NoError(t, err)
	require.Equal(t, want, got, "a document set after the mark is encoded again")
}
