package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

// runInspectorIfImplemented runs the oncekeystore.StoreInspector subtests under "Inspector" when the
// stores newStore makes implement it, and skips them (saying so) otherwise.
func runInspectorIfImplemented(t *testing.T, newStore func(t *testing.T) oncekeystore.Store) {
	t.Run("Inspector", func(t *testing.T) {
		t.Parallel()
		if _, ok := newStore(t).(oncekeystore.StoreInspector); !ok {
			t.Skip("the store does not implement oncekeystore.StoreInspector: no inspection subtests")
		}
		for _, tc := range []struct {
			name string
			fn   func(t *testing.T, s oncekeystore.Store)
		}{
			{"StatsCountsByTenantToolStatus", testStats},
			{"PurgePreviewMatchesPurge", testPurgePreview},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, newStore(t))
			})
		}
	})
}

// testStats: Stats counts every record by tenant, tool and status, ordered so, with the oldest
// update of each group; a tenant counts its own records only.
func testStats(t *testing.T, s oncekeystore.Store) {
	in := s.(oncekeystore.StoreInspector)
	mk := func(tenant, tool string, st oncekeystore.Status) *oncekeystore.Record {
		p := params(oncekeystore.Effectful)
		p.Tenant, p.Tool = tenant, tool
		r := acquire(t, s, p)
		switch st {
		case oncekeystore.StatusApplied:
			r = complete(t, s, r, st, []byte("r"), nil)
		case oncekeystore.StatusUnknown:
			r = do(t, s.MarkUnknown, &oncekeystore.MarkUnknownParams{Tenant: tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
		}
		return r
	}
	first := mk("acme", "refund", oncekeystore.StatusUnknown)
	mk("acme", "refund", oncekeystore.StatusUnknown)
	mk("acme", "refund", oncekeystore.StatusApplied)
	mk("acme", "book", oncekeystore.StatusPending)
	mk("zeta", "refund", oncekeystore.StatusApplied)

	rows := do(t, in.Stats, "")
	type row struct {
		tenant, tool string
		st           oncekeystore.Status
		n            int64
	}
	var got []row
	for _, r := range rows {
		got = append(got, row{r.Tenant, r.Tool, r.Status, r.Count})
	}
	require.Equal(t, []row{
		{"acme", "book", oncekeystore.StatusPending, 1},
		{"acme", "refund", oncekeystore.StatusApplied, 1},
		{"acme", "refund", oncekeystore.StatusUnknown, 2},
		{"zeta", "refund", oncekeystore.StatusApplied, 1},
	}, got)
	require.True(t, rows[2].OldestUpdate.Equal(first.UpdatedAt), "oldest unknown updated %s, want %s", rows[2].OldestUpdate, first.UpdatedAt)

	zeta := do(t, in.Stats, "zeta")
	require.Len(t, zeta, 1)
	require.Equal(t, int64(1), zeta[0].Count)
	require.Empty(t, do(t, in.Stats, "nobody"))
}

// testPurgePreview: PurgePreview counts what the next Purge does, records, approvals and grants, and
// changes nothing.
func testPurgePreview(t *testing.T, s oncekeystore.Store) {
	in := s.(oncekeystore.StoreInspector)
	mk := func(retention, tombstone time.Duration, st oncekeystore.Status) {
		p := params(oncekeystore.Effectful)
		p.Retention, p.Tombstone = retention, tombstone
		r := acquire(t, s, p)
		switch st {
		case oncekeystore.StatusApplied:
			complete(t, s, r, st, []byte("r"), nil)
		case oncekeystore.StatusUnknown:
			do(t, s.MarkUnknown, &oncekeystore.MarkUnknownParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
		}
	}
	short := 200 * time.Millisecond
	mk(time.Hour, time.Hour, oncekeystore.StatusApplied) // within retention: untouched
	mk(short, time.Hour, oncekeystore.StatusApplied)     // tombstoned
	mk(short, time.Hour, oncekeystore.StatusApplied)     // tombstoned
	mk(short, short, oncekeystore.StatusApplied)         // past both windows: deleted
	mk(short, short, oncekeystore.StatusUnknown)         // unsettled: left
	mk(short, time.Hour, oncekeystore.StatusPending)     // unsettled (a live lease): left
	want := oncekeystore.PurgePreview{Tombstones: 2, Deletes: 1, Unsettled: 2}
	if as, ok := s.(oncekeystore.ApprovalStore); ok {
		for _, st := range []oncekeystore.ApprovalStatus{oncekeystore.ApprovalApproved, oncekeystore.ApprovalDenied} {
			d := decision(requestNew(t, as, approvalParams()), st)
			d.Retention = short
			do(t, as.DecideApproval, d)
		}
		requestNew(t, as, approvalParams()) // pending: never purged
		want.ApprovalDeletes = 2
	}
	if gs, ok := s.(oncekeystore.GrantStore); ok {
		p := grantParams(t)
		p.Duration, p.Retention = short, short
		do(t, gs.CreateGrant, p) // ended, past its retention: deleted
		p.Retention = time.Hour
		do(t, gs.CreateGrant, p) // ended, within its retention: kept
		want.GrantDeletes = 1
	}
	var pv *oncekeystore.PurgePreview
	require.Eventually(t, func() bool {
		pv = preview(t, in)
		return pv.Tombstones == want.Tombstones && pv.Deletes == want.Deletes && pv.Unsettled == want.Unsettled && pv.ApprovalDeletes == want.ApprovalDeletes &&
			pv.GrantDeletes == want.GrantDeletes
	}, waitFor, pollEvery, "the preview never counted %+v", want)
	require.WithinDuration(t, time.Now(), pv.Now, time.Minute)
	require.False(t, pv.OldestUnsettled.IsZero())
	again := preview(t, in)
	require.Equal(t, pv.Tombstones, again.Tombstones, "a preview changes nothing")

	res := do(t, s.Purge, &oncekeystore.PurgeParams{BatchSize: 1})
	require.Equal(t, pv.Tombstones, res.Tombstoned)
	require.Equal(t, pv.Deletes, res.Deleted)
	require.Equal(t, pv.Unsettled, res.Unsettled)
	require.Equal(t, pv.ApprovalDeletes, res.ApprovalsDeleted)
	require.Equal(t, pv.GrantDeletes, res.GrantsDeleted)
	require.True(t, pv.OldestUnsettled.Equal(res.OldestUnsettled), "oldest unsettled %s, purge says %s", pv.OldestUnsettled, res.OldestUnsettled)
	after := preview(t, in)
	require.Equal(t, oncekeystore.PurgePreview{Now: after.Now, Unsettled: 2, OldestUnsettled: after.OldestUnsettled}, *after, "nothing left but the unsettled records")
}

// preview returns what in's PurgePreview counts now, requiring no error.
func preview(t *testing.T, in oncekeystore.StoreInspector) *oncekeystore.PurgePreview {
	t.Helper()
	pv, err := in.PurgePreview(ctxT(t))
	require.NoError(t, err)
	return pv
}
