package interceptor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.uber.org/mock/gomock"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storemock"
)

// A claim whose statement committed but whose response was lost is recognised when the
// interceptor repeats it with the same token: the body runs exactly once, in the same activity
// attempt, and the record ends applied rather than pending (and later unknown, waiting for a
// person).
func TestSuiteClaimResponseLostAfterCommit(t *testing.T) {
	for _, tc := range suiteStores {
		for _, eff := range []oncekey.Effect{oncekey.Effectful, oncekey.Idempotent} {
			t.Run(tc.name+"/"+eff.String(), func(t *testing.T) {
				ds := newDownstream()
				var (
					real  oncekeystore.Store
					first oncekeystore.ClaimParams
				)
				s := setupSuiteWith(t, ds, oncekey.Policy{Effect: eff, WaitInFlight: -1}, suiteConfig{
					store: func(mem oncekeystore.Store) oncekeystore.Store {
						real = tc.store(t, mem)
						return faultAt(t, real, func(m *storemock.Store) {
							// The first Claim commits on the real store, and its response is lost.
							m.EXPECT().Claim(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, p *oncekeystore.ClaimParams) (*oncekeystore.ClaimResult, error) {
								first = *p
								if _, err := real.Claim(ctx, p); err != nil {
									return nil, err
								}
								return nil, &oncekeystore.StoreUnavailableError{Op: "claim", Err: errors.New("read tcp 127.0.0.1:5432: connection reset by peer")}
							}).Times(1)
							// Exactly one repeat, with the first claim's token (Claim is not delegated).
							m.EXPECT().Claim(gomock.Any(), gomock.Cond(func(p *oncekeystore.ClaimParams) bool {
								return p.ClaimToken == first.ClaimToken
							})).DoAndReturn(real.Claim).Times(1)
						}, "Claim")
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
				require.NotZero(t, first.ClaimToken, "the repeat carried the first claim's token (the mock's matcher)")
				res, err := real.List(context.Background(), &oncekeystore.ListParams{})
				require.NoError(t, err)
				require.Len(t, res.Records, 1)
				require.Equal(t, oncekeystore.StatusApplied, res.Records[0].Status, "nothing is left pending or unknown")
				require.EqualValues(t, 1, res.Records[0].Epoch)
			})
		}
	}
}

// A store that stays unreachable is asked a bounded number of times with one token, and the
// attempt fails closed (store unavailable, retryable) without running the body.
func TestSuiteClaimRetryIsBounded(t *testing.T) {
	ds := newDownstream()
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{store: func(real oncekeystore.Store) oncekeystore.Store {
		// Each of the two attempts asks three times; Claim is not delegated, so a seventh fails the test.
		return unreachableClaims(t, real, 2*3, 0)
	}})
	out := s.run(t, workflowInput{MaxAttempts: 2, Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeStoreUnavailable, out[0].Type, out[0].Err)
	_, bodies := ds.counts()
	require.Equal(t, 0, bodies)
	require.Empty(t, s.records(t))
}
