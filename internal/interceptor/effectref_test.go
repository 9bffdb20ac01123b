package interceptor_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/oncekeystore"
)

// refTickets wraps the downstream's CreateTicket into a tool that records the downstream's ID
// for what it did as the effect reference: the ticket's ID, or the ID of the downstream's
// refusal. It keeps what SetEffectReference answered.
type refTickets struct {
	ds   *downstream
	mu   sync.Mutex
	errs []error
}

// refusalID is the ID the downstream gives a refusal (a Failed call).
const refusalID = "REFUSAL-7"

func (r *refTickets) CreateTicket(ctx context.Context, in TicketRequest) (Ticket, error) {
	t, err := r.ds.CreateTicket(ctx, in)
	ref := t.ID
	if oncekey.IsFailed(err) {
		ref = refusalID
	}
	r.set(ctx, ref)
	return t, err
}

// ReadCustomer is a ReadOnly tool that tries to record a reference.
func (r *refTickets) ReadCustomer(ctx context.Context, customer string) (string, error) {
	r.set(ctx, "customer:"+customer)
	return customer, nil
}

func (r *refTickets) set(ctx context.Context, ref string) {
	err := oncekey.SetEffectReference(ctx, ref)
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *refTickets) answers() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// A tool that records its effect reference gets it stored with the record; a repeat of the
// operation replays the stored result without running the tool, and the record keeps the
// reference.
func TestSuiteEffectReferenceStoredAndKeptOnReplay(t *testing.T) {
	for _, tc := range suiteStores {
		for _, eff := range []oncekey.Effect{oncekey.Effectful, oncekey.Idempotent} {
			t.Run(tc.name+"/"+eff.String(), func(t *testing.T) {
				ds := newDownstream()
				rt := &refTickets{ds: ds}
				var real oncekeystore.Store
				s := setupSuiteWith(t, ds, oncekey.Policy{Effect: eff}, suiteConfig{
					ticketTool: rt.CreateTicket,
					store: func(mem oncekeystore.Store) oncekeystore.Store {
						real = tc.store(t, mem)
						return real
					},
				})
				out := s.run(t, workflowInput{Calls: []stepCall{
					{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
					{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
				}})
				require.Empty(t, out[0].Err)
				require.Empty(t, out[1].Err)
				require.Equal(t, "T-1", out[0].Ticket.ID)
				require.Equal(t, out[0].Ticket, out[1].Ticket, "the repeat got the stored result")
				effects, bodies := ds.counts()
				require.Equal(t, 1, effects)
				require.Equal(t, 1, bodies, "the repeat did not run the tool")
				require.Equal(t, []error{nil}, rt.answers())
				res, err := real.List(context.Background(), &oncekeystore.ListParams{})
				require.NoError(t, err)
				require.Len(t, res.Records, 1)
				require.Equal(t, oncekeystore.StatusApplied, res.Records[0].Status)
				require.Equal(t, "T-1", res.Records[0].EffectReference, "the reference is stored and kept after the replay")
			})
		}
	}
}

// A tool that fails with Failed(err) after recording a reference (the downstream's ID for its
// refusal) gets the reference stored with the failed record, and the remembered failure is
// replayed without running the tool.
func TestSuiteEffectReferenceKeptWithFailed(t *testing.T) {
	ds := newDownstream(faultFailed)
	rt := &refTickets{ds: ds}
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful, RememberFailures: true}, suiteConfig{ticketTool: rt.CreateTicket})
	out := s.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Equal(t, oncekey.ErrTypeFailed, out[0].Type, out[0].Err)
	require.Equal(t, oncekey.ErrTypeFailed, out[1].Type, out[1].Err)
	effects, bodies := ds.counts()
	require.Equal(t, 0, effects)
	require.Equal(t, 1, bodies)
	recs := s.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, oncekeystore.StatusFailed, recs[0].Status)
	require.Equal(t, refusalID, recs[0].EffectReference)
}

// An Effectful call that ends unknown after recording a reference keeps it in the record's
// failure description, for whoever resolves the operation.
func TestSuiteEffectReferenceInUnknownFailure(t *testing.T) {
	ds := newDownstream()
	rt := &refTickets{ds: ds}
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful, Verify: func(context.Context, oncekey.Operation, any) error {
		return errors.New("ticket filed under the wrong queue")
	}}, suiteConfig{
		ticketTool: rt.CreateTicket,
		opts:       func(o *interceptor.Options) { o.EscalationTimeout = time.Hour },
	})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeIndeterminate, out[0].Type, out[0].Err)
	effects, _ := ds.counts()
	require.Equal(t, 1, effects)
	recs := s.records(t)
	require.Len(t, recs, 1)
	require.Equal(t, oncekeystore.StatusUnknown, recs[0].Status)
	var failure struct {
		Reason          string `json:"reason"`
		EffectReference string `json:"effect_reference"`
	}
	require.NoError(t, json.Unmarshal(recs[0].Failure, &failure))
	require.Contains(t, failure.Reason, "wrong queue")
	require.Equal(t, "T-1", failure.EffectReference)
}

// A ReadOnly tool is not claimed: SetEffectReference refuses with ErrNotClaimed and nothing is
// stored.
func TestSuiteEffectReferenceRefusedInReadOnlyTool(t *testing.T) {
	ds := newDownstream()
	rt := &refTickets{ds: ds}
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	require.NoError(t, s.reg.Set(rt.ReadCustomer, oncekey.Policy{Effect: oncekey.ReadOnly}))
	s.env.RegisterActivity(rt.ReadCustomer)
	out := s.run(t, workflowInput{Calls: []stepCall{{Tool: "ReadCustomer", Req: req1}}})
	require.Empty(t, out[0].Err)
	require.Equal(t, "acme", out[0].Text)
	errs := rt.answers()
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], oncekey.ErrNotClaimed)
	require.Empty(t, s.records(t))
}
