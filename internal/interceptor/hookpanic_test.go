package interceptor_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
)

// panickyRequest decodes like TicketRequest, but its MarshalJSON panics: the workflow sends a
// TicketRequest, and the worker's tool decodes it into this type.
type panickyRequest struct {
	TicketRequest
}

func (panickyRequest) MarshalJSON() ([]byte, error) { panic("request encoder bug") }

// panickyTickets has a CreateTicket tool (the same activity name as downstream.CreateTicket)
// whose argument's MarshalJSON panics.
type panickyTickets struct{ ds *downstream }

func (p *panickyTickets) CreateTicket(ctx context.Context, in panickyRequest) (Ticket, error) {
	return p.ds.CreateTicket(ctx, in.TicketRequest)
}

// A panic in a user's code that runs before the claim (Policy.Authorize, an ExplicitKey function,
// an argument's MarshalJSON called by one) is a bad
// policy or key, like an error from the same code: the call fails once, non-retryably, with
// oncekey.Config naming the tool, the hook and the panic value; the tool never runs, nothing is
// claimed, and no reconciliation starts. It is not a Temporal PanicError, which Temporal retries.
func TestSuiteHookPanicBeforeClaimIsConfigError(t *testing.T) {
	hooks := []struct {
		name string
		// hook is what the error message names.
		hook  string
		panic string
		setup func(ds *downstream, p *oncekey.Policy, cfg *suiteConfig)
	}{
		{"authorize", "Policy.Authorize", "authorization service bug", func(ds *downstream, p *oncekey.Policy, cfg *suiteConfig) {
			p.Authorize = func(context.Context, oncekey.Operation) error { panic("authorization service bug") }
		}},
		{"explicit key", "Policy.Key", "key function bug", func(ds *downstream, p *oncekey.Policy, cfg *suiteConfig) {
			p.Key = oncekey.ExplicitKey(func(oncekey.Operation) (string, error) { panic("key function bug") })
		}},
		{"an argument marshalling the decoded input", "MarshalJSON", "request encoder bug", func(ds *downstream, p *oncekey.Policy, cfg *suiteConfig) {
			p.Key = oncekey.ExplicitKey(func(op oncekey.Operation) (string, error) {
				b, err := json.Marshal(op.Args[0])
				return string(b), err
			})
			cfg.ticketTool = (&panickyTickets{ds: ds}).CreateTicket
		}},
	}
	for _, h := range hooks {
		for _, eff := range []oncekey.Effect{oncekey.Idempotent, oncekey.Effectful} {
			t.Run(h.name+"/"+eff.String(), func(t *testing.T) {
				ds := newDownstream()
				p := oncekey.Policy{Effect: eff}
				var mu sync.Mutex
				var events []interceptor.Event
				cfg := suiteConfig{
					opts: func(o *interceptor.Options) {
						o.OnEvent = func(e interceptor.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
					},
				}
				h.setup(ds, &p, &cfg)
				s := setupSuiteWith(t, ds, p, cfg)
				w := watch(s)
				out := s.run(t, workflowInput{MaxAttempts: 3, Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})

				require.Equal(t, oncekey.ErrTypeConfig, out[0].Type, out[0].Err)
				for _, want := range []string{"CreateTicket", h.hook, "panicked", h.panic, "did not run"} {
					require.Contains(t, out[0].Detail, want)
				}
				require.Equal(t, oncekey.OutcomeFailed, out[0].Label)
				require.Equal(t, oncekey.NextStop, out[0].Next)
				require.Equal(t, 1, w.attempts, "a config error is not retried")
				_, bodies := ds.counts()
				require.Equal(t, 0, bodies, "the tool never ran")
				require.Empty(t, s.records(t), "nothing was claimed: no record, pending or other")
				require.Empty(t, w.children, "no reconciliation")
				mu.Lock()
				defer mu.Unlock()
				require.Len(t, events, 1)
				require.Equal(t, oncekey.OutcomeRejected, events[0].Outcome)
			})
		}
	}
}

// An Options.Tenant hook runs on the worker when the activity arrives without a tenant header
// (scheduled from a workflow without the interceptor): a panic in it is a configuration error
// too, before anything is claimed.
func TestActivityTenantHookPanicIsConfigError(t *testing.T) {
	ds := newDownstream()
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(ds.CreateTicket, oncekey.Policy{Effect: oncekey.Idempotent}))
	mem := memstore.New(nil)
	ic, err := interceptor.New(interceptor.Options{Store: mem, Registry: reg,
		Tenant: func(interceptor.TenantInfo) string { panic("tenant lookup bug") }})
	require.NoError(t, err)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{
		Interceptors: []tinterceptor.WorkerInterceptor{ic},
		// Under the race detector on a busy machine a workflow task of the test environment can
		// take longer than the SDK's default deadlock detection (1 s).
		DeadlockDetectionTimeout: time.Minute,
	})
	env.RegisterActivity(ds.CreateTicket)

	_, err = env.ExecuteActivity(ds.CreateTicket, req1)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%T: %v", err, err)
	require.Equal(t, oncekey.ErrTypeConfig, appErr.Type())
	require.True(t, appErr.NonRetryable())
	d, ok := oncekey.ErrorDetails(err)
	require.True(t, ok)
	for _, want := range []string{"CreateTicket", "Options.Tenant", "panicked", "tenant lookup bug", "did not run"} {
		require.Contains(t, d.Message, want)
	}
	_, bodies := ds.counts()
	require.Equal(t, 0, bodies)
	res, err := mem.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Empty(t, res.Records)
}
