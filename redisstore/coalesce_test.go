package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/redisstore"
	"github.com/oncekey/oncekey/storetest"
)

// The conformance suite with every claim and fenced write sent in a pipeline.
func TestConformanceCoalescedPipelines(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oncekey.Store {
		s, _ := setup(t, &redisstore.Options{Coalesce: true})
		s.AlwaysCoalesce()
		return s
	})
}

// The conformance suite with Options.Coalesce as a user sets it.
func TestConformanceCoalesced(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oncekey.Store {
		s, _ := setup(t, &redisstore.Options{Coalesce: true})
		return s
	})
}

// Many concurrent claims and completions of new keys: every one acquired and stored, in fewer
// pipelines than calls, each with its own answer (a stale epoch's completion is lost, alone).
func TestCoalescedManyClients(t *testing.T) {
	s, _ := setup(t, &redisstore.Options{Coalesce: true})
	ctx := ctxT(t)
	const clients, each = 32, 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range each {
				key := fmt.Sprintf("ok1_m_%d_%d", c, i)
				res, err := s.Claim(ctx, &oncekey.ClaimParams{Tenant: "many", OperationKey: key, Tool: "t", Fingerprint: "fp",
					Effect: oncekey.Effectful, Lease: 30e9, Retention: 3600e9, Tombstone: 3600e9})
				if err == nil && !res.Acquired {
					err = fmt.Errorf("claim of new key %s not acquired", key)
				}
				if err == nil && i%5 == 0 {
					// A stale epoch: lost, whatever else is in its pipeline.
					if _, lerr := s.Complete(ctx, &oncekey.CompleteParams{Tenant: "many", OperationKey: key, Epoch: res.Record.Epoch + 1,
						Status: oncekey.StatusApplied}); !errors.Is(lerr, oncekey.ErrLostClaim) {
						err = fmt.Errorf("complete of %s at a stale epoch: %v", key, lerr)
					}
				}
				if err == nil {
					_, err = s.Complete(ctx, &oncekey.CompleteParams{Tenant: "many", OperationKey: key, Epoch: res.Record.Epoch,
						Status: oncekey.StatusApplied, Result: []byte(key)})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for c := range clients {
		for i := range each {
			key := fmt.Sprintf("ok1_m_%d_%d", c, i)
			r, err := s.Get(context.Background(), &oncekey.GetParams{Tenant: "many", OperationKey: key})
			require.NoError(t, err)
			require.Equal(t, oncekey.StatusApplied, r.Status, key)
			require.Equal(t, key, string(r.Result))
		}
	}
	cp, cc, fp, fc := s.CoalesceStats()
	t.Logf("claims: %d pipelines of %d calls; fenced writes: %d of %d", cp, cc, fp, fc)
	require.Greater(t, cc, cp, "no claims went together")
}
