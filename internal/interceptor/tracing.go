package interceptor

import (
	"context"

	"github.com/oncekey/oncekey"
)

// Span names of a claimed call, given to Options.Tracer.
const (
	// SpanClaim covers the Store.Claim round trips of the call.
	SpanClaim = "oncekey.claim"
	// SpanReplay covers answering from an existing record: a replay of a stored result, a
	// refusal (fingerprint mismatch, tombstone, unknown) or waiting for an attempt in flight.
	SpanReplay = "oncekey.replay"
	// SpanBody covers the tool's body; the tool's own spans nest under it.
	SpanBody = "oncekey.body"
	// SpanComplete covers recording what the body did: the result, a release or an unknown.
	SpanComplete = "oncekey.complete"
)

// SpanStart describes a span oncekey starts. It never carries arguments or results.
type SpanStart struct {
	// Name is one of SpanClaim, SpanReplay, SpanBody, SpanComplete.
	Name string
	Tool string
	// KeyPrefix is the first 12 characters of the operation key.
	KeyPrefix string
	Effect    oncekey.Effect
}

// SpanEnd is how a span ended.
type SpanEnd struct {
	// Outcome is the call's outcome label so far ("" while it is not known, as after a claim
	// that acquired the key).
	Outcome oncekey.Outcome
	// Err is the span's error, nil on success.
	Err error
}

// Tracer starts oncekey's spans of a claimed call, as children of the span in ctx (the SDK's
// activity span when a tracing interceptor runs before oncekey's). Start returns the context
// the phase runs in and the function that ends the span. Package
// github.com/oncekey/oncekey/oncekeyotel implements it on OpenTelemetry; the core module
// depends on no tracing library.
type Tracer interface {
	Start(ctx context.Context, s SpanStart) (context.Context, func(SpanEnd))
}

// span starts the named span of c, or does nothing without a Tracer.
func (c *call) span(ctx context.Context, name string) (context.Context, func(error)) {
	t := c.root.opts.Tracer
	if t == nil {
		return ctx, func(error) {}
	}
	sctx, end := t.Start(ctx, SpanStart{Name: name, Tool: c.tool, KeyPrefix: keyPrefix(c.key), Effect: c.policy.Effect})
	return sctx, func(err error) { end(SpanEnd{Outcome: c.outcome, Err: err}) }
}
