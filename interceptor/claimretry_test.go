package interceptor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/interceptor"
	"github.com/oncekey/oncekey/internal/testenv"
	"github.com/oncekey/oncekey/pgstore"
)

// lostClaimResponse commits the first lost Claims on the real store, then reports the store
// unreachable: the statement landed, its response did not.
type lostClaimResponse struct {
	oncekey.Store
	mu     sync.Mutex
	lose   int // lose the response of this many Claims
	claims []oncekey.ClaimParams
}

func (s *lostClaimResponse) Claim(ctx context.Context, p *oncekey.ClaimParams) (*oncekey.ClaimResult, error) {
	s.mu.Lock()
	s.claims = append(s.claims, *p)
	lose := s.lose > 0
	if lose {
		s.lose--
	}
	s.mu.Unlock()
	res, err := s.Store.Claim(ctx, p)
	if err != nil || !lose {
		return res, err
	}
	return nil, &oncekey.StoreUnavailableError{Op: "claim", Err: errors.New("read tcp 127.0.0.1:5432: connection reset by peer")}
}

// A claim whose statement committed but whose response was lost is recognised when the
// interceptor repeats it with the same token: the body runs exactly once, in the same activity
// attempt, and the record ends applied rather than pending (and later unknown, waiting for a
// person).
func TestSuiteClaimResponseLostAfterCommit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T, mem oncekey.Store) oncekey.Store
	}{
		{"memstore", func(t *testing.T, mem oncekey.Store) oncekey.Store { return mem }},
		{"pgstore", func(t *testing.T, _ oncekey.Store) oncekey.Store {
			if testing.Short() {
				t.Skip("needs Postgres")
			}
			pool := testenv.Postgres(t)
			require.NoError(t, pgstore.Migrate(context.Background(), pool))
			return pgstore.New(pool, nil)
		}},
	} {
		for _, eff := range []oncekey.Effect{oncekey.Effectful, oncekey.Idempotent} {
			t.Run(tc.name+"/"+eff.String(), func(t *testing.T) {
				ds := newDownstream()
				var real oncekey.Store
				var lc *lostClaimResponse
				s := setupSuiteWith(t, ds, oncekey.Policy{Effect: eff, WaitInFlight: -1}, suiteConfig{
					store: func(mem oncekey.Store) oncekey.Store {
						real = tc.store(t, mem)
						lc = &lostClaimResponse{Store: real, lose: 1}
						return lc
					},
					opts: func(o *interceptor.Options) { o.EscalationTimeout = time.Hour },
				})
				var attempts int
				s.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
					if info.ActivityType.Name == "CreateTicket" {
						attempts++
					}
				})
				out := s.run(t, workflowInput{MaxAttempts: 3, Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
				require.Empty(t, out[0].Err)
				require.Equal(t, "T-1", out[0].Ticket.ID)
				effects, bodies := ds.counts()
				require.Equal(t, 1, effects, "the downstream saw one effect")
				require.Equal(t, 1, bodies, "the body ran exactly once")
				require.Equal(t, 1, attempts, "the claim was repeated inside the attempt")
				require.Len(t, lc.claims, 2)
				require.NotZero(t, lc.claims[0].ClaimToken)
				require.Equal(t, lc.claims[0].ClaimToken, lc.claims[1].ClaimToken, "the repeat carries the same token")
				res, err := real.List(context.Background(), &oncekey.ListParams{})
				require.NoError(t, err)
				require.Len(t, res.Records, 1)
				require.Equal(t, oncekey.StatusApplied, res.Records[0].Status, "nothing is left pending or unknown")
				require.EqualValues(t, 1, res.Records[0].Epoch)
			})
		}
	}
}

// A store that stays unreachable is asked a bounded number of times with one token, and the
// attempt fails closed (store unavailable, retryable) without running the body.
func TestSuiteClaimRetryIsBounded(t *testing.T) {
	ds := newDownstream()
	var fs *faultStore
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{store: func(m oncekey.Store) oncekey.Store {
		fs = &faultStore{Store: m, claimErrs: 1000}
		return fs
	}})
	out := s.run(t, workflowInput{MaxAttempts: 2, Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeStoreUnavailable, out[0].Type, out[0].Err)
	_, bodies := ds.counts()
	require.Equal(t, 0, bodies)
	require.Equal(t, 2*3, fs.claims, "each of the two attempts asked three times")
	require.Empty(t, s.records(t))
}
