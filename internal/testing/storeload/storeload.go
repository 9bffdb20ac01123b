// Package storeload drives a store with many concurrent clients, for the tests of the stores'
// coalesced paths (pgstore's and redisstore's Options.Coalesce).
package storeload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
)

// ClaimComplete runs clients goroutines that each claim and complete each new keys of tenant
// on s at once (after a common start), every fifth key also completed first at a stale epoch,
// which must be lost. It then reads every record back: each must be applied with its own key
// as its result.
func ClaimComplete(t *testing.T, s oncekeystore.Store, tenant string, clients, each int) {
	t.Helper()
	ctx := context.Background()
	key := func(c, i int) string { return fmt.Sprintf("ok1_load_%d_%d", c, i) }
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range each {
				k := key(c, i)
				res, err := s.Claim(ctx, &oncekeystore.ClaimParams{Tenant: tenant, OperationKey: k, Tool: "t", Fingerprint: "fp",
					Effect: oncekey.Effectful, Lease: 30e9, Retention: 3600e9, Tombstone: 3600e9})
				if err == nil && !res.Acquired {
					err = fmt.Errorf("claim of new key %s not acquired", k)
				}
				if err == nil && i%5 == 0 {
					if _, lerr := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: tenant, OperationKey: k, Epoch: res.Record.Epoch + 1,
						Status: oncekeystore.StatusApplied}); !errors.Is(lerr, oncekeystore.ErrLostClaim) {
						err = fmt.Errorf("complete of %s at a stale epoch: %v", k, lerr)
					}
				}
				if err == nil {
					_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: tenant, OperationKey: k, Epoch: res.Record.Epoch,
						Status: oncekeystore.StatusApplied, Result: []byte(k)})
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
			r, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key(c, i)})
			require.NoError(t, err)
			require.Equal(t, oncekeystore.StatusApplied, r.Status, key(c, i))
			require.Equal(t, key(c, i), string(r.Result))
		}
	}
}
