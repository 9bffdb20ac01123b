package interceptor_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/mock/gomock"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storemock"
)

// manualClock is a store clock that moves only when the test moves it, so a lease ends exactly
// when the test says and never on its own.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// flakyTicket is a Ticket whose encoding fails while its counter is positive, as a result does
// when the payload codec's key service is briefly unreachable.
type flakyTicket struct {
	Ticket
	fails *atomic.Int32
}

func (t flakyTicket) MarshalJSON() ([]byte, error) {
	if t.fails.Add(-1) >= 0 {
		return nil, errors.New("codec: key service unreachable")
	}
	return json.Marshal(t.Ticket)
}

// flakyTickets has a CreateTicket tool (the same activity name as downstream.CreateTicket) whose
// result does not encode the first fails times.
type flakyTickets struct {
	ds    *downstream
	fails atomic.Int32
}

func (f *flakyTickets) CreateTicket(ctx context.Context, in TicketRequest) (flakyTicket, error) {
	t, err := f.ds.CreateTicket(ctx, in)
	return flakyTicket{Ticket: t, fails: &f.fails}, err
}

// firstCall returns a Verify hook that calls first on its first call and accepts every later one.
func firstCall(first func() error) func(context.Context, oncekey.Operation, any) error {
	var calls atomic.Int32
	return func(context.Context, oncekey.Operation, any) error {
		if calls.Add(1) == 1 {
			return first()
		}
		return nil
	}
}

// suiteWatch counts the attempts of CreateTicket and the child workflows (reconciliations) the
// environment starts.
type suiteWatch struct {
	mu       sync.Mutex
	attempts int
	children []string
}

func watch(s *suiteEnv) *suiteWatch {
	w := &suiteWatch{}
	s.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "CreateTicket" {
			w.mu.Lock()
			w.attempts++
			w.mu.Unlock()
		}
	})
	s.env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
		w.mu.Lock()
		w.children = append(w.children, info.WorkflowType.Name)
		w.mu.Unlock()
	})
	return w
}

