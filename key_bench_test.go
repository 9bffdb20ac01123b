package oncekey_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/argsdoc"
)

// BenchmarkKey measures operation key derivation per strategy; allocs/op is the figure to watch
// (the interceptor derives a key on every claimed call).
func BenchmarkKey(b *testing.B) {
	explicit := oncekey.ExplicitKey(func(op oncekey.Operation) (string, error) { return "order-1001/refund", nil })
	for _, c := range []struct {
		name string
		p    oncekey.Policy
	}{
		{"step", oncekey.Policy{Key: oncekey.StepKey()}},
		{"args", oncekey.Policy{Key: oncekey.ArgsKey("subject", "priority")}},
		{"explicit", oncekey.Policy{Key: explicit}},
		{"call", oncekey.Policy{Key: oncekey.StepKey()}},
		{"call_exclude", oncekey.Policy{Key: oncekey.StepKey(), Exclude: []string{"trace_id"}}},
	} {
		op := baseOp()
		if strings.HasPrefix(c.name, "call") {
			// A call without a step ID, keyed from the arguments as the workflow scheduled them.
			op.StepID = ""
			op.ArgsJSON = json.RawMessage(`{"subject":"Printer on fire","priority":2,"trace_id":"t-1"}`)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := oncekey.Key(c.p, op); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFingerprint(b *testing.B) {
	for _, c := range []struct {
		name string
		p    oncekey.Policy
	}{
		{"plain", oncekey.Policy{Version: "v1"}},
		{"exclude", oncekey.Policy{Version: "v1", Exclude: []string{"trace_id"}}},
	} {
		op := baseOp()
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := oncekey.Fingerprint(c.p, op); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCallIdentity measures what the activity side derives from each claimed call's
// arguments before its claim: the arguments document made exact by the workflow's header
// (oncekey.ExactArgs), then the operation key and keyed fingerprint from it (oncekey.Identities),
// for a model's tool call given to one generic activity as a map, with and without a step ID.
func BenchmarkCallIdentity(b *testing.B) {
	var arg map[string]any
	if err := json.Unmarshal([]byte(`{"tool":"create_ticket","arguments":{"subject":"Printer on fire in building 4, third floor",`+
		`"priority":2,"assignee":"ops@example.com","tags":["hardware","urgent","fire"],`+
		`"body":"The printer next to the kitchen is smoking. Please send someone with an extinguisher and a replacement unit."}}`), &arg); err != nil {
		b.Fatal(err)
	}
	args := []any{arg}
	header, err := oncekey.CanonicalArgs(args)
	if err != nil {
		b.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	p := oncekey.Policy{Effect: oncekey.Effectful}
	for _, step := range []string{"", "turn-3/call-1"} {
		name := "no_step"
		if step != "" {
			name = "step"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				doc, err := oncekey.ExactArgs("ToolExecutor", args, header)
				if err != nil {
					b.Fatal(err)
				}
				op := oncekey.Operation{Namespace: "default", Tenant: "default", WorkflowID: "agent-1", RunID: "run-1", ActivityID: "5",
					StepID: step, Tool: "ToolExecutor", Args: args, ArgsJSON: doc}
				argsdoc.MarkCanonical(&op) // as the interceptor does: doc is canonical
				if _, err := oncekey.Identities(p, op, secret); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
