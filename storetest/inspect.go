package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

// runInspectorIfImplemented runs the oncekey.StoreInspector subtests under "Inspector" when the
// stores newStore makes implement it, and skips them (saying so) otherwise.
func runInspectorIfImplemented(t *testing.T, newStore func(t *testing.T) oncekey.Store) {
	t.Run("Inspector", func(t *testing.T) {
		t.Parallel()
		if _, ok := newStore(t).(oncekey.StoreInspector); !ok {
			t.Skip("the store does not implement oncekey.StoreInspector: no inspection subtests")
		}
		for _, tc := range []struct {
			name string
			fn   func(t *testing.T, s oncekey.Store)
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
func testStats(t *testing.T, s oncekey.Store) {
	in := s.(oncekey.StoreInspector)
	mk := func(tenant, tool string, st oncekey.Status) *oncekey.Record {
		p := params(oncekey.Effectful)
		p.Tenant, p.Tool = tenant, tool
		r := acquire(t, s, p)
		switch st {
		case oncekey.StatusApplied:
			r = complete(t, s, r, st, []byte("r"), nil)
		case oncekey.StatusUnknown:
			r = do(t, s.MarkUnknown, &oncekey.MarkUnknownParams{Tenant: tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
		}
		return r
	}
	first := mk("acme", "refund", oncekey.StatusUnknown)
	mk("acme", "refund", oncekey.StatusUnknown)
	mk("acme", "refund", oncekey.StatusApplied)
	mk("acme", "book", oncekey.StatusPending)
	mk("zeta", "refund", oncekey.StatusApplied)

	rows := do(t, in.Stats, "")
	type row struct {
		tenant, tool string
		st           oncekey.Status
		n            int64
	}
	var got []row
	for _, r := range rows {
		got = append(got, row{r.Tenant, r.Tool, r.Status, r.Count})
	}
	require.Equal(t, []row{
		{"acme", "book", oncekey.StatusPending, 1},
		{"acme", "refund", oncekey.StatusApplied, 1},
		{"acme", "refund", oncekey.StatusUnknown, 2},
		{"zeta", "refund", oncekey.StatusApplied, 1},
	}, got)
	require.True(t, rows[2].OldestUpdate.Equal(first.UpdatedAt), "oldest unknown updated %s, want %s", rows[2].OldestUpdate, first.UpdatedAt)

	zeta := do(t, in.Stats, "zeta")
	require.Len(t, zeta, 1)
	require.Equal(t, int64(1), zeta[0].Count)
	require.Empty(t, do(t, in.Stats, "nobody"))
}

// testPurgePreview: PurgePreview counts what the next Purge does, records, approvals and grants, and
// changes nothing.
func testPurgePreview(t *testing.T, s oncekey.Store) {
	in := s.(oncekey.StoreInspector)
	mk := func(retention, tombstone time.Duration, st oncekey.Status) {
		p := params(oncekey.Effectful)
		p.Retention, p.Tombstone = retention, tombstone
		r := acquire(t, s, p)
		switch st {
		case oncekey.StatusApplied:
			complete(t, s, r, st, []byte("r"), nil)
		case oncekey.StatusUnknown:
			do(t, s.MarkUnknown, &oncekey.MarkUnknownParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: r.Epoch})
		}
	}
	short := 200 * time.Millisecond
	mk(time.Hour, time.Hour, oncekey.StatusApplied) // within retention: untouched
	mk(short, time.Hour, oncekey.StatusApplied)     // tombstoned
	mk(short, time.Hour, oncekey.StatusApplied)     // tombstoned
	mk(short, short, oncekey.StatusApplied)         // past both windows: deleted
	mk(short, short, oncekey.StatusUnknown)         // unsettled: left
	mk(short, time.Hour, oncekey.StatusPending)     // unsettled (a live lease): left
	want := oncekey.PurgePreview{Tombstones: 2, Deletes: 1, Unsettled: 2}
	if as, ok := s.(oncekey.ApprovalStore); ok {
		for _, st := range []oncekey.ApprovalStatus{oncekey.ApprovalApproved, oncekey.ApprovalDenied} {
			d := decision(requestNew(t, as, approvalParams()), st)
			d.Retention = short
			do(t, as.DecideApproval, d)
		}
		requestNew(t, as, approvalParams()) // pending: never purged
		want.ApprovalDeletes = 2
	}
	if gs, ok := s.(oncekey.GrantStore); ok {
		p := grantParams(t)
		p.Duration, p.Retention = short, short
		do(t, gs.CreateGrant, p) // ended, past its retention: deleted
		p.Retention = time.Hour
		do(t, gs.CreateGrant, p) // ended, within its retention: kept
		want.GrantDeletes = 1
	}
	var pv *oncekey.PurgePreview
	require.Eventually(t, func() bool {
		pv = preview(t, in)
		return pv.Tombstones == want.Tombstones && pv.Deletes == want.Deletes && pv.Unsettled == want.Unsettled && pv.ApprovalDeletes == want.ApprovalDeletes &&
			pv.GrantDeletes == want.GrantDeletes
	}, waitFor, pollEvery, "the preview never counted %+v", want)
	require.WithinDuration(t, time.Now(), pv.Now, time.Minute)
	require.False(t, pv.OldestUnsettled.IsZero())
	again := preview(t, in)
	require.Equal(t, pv.Tombstones, again.Tombstones, "a preview changes nothing")

	res := do(t, s.Purge, &oncekey.PurgeParams{BatchSize: 1})
	require.Equal(t, pv.Tombstones, res.Tombstoned)
	require.Equal(t, pv.Deletes, res.Deleted)
	require.Equal(t, pv.Unsettled, res.Unsettled)
	require.Equal(t, pv.ApprovalDeletes, res.ApprovalsDeleted)
	require.Equal(t, pv.GrantDeletes, res.GrantsDeleted)
	require.True(t, pv.OldestUnsettled.Equal(res.OldestUnsettled), "oldest unsettled %s, purge says %s", pv.OldestUnsettled, res.OldestUnsettled)
	after := preview(t, in)
	require.Equal(t, oncekey.PurgePreview{Now: after.Now, Unsettled: 2, OldestUnsettled: after.OldestUnsettled}, *after, "nothing left but the unsettled records")
}

// preview returns what in's PurgePreview counts now, requiring no error.
func preview(t *testing.T, in oncekey.StoreInspector) *oncekey.PurgePreview {
	t.Helper()
	pv, err := in.PurgePreview(ctxT(t))
	require.NoError(t, err)
	return pv
}
