// Package oncekeyotel gives oncekey's interceptor OpenTelemetry spans: one for the claim, the
// body and the completion or the replay of every claimed tool call, nested under the activity
// span of the Temporal SDK's tracing interceptor (go.temporal.io/sdk/contrib/opentelemetry),
// with the outcome, the tool and the operation key's prefix as attributes, never arguments or
// results.
//
// It is a module of its own so that the core module depends on no tracing library; it imports
// only the OpenTelemetry API (go.opentelemetry.io/otel/trace). Install it with
// okworker.Options.Tracer = oncekeyotel.NewTracer(oncekeyotel.Options{}), and put the SDK's
// tracing interceptor in client.Options.Interceptors (or before oncekey in
// worker.Options.Interceptors) so its activity span is the parent.
package oncekeyotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/temporal"

	okworker "github.com/oncekey/oncekey/worker"
)

// ScopeName is the instrumentation scope of oncekey's tracer.
const ScopeName = "github.com/oncekey/oncekey"

// Attribute keys of oncekey's spans.
const (
	AttrTool      = attribute.Key("oncekey.tool")
	AttrKeyPrefix = attribute.Key("oncekey.key_prefix")
	AttrEffect    = attribute.Key("oncekey.effect")
	AttrOutcome   = attribute.Key("oncekey.outcome")
)

// Options configure NewTracer. The zero value is usable.
type Options struct {
	// TracerProvider gives the tracer. Defaults to otel.GetTracerProvider(), the global one
	// (the SDK's tracing interceptor uses the same default).
	TracerProvider trace.TracerProvider
}

// NewTracer returns an okworker.Tracer that records oncekey's spans on OpenTelemetry.
func NewTracer(opts Options) okworker.Tracer {
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &tracer{t: tp.Tracer(ScopeName)}
}

type tracer struct{ t trace.Tracer }

var _ okworker.Tracer = (*tracer)(nil)

// Start implements okworker.Tracer.
func (t *tracer) Start(ctx context.Context, s okworker.SpanStart) (context.Context, func(okworker.SpanEnd)) {
	ctx, span := t.t.Start(ctx, s.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		AttrTool.String(s.Tool),
		AttrKeyPrefix.String(s.KeyPrefix),
		AttrEffect.String(s.Effect.String()),
	))
	return ctx, func(e okworker.SpanEnd) {
		if e.Outcome != "" {
			span.SetAttributes(AttrOutcome.String(string(e.Outcome)))
		}
		if e.Err != nil {
			// The error's type, not its text: a tool's error message may quote its arguments.
			span.SetStatus(codes.Error, errorType(e.Err))
		}
		span.End()
	}
}

// errorType names err for a span's status: the application error type (oncekey.Unknown,
// oncekey.FingerprintMismatch, the tool's own), else "error".
func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() != "" {
		return appErr.Type()
	}
	return "error"
}
