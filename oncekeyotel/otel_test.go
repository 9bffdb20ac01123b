package oncekeyotel_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	tinterceptor "go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeyotel"
	"github.com/oncekey/oncekey/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type Request struct {
	Subject string `json:"subject"`
}

type Ticket struct {
	ID string `json:"id"`
}

// desk is the fake downstream: it counts the tickets it really created, and opens a span of its
// own inside the tool.
type desk struct {
	mu      sync.Mutex
	tickets int
	tracer  trace.Tracer
}

func (d *desk) CreateTicket(ctx context.Context, in Request) (Ticket, error) {
	_, span := d.tracer.Start(ctx, "desk.create")
	defer span.End()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tickets++
	return Ticket{ID: "TCK-secret-result"}, nil
}

// TwoCalls runs CreateTicket twice at one step: the second call is a replay.
func TwoCalls(ctx workflow.Context, in Request) ([]Ticket, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	ctx = oncekey.WithStepID(ctx, "create_ticket")
	var out []Ticket
	for range 2 {
		var t Ticket
		if err := workflow.ExecuteActivity(ctx, "CreateTicket", in).Get(ctx, &t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// On a dev server, with the SDK's OpenTelemetry tracing interceptor on the client and oncekey's
// tracer in the plugin: the claim, the body and the completion (then the claim and the replay)
// are spans under the SDK's activity spans, the tool's own span under the body, with tool, key
// prefix and outcome attributes and nothing of the arguments or the result.
func TestSpansNestUnderTheSDKsActivitySpans(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Temporal dev server")
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	sdkTracing, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tp.Tracer("temporal")})
	require.NoError(t, err)

	d := &desk{tracer: tp.Tracer("desk")}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(d.CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	plugin, err := worker.NewPlugin(worker.Options{Store: memstore.New(nil), Registry: reg, Tracer: oncekeyotel.NewTracer(oncekeyotel.Options{TracerProvider: tp})})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default",
		Interceptors: []tinterceptor.ClientInterceptor{sdkTracing}, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tq := "oncekeyotel-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{})
	w.RegisterWorkflow(TwoCalls)
	w.RegisterActivity(d.CreateTicket)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "otel-" + t.Name(), TaskQueue: tq}, TwoCalls, Request{Subject: "printer on fire"})
	require.NoError(t, err)
	var got []Ticket
	require.NoError(t, run.Get(ctx, &got))
	require.Len(t, got, 2)
	require.Equal(t, got[0], got[1])
	require.Equal(t, 1, d.tickets, "the downstream created one ticket")

	spans := exp.GetSpans()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}
	parent := func(s tracetest.SpanStub) string { return byID[s.Parent.SpanID()].Name }
	var seq []string
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "oncekey.") {
			seq = append(seq, parent(s)+" > "+s.Name)
			attrs := map[string]string{}
			for _, a := range s.Attributes {
				attrs[string(a.Key)] = a.Value.String()
				require.NotContains(t, a.Value.String(), "printer", "no argument in %s", s.Name)
				require.NotContains(t, a.Value.String(), "secret", "no result in %s", s.Name)
			}
			require.Equal(t, "CreateTicket", attrs["oncekey.tool"], s.Name)
			require.Len(t, attrs["oncekey.key_prefix"], 12, s.Name)
			require.True(t, strings.HasPrefix(attrs["oncekey.key_prefix"], oncekey.KeyPrefix))
			require.Equal(t, "effectful", attrs["oncekey.effect"])
			switch s.Name {
			case worker.SpanComplete:
				require.Equal(t, "applied", attrs["oncekey.outcome"])
			case worker.SpanReplay:
				require.Equal(t, "replayed", attrs["oncekey.outcome"])
			}
		}
		if s.Name == "desk.create" {
			require.Equal(t, worker.SpanBody, parent(s), "the tool's own span nests under the body")
		}
	}
	require.ElementsMatch(t, []string{
		"RunActivity:CreateTicket > oncekey.claim", "RunActivity:CreateTicket > oncekey.body", "RunActivity:CreateTicket > oncekey.complete",
		"RunActivity:CreateTicket > oncekey.claim", "RunActivity:CreateTicket > oncekey.replay",
	}, seq)
}
