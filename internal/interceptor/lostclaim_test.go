package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storemock"
	"github.com/oncekey/oncekey/reconcile"
)

// delegate makes every call of m that no earlier expectation took go to real, except for the
// methods named in except: a call of one of those beyond its expectations fails the test, so
// their expectations count the calls exactly.
func delegate(m *storemock.Store, real oncekeystore.Store, except ...string) {
	on := func(method string) bool { return !slices.Contains(except, method) }
	if on("Claim") {
		m.EXPECT().Claim(gomock.Any(), gomock.Any()).DoAndReturn(real.Claim).AnyTimes()
	}
	if on("Renew") {
		m.EXPECT().Renew(gomock.Any(), gomock.Any()).DoAndReturn(real.Renew).AnyTimes()
	}
	if on("Complete") {
		m.EXPECT().Complete(gomock.Any(), gomock.Any()).DoAndReturn(real.Complete).AnyTimes()
	}
	if on("Release") {
		m.EXPECT().Release(gomock.Any(), gomock.Any()).DoAndReturn(real.Release).AnyTimes()
	}
	if on("MarkUnknown") {
		m.EXPECT().MarkUnknown(gomock.Any(), gomock.Any()).DoAndReturn(real.MarkUnknown).AnyTimes()
	}
	if on("Resolve") {
		m.EXPECT().Resolve(gomock.Any(), gomock.Any()).DoAndReturn(real.Resolve).AnyTimes()
	}
	if on("Get") {
		m.EXPECT().Get(gomock.Any(), gomock.Any()).DoAndReturn(real.Get).AnyTimes()
	}
	if on("List") {
		m.EXPECT().List(gomock.Any(), gomock.Any()).DoAndReturn(real.List).AnyTimes()
	}
	if on("Purge") {
		m.EXPECT().Purge(gomock.Any(), gomock.Any()).DoAndReturn(real.Purge).AnyTimes()
	}
	if on("Forget") {
		m.EXPECT().Forget(gomock.Any(), gomock.Any()).DoAndReturn(real.Forget).AnyTimes()
	}
}

// faultAt returns a mock of oncekeystore.Store in front of real: fault sets the exact-point faults on
// it, and every other call goes to real (but for the methods in except, see delegate).
func faultAt(t *testing.T, real oncekeystore.Store, fault func(m *storemock.Store), except ...string) oncekeystore.Store {
	t.Helper()
	m := storemock.NewStore(gomock.NewController(t))
	fault(m)
	delegate(m, real, except...)
	return m
}

// unreachable is the error of a store that cannot be reached during op.
func unreachable(op string) error {
	return &oncekeystore.StoreUnavailableError{Op: op, Err: errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")}
}

// lostClaimSuite runs one Idempotent CreateTicket call, without Temporal retries, on a store whose
// fault is set by fault on the mock before every other call is delegated to the memstore.
func lostClaimSuite(t *testing.T, ds *downstream, p oncekey.Policy, tool any, fault func(m *storemock.Store, real oncekeystore.Store)) (*suiteEnv, callResult) {
	t.Helper()
	s := setupSuiteWith(t, ds, p, suiteConfig{ticketTool: tool, store: func(real oncekeystore.Store) oncekeystore.Store {
		return faultAt(t, real, func(m *storemock.Store) { fault(m, real) })
	}})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}, MaxAttempts: 1})
	return s, out[0]
}

// A stale owner whose result write is fenced (another epoch took the record while it ran) gets
// the lost-claim error, not StoreUnavailable: the store answered.
func TestLostClaimOnCompleteIsItsOwnError(t *testing.T) {
	ds := newDownstream()
	_, r := lostClaimSuite(t, ds, oncekey.Policy{Effect: oncekey.Idempotent}, nil, func(m *storemock.Store, real oncekeystore.Store) {
		m.EXPECT().Complete(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, p *oncekeystore.CompleteParams) (*oncekeystore.Record, error) {
			// Another owner takes the record (here: a release, as after a takeover) before the write lands.
			if _, err := real.Release(ctx, &oncekeystore.ReleaseParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: p.Epoch}); err != nil {
				return nil, err
			}
			return real.Complete(ctx, p)
		}).Times(1)
	})
	require.Equal(t, oncekey.ErrTypeLostClaim, r.Type, r.Err)
	require.NotContains(t, r.Err, "store unavailable")
	require.Equal(t, oncekey.OutcomeInFlight, r.Label, "another attempt owns the operation now")
	effects, bodies := ds.counts()
	require.Equal(t, 1, bodies)
	require.Equal(t, 1, effects)
}

// The same when the lease renewer notices first: the body is stopped and the call gets the
// lost-claim error, not InFlight.
func TestLostClaimNoticedByTheRenewerIsItsOwnError(t *testing.T) {
	ds := newDownstream()
	slow := &stoppedTickets{started: make(chan struct{}, 1)}
	_, r := lostClaimSuite(t, ds, oncekey.Policy{Effect: oncekey.Idempotent, Lease: 300 * time.Millisecond}, slow.CreateTicket, func(m *storemock.Store, real oncekeystore.Store) {
		m.EXPECT().Renew(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, p *oncekeystore.RenewParams) (*oncekeystore.Record, error) {
			return nil, fmt.Errorf("memstore: renew %s at epoch %d: %w", p.OperationKey, p.Epoch, oncekeystore.ErrLostClaim)
		}).Times(1)
	})
	<-slow.started
	require.Equal(t, oncekey.ErrTypeLostClaim, r.Type, r.Err)
	require.Equal(t, oncekey.OutcomeInFlight, r.Label)
}

// stoppedTickets' CreateTicket runs until its context ends.
type stoppedTickets struct{ started chan struct{} }

func (s *stoppedTickets) CreateTicket(ctx context.Context, req TicketRequest) (Ticket, error) {
	s.started <- struct{}{}
	<-ctx.Done()
	return Ticket{}, ctx.Err()
}

// An Effectful result over Policy.MaxResultBytes leaves the record unknown with an owner at
// once: the reconciliation workflow starts and waits for a person (before, nothing owned the
// record until a repeat came), whose decision settles the call; the downstream saw one effect.
func TestOversizedEffectfulResultIsReconciledAtOnce(t *testing.T) {
	ds := newDownstream()
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful, MaxResultBytes: 16})
	resolveLater(t, s, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Failed, ResolvedBy: "dana", Note: "the ticket is too big to keep; closed it"}, func(st reconcile.StatusReport) {
		require.Contains(t, st.Reason, "over the 16-byte limit (Policy.MaxResultBytes)")
	})
	out := s.run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeFailed, out[0].Type, out[0].Err)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	rec := s.records(t)
	require.Len(t, rec, 1)
	require.Equal(t, oncekeystore.StatusFailed, rec[0].Status)
	require.Equal(t, "dana", rec[0].ResolvedBy)
}
