package oncekey_test

import (
	"crypto/sha256"
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

// BenchmarkHeaderBinding measures what okworker.Options.HeaderKeys adds to a claimed call on
// the activity worker: the digest of the arguments document and the binding's verification
// (two keys listed, the second making the binding, as while a key rotates); and on the workflow
// side, making the binding.
func BenchmarkHeaderBinding(b *testing.B) {
	doc := []byte(`{"arguments":{"assignee":"ops@example.com","body":"The printer next to the kitchen is smoking. Please send someone with an extinguisher and a replacement unit.",` +
		`"priority":2,"subject":"Printer on fire in building 4, third floor","tags":["hardware","urgent","fire"]},"tool":"create_ticket"}`)
	keys := []oncekey.HeaderKey{
		{ID: "old", Secret: []byte("0123456789abcdef0123456789abcdef")},
		{ID: "new", Secret: []byte("fedcba9876543210fedcba9876543210")},
	}
	s := oncekey.HeaderStatement{Namespace: "default", WorkflowID: "agent-session-7f3a", ActivityType: "create_ticket",
		Tenant: "acme", StepID: "turn-3/call-1", ArgsDigest: sha256.Sum256(doc)}
	binding := oncekey.BindHeaders(keys[1], &s)
	b.Run("verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v := s
			v.ArgsDigest = sha256.Sum256(doc)
			if err := oncekey.VerifyHeaderBinding(keys, &v, binding); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bind", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v := s
			v.ArgsDigest = sha256.Sum256(doc)
			_ = oncekey.BindHeaders(keys[0], &v)
		}
	})
}
