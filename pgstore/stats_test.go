package pgstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

// PurgePreview must count exactly what the next Purge changes: records in every state, moved in
// time on the database clock by rewriting their windows.
func TestPurgePreviewMatchesPurge(t *testing.T) {
	t.Parallel()
	pool, s := setup(t)
	ctx := ctxT(t)
	mk := func(key string, eff oncekeystore.Effect, complete bool) {
		res, err := s.Claim(ctx, claimParams(key, eff))
		require.NoError(t, err)
		if complete {
			_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: key, Epoch: res.Record.Epoch, Status: oncekeystore.StatusApplied, Result: []byte("r")})
			require.NoError(t, err)
		}
	}
	at := func(key, set string) {
		_, err := pool.Exec(ctx, `UPDATE oncekey_operations SET `+set+` WHERE operation_key = $1`, key)
		require.NoError(t, err)
	}
	mk("ok1_fresh", oncekeystore.Effectful, true) // within retention: untouched
	mk("ok1_retired", oncekeystore.Effectful, true)
	at("ok1_retired", `expires_at = now() - interval '1 hour'`) // tombstoned
	mk("ok1_gone", oncekeystore.Effectful, true)
	at("ok1_gone", `expires_at = now() - interval '2 hours', tombstone_until = now() - interval '1 hour'`) // deleted directly
	mk("ok1_running", oncekeystore.Effectful, false)
	at("ok1_running", `expires_at = now() - interval '1 hour'`) // pending under a live lease: left to its owner
	mk("ok1_abandoned", oncekeystore.Idempotent, false)
	at("ok1_abandoned", `expires_at = now() - interval '1 hour', lease_until = now() - interval '1 minute', created_at = now() - interval '3 hours'`) // unsettled: left
	mk("ok1_unknown", oncekeystore.Effectful, false)
	at("ok1_unknown", `status = 'unknown', lease_until = NULL, expires_at = now() - interval '2 hours', tombstone_until = now() - interval '1 hour'`) // unsettled: never deleted
	mk("ok1_tomb", oncekeystore.Effectful, true)
	at("ok1_tomb", `status = 'expired', expires_at = now() - interval '1 hour'`) // a tombstone in its window: untouched
	mk("ok1_oldtomb", oncekeystore.Effectful, true)
	at("ok1_oldtomb", `status = 'expired', expires_at = now() - interval '2 hours', tombstone_until = now() - interval '1 second'`) // deleted

	pv, err := s.PurgePreview(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), pv.Tombstones)
	require.Equal(t, int64(2), pv.Deletes)
	require.Equal(t, int64(3), pv.Unsettled, "running, abandoned and unknown are left")
	require.WithinDuration(t, time.Now().Add(-3*time.Hour), pv.OldestUnsettled, time.Minute)
	require.WithinDuration(t, time.Now(), pv.Now, time.Minute)

	res, err := s.Purge(ctx, &oncekeystore.PurgeParams{BatchSize: 1})
	require.NoError(t, err)
	require.Equal(t, pv.Tombstones, res.Tombstoned)
	require.Equal(t, pv.Deletes, res.Deleted)
	require.Equal(t, pv.Unsettled, res.Unsettled)
	require.True(t, pv.OldestUnsettled.Equal(res.OldestUnsettled))
	for _, key := range []string{"ok1_running", "ok1_abandoned", "ok1_unknown"} {
		_, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: key})
		require.NoError(t, err, "%s is kept", key)
	}

	after, err := s.PurgePreview(ctx)
	require.NoError(t, err)
	require.Zero(t, after.Tombstones+after.Deletes, "nothing left to purge")
}

func TestStatsCountsByTenantToolStatus(t *testing.T) {
	t.Parallel()
	pool, s := setup(t)
	ctx := ctxT(t)
	for _, c := range []struct {
		tenant, key, tool string
		complete          bool
	}{
		{"acme", "ok1_a", "create_ticket", true},
		{"acme", "ok1_b", "create_ticket", true},
		{"acme", "ok1_c", "create_ticket", false},
		{"acme", "ok1_d", "send_email", true},
		{"zeta", "ok1_a", "create_ticket", true},
	} {
		p := claimParams(c.key, oncekeystore.Effectful)
		p.Tenant, p.Tool = c.tenant, c.tool
		res, err := s.Claim(ctx, p)
		require.NoError(t, err)
		if c.complete {
			_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: c.tenant, OperationKey: c.key, Epoch: res.Record.Epoch, Status: oncekeystore.StatusApplied})
			require.NoError(t, err)
		}
	}
	_, err := pool.Exec(ctx, `UPDATE oncekey_operations SET status = 'unknown', lease_until = NULL, updated_at = '2026-01-02T03:04:05Z' WHERE tenant = 'acme' AND operation_key = 'ok1_c'`)
	require.NoError(t, err)

	rows, err := s.Stats(ctx, "")
	require.NoError(t, err)
	type key struct {
		tenant, tool string
		status       oncekeystore.Status
	}
	got := map[key]int64{}
	for _, r := range rows {
		got[key{r.Tenant, r.Tool, r.Status}] = r.Count
		if r.Status == oncekeystore.StatusUnknown {
			require.True(t, r.OldestUpdate.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), "oldest update %s", r.OldestUpdate)
		}
	}
	require.Equal(t, map[key]int64{
		{"acme", "create_ticket", oncekeystore.StatusApplied}: 2,
		{"acme", "create_ticket", oncekeystore.StatusUnknown}: 1,
		{"acme", "send_email", oncekeystore.StatusApplied}:    1,
		{"zeta", "create_ticket", oncekeystore.StatusApplied}: 1,
	}, got)

	zeta, err := s.Stats(ctx, "zeta")
	require.NoError(t, err)
	require.Len(t, zeta, 1)
	require.Equal(t, int64(1), zeta[0].Count)
}
