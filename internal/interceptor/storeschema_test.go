package interceptor_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.uber.org/mock/gomock"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storemock"
	"github.com/oncekey/oncekey/pgstore"
)

// A real pgstore on a schema that was never migrated: the claim finds no table. That is a
// configuration mistake, not an outage: the tool fails at once, non-retryably, with the config
// error type and the store's message saying what to do; the body never runs; the claim is
// neither repeated inside the attempt nor re-scheduled; errors.As finds the
// *oncekeystore.StoreSchemaError in the error the interceptor returns; Label says failed/stop.
func TestSuiteStoreNotMigratedFailsAsConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	for _, eff := range []oncekey.Effect{oncekey.Effectful, oncekey.Idempotent} {
		t.Run(eff.String(), func(t *testing.T) {
			pool := testenv.Postgres(t)
			real := pgstore.New(pool, nil)
			// One Claim reaches Postgres and no more (Claim is not delegated): the claim is not
			// repeated as if the store were unreachable.
			cs := faultAt(t, real, func(m *storemock.Store) {
				m.EXPECT().Claim(gomock.Any(), gomock.Any()).DoAndReturn(real.Claim).Times(1)
			}, "Claim")
			var (
				mu     sync.Mutex
				events []interceptor.Event
			)
			ds := newDownstream()
			s := setupSuiteWith(t, ds, oncekey.Policy{Effect: eff}, suiteConfig{
				store: func(oncekeystore.Store) oncekeystore.Store { return cs },
				opts: func(o *interceptor.Options) {
					o.OnEvent = func(ev interceptor.Event) {
						mu.Lock()
						events = append(events, ev)
						mu.Unlock()
					}
				},
			})
			var attempts int
			s.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				if info.ActivityType.Name == "CreateTicket" {
					attempts++
				}
			})
			out := s.run(t, workflowInput{MaxAttempts: 5, Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})

			require.Equal(t, oncekey.ErrTypeConfig, out[0].Type, out[0].Err)
			require.Contains(t, out[0].Err, "retryable: false")
			require.Contains(t, out[0].Detail, "table oncekey_operations not found in the connection's search_path")
			require.Contains(t, out[0].Detail, "run pgstore.Migrate / pgstore.MigrateSchema (or `oncekey migrate [--schema S]`) on this database")
			require.Contains(t, out[0].Detail, "or set pgstore.Options.Schema to the schema you migrated")
			require.NotContains(t, out[0].Err, oncekey.ErrTypeStoreUnavailable)
			require.Equal(t, oncekey.OutcomeFailed, out[0].Label)
			require.Equal(t, oncekey.NextStop, out[0].Next)

			effects, bodies := ds.counts()
			require.Equal(t, 0, bodies, "the tool body never ran")
			require.Equal(t, 0, effects)
			require.Equal(t, 1, attempts, "not retried by Temporal nor re-scheduled by the workflow")

			mu.Lock()
			require.Len(t, events, 1)
			ev := events[0]
			mu.Unlock()
			require.Equal(t, oncekey.OutcomeFailed, ev.Outcome)
			var se *oncekeystore.StoreSchemaError
			require.ErrorAs(t, ev.Err, &se, "errors.As reaches the store's error through the interceptor's")
			require.Equal(t, "claim", se.Op)
			var su *oncekeystore.StoreUnavailableError
			require.False(t, errors.As(ev.Err, &su))
			tr := oncekey.Label(nil, ev.Err)
			require.Equal(t, oncekey.OutcomeFailed, tr.Status)
			require.Equal(t, oncekey.NextStop, tr.NextAction)
			require.False(t, tr.SafeToRepeat)

			// Nothing was left behind: once the schema is migrated, the store is empty.
			require.NoError(t, pgstore.Migrate(context.Background(), pool))
			res, err := real.List(context.Background(), &oncekeystore.ListParams{})
			require.NoError(t, err)
			require.Empty(t, res.Records)
		})
	}
}

// A connection pooler that refuses the pool's settings (*pgstore.PoolerError) is a store set up
// wrong too (errors.Is oncekeystore.ErrStoreConfig): the call fails at once as a configuration
// error naming the setting, the body never runs, and it is not reported as the store unavailable
// (which the workflow would retry for ever).
func TestSuitePoolerRefusalFailsAsConfig(t *testing.T) {
	real := memstore.New(nil)
	cs := faultAt(t, real, func(m *storemock.Store) {
		m.EXPECT().Claim(gomock.Any(), gomock.Any()).Return(nil, &pgstore.PoolerError{Setting: "statement_timeout",
			Err: errors.New("unsupported startup parameter: statement_timeout")}).Times(1)
	}, "Claim")
	ds := newDownstream()
	s := setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{
		store: func(oncekeystore.Store) oncekeystore.Store { return cs },
	})
	out := s.run(t, workflowInput{MaxAttempts: 5, Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
	require.Equal(t, oncekey.ErrTypeConfig, out[0].Type, out[0].Err)
	require.Contains(t, out[0].Err, "retryable: false")
	require.Contains(t, out[0].Detail, "refuses the startup parameter statement_timeout")
	require.Contains(t, out[0].Detail, "pgstore.NewPool")
	require.NotContains(t, out[0].Err, oncekey.ErrTypeStoreUnavailable)
	effects, bodies := ds.counts()
	require.Zero(t, bodies, "the tool body never ran")
	require.Zero(t, effects)
}
