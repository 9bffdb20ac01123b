package pgstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

// A claim whose body is still running when the record's retention ends (a long body, or a
// takeover of an old released record near the end of its retention) holds a live lease. Purge
// must not turn it into a tombstone under the running owner: the owner's Complete would then be
// refused, the effect it made would be lost from the record, and the key, now a tombstone, could
// no longer be resolved by anyone.
func TestAdversarialPurgeLeavesALiveClaimAlone(t *testing.T) {
	pool, s := setup(t)
	ctx := ctxT(t)
	p := &oncekeystore.ClaimParams{Tenant: "t1", OperationKey: "ok1_live", Tool: "CreateTicket", Fingerprint: "fp",
		WorkflowID: "wf", StepID: "create_ticket", Effect: oncekeystore.Effectful,
		Lease: time.Minute, Retention: 200 * time.Millisecond, Tombstone: time.Hour}
	res, err := s.Claim(ctx, p)
	require.NoError(t, err)
	require.True(t, res.Acquired)
	require.Eventually(t, func() bool {
		var past bool
		err := pool.QueryRow(ctx, `SELECT expires_at <= now() FROM oncekey_operations WHERE tenant = $1 AND operation_key = $2`,
			p.Tenant, p.OperationKey).Scan(&past)
		return err == nil && past
	}, 10*time.Second, 20*time.Millisecond)

	pr, err := s.Purge(ctx, &oncekeystore.PurgeParams{})
	require.NoError(t, err)
	require.Zero(t, pr.Tombstoned, "a record under a live lease is not purged")

	// The owner finishes: its result is recorded.
	rec, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: res.Record.Epoch,
		Status: oncekeystore.StatusApplied, Result: []byte("ticket T-1")})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)

	// Once settled, its retention counts from the settling, and it is purged as usual after it.
	require.True(t, rec.ExpiresAt.After(rec.UpdatedAt))
	require.Eventually(t, func() bool {
		pr, err = s.Purge(ctx, &oncekeystore.PurgeParams{})
		require.NoError(t, err)
		return pr.Tombstoned == 1
	}, 10*time.Second, 20*time.Millisecond)
	got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: p.Tenant, OperationKey: p.OperationKey})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusExpired, got.Status)
}
