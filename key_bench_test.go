package oncekey_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oncekey/oncekey"
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