// An ending after the body ran that nobody can prove (a Verify rejection or panic, a result that
// does not encode, a Complete that cannot be written) is, for an Idempotent tool, a reason to
// give the claim back and run the body again, which lands the same state: the record ends
// applied and no reconciliation waits for it. For an Effectful tool the same ending stays
// unknown and goes to reconciliation.
func TestSuiteUnsettledEndings(t *testing.T) {
	endings := []struct {
		name string
		// firstErr is the error type the first attempt of the Idempotent tool fails with.
		firstErr string
		setup    func(ds *downstream, p *oncekey.Policy, cfg *suiteConfig)
	}{
		{"verify rejects", oncekey.ErrTypeUnsettled, func(ds *downstream, p *oncekey.Policy, cfg *suiteConfig) {
			p.Verify = firstCall(func() error { return errors.New("ticket filed under the wrong queue") })
		}},
		{"verify panics", oncekey.ErrTypeUnsettled, func(ds *downstream, p *oncekey.Policy, cfg *suiteConfig) {
			p.Verify = firstCall(func() error { panic("verify hook bug") })
		}},
		{"result does not encode", oncekey.ErrTypeUnsettled, func(ds *downstream, p *oncekey.Policy, cfg *suiteConfig) {
			f := &flakyTickets{ds: ds}
			f.fails.Store(1)
			cfg.ticketTool = f.CreateTicket
		}},
		{"complete fails", oncekey.ErrTypeStoreUnavailable, func(ds *downstream, p *oncekey.Policy, cfg *suiteConfig) {
			cfg.fault = func(m *storemock.Store) {
				m.EXPECT().Complete(gomock.Any(), gomock.Any()).Return(nil, unreachable("complete")).Times(1)
			}
		}},
	}
	for _, e := range endings {
		for _, eff := range []oncekey.Effect{oncekey.Idempotent, oncekey.Effectful} {
			t.Run(e.name+"/"+eff.String(), func(t *testing.T) {
				ds := newDownstream()
				ds.dedupe = true // the downstream lands the same state for the same key
				// The store's clock never moves: a claim left pending keeps a live lease, so only a
				// release lets the next attempt in.
				p := oncekey.Policy{Effect: eff, WaitInFlight: -1}
				var mu sync.Mutex
				var events []interceptor.Event
				cfg := suiteConfig{
					mem: &memstore.Options{Clock: newManualClock().Now},
					opts: func(o *interceptor.Options) {
						o.EscalationTimeout = time.Hour
						o.OnEvent = func(e interceptor.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
					},
				}
				e.setup(ds, &p, &cfg)
				s := setupSuiteWith(t, ds, p, cfg)
				w := watch(s)
				out := s.run(t, workflowInput{MaxAttempts: 3, Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
				effects, bodies := ds.counts()
				require.Equal(t, 1, effects, "the downstream holds one ticket")
				recs := s.records(t)
				require.Len(t, recs, 1)
				if eff == oncekey.Idempotent {
					require.Empty(t, out[0].Err)
					require.Equal(t, "T-1", out[0].Ticket.ID)
					require.Equal(t, 2, bodies, "Temporal's retry ran the body again")
					require.Equal(t, 2, w.attempts)
					require.Equal(t, oncekeystore.StatusApplied, recs[0].Status, "the record ends applied, not unknown")
					require.Empty(t, w.children, "no reconciliation for an Idempotent tool")
					require.Len(t, events, 2)
					require.Equal(t, e.firstErr, errType(events[0].Err), "the first attempt failed retryably: %v", events[0].Err)
					require.Equal(t, oncekey.OutcomeFailed, events[0].Outcome)
					require.Equal(t, oncekey.OutcomeApplied, events[1].Outcome)
					return
				}
				require.Equal(t, oncekey.ErrTypeIndeterminate, out[0].Type, out[0].Err)
				require.Equal(t, 1, bodies, "an Effectful body is never run again blindly")
				require.Equal(t, oncekeystore.StatusUnknown, recs[0].Status)
				require.Len(t, w.children, 1, "the unknown went to reconciliation")
			})
		}
	}
}

// A Verify hook that rejects every result of an Idempotent tool ends, once the retry policy is
// spent, in a retryable oncekey.Unsettled error with the record released: free for the next
// call, never unknown.
func TestSuiteIdempotentVerifyAlwaysRejects(t *testing.T) {
	ds := newDownstream()
	ds.dedupe = true
	p := oncekey.Policy{Effect: oncekey.Idempotent, Verify: func(context.Context, oncekey.Operation, any) error {
		return errors.New("ticket filed under the wrong queue")
	}}
	s := setupSuite(t, ds, p)
	w := watch(s)
	out := s.run(t, workflowInput{MaxAttempts: 2, Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeUnsettled, out[0].Type, out[0].Err)
	require.Contains(t, out[0].Detail, "wrong queue")
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 2, bodies, "each attempt ran the body")
	recs := s.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, oncekeystore.StatusReleased, recs[0].Status)
	require.Empty(t, w.children)
}

// When an Idempotent tool's result cannot be recorded and the release cannot be written either
// (the store is unreachable), the record stays pending under its lease; once the lease has run
// out the next attempt takes it over, runs the body again and records it applied.
func TestSuiteIdempotentCompleteAndReleaseFailTakenOverAfterLease(t *testing.T) {
	ds := newDownstream()
	ds.dedupe = true
	clock := newManualClock()
	p := oncekey.Policy{Effect: oncekey.Idempotent, WaitInFlight: -1}
	s := setupSuiteWith(t, ds, p, suiteConfig{
		mem: &memstore.Options{Clock: clock.Now},
		store: func(real oncekeystore.Store) oncekeystore.Store {
			return faultAt(t, real, func(m *storemock.Store) {
				m.EXPECT().Complete(gomock.Any(), gomock.Any()).Return(nil, unreachable("complete")).Times(1)
				// The first attempt tries to give the claim back three times, and no more (Release is
				// not delegated); after the last failure the lease runs out.
				m.EXPECT().Release(gomock.Any(), gomock.Any()).Return(nil, unreachable("release")).Times(2)
				m.EXPECT().Release(gomock.Any(), gomock.Any()).DoAndReturn(func(context.Context, *oncekeystore.ReleaseParams) (*oncekeystore.Record, error) {
					clock.advance(oncekey.DefaultLease + time.Second)
					return nil, unreachable("release")
				}).Times(1)
			}, "Release")
		},
	})
	w := watch(s)
	out := s.run(t, workflowInput{MaxAttempts: 3, Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	require.Equal(t, "T-1", out[0].Ticket.ID)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 2, bodies)
	require.Equal(t, 2, w.attempts)
	recs := s.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, oncekeystore.StatusApplied, recs[0].Status, "taken over after the lease, never stuck")
	require.EqualValues(t, 2, recs[0].Epoch, "the second attempt took the record over")
	require.Empty(t, w.children)
}
