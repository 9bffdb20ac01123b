package oncekeyotel_test

import (
	"go.opentelemetry.io/otel"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	tinterceptor "go.temporal.io/sdk/interceptor"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeyotel"
	okworker "github.com/oncekey/oncekey/worker"
)

// Spans for oncekey's claim, body and completion or replay, under the SDK's activity spans.
func Example() {
	store, reg := memstore.New(nil), oncekey.NewRegistry() // your store and registry

	// The SDK's tracing interceptor makes the workflow and activity spans; both use the
	// global tracer provider (otel.SetTracerProvider) unless told otherwise.
	sdkTracing, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{})
	if err != nil {
		panic(err)
	}
	plugin, err := okworker.NewPlugin(okworker.Options{
		Store:    store,
		Registry: reg,
		Tracer:   oncekeyotel.NewTracer(oncekeyotel.Options{TracerProvider: otel.GetTracerProvider()}),
	})
	if err != nil {
		panic(err)
	}
	opts := client.Options{
		Interceptors: []tinterceptor.ClientInterceptor{sdkTracing}, // before oncekey's: its spans are the parents
		Plugins:      []client.Plugin{plugin},
	}
	_ = opts // client.Dial(opts), then workers from that client as usual
}
