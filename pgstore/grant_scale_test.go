package pgstore_test

import (
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// The worker's lookup of a scope's active grants (ListGrants of one namespace, tenant and tool,
// active) reads only that scope's active grants: with 20,000 grants of other scopes and ended
// grants of its own scope (revoked and expired), its plan scans oncekey_grants_active_idx and
// reads the one active grant, no row filtered out after being read.
func TestGrantLookupReadsItsScopeOnly(t *testing.T) {
	t.Parallel()
	pool, s := setup(t)
	ctx := ctxT(t)
	// 10,000 active grants of other tenants and tools, 5,000 revoked and 5,000 expired of the
	// looked-up scope, all older than its one active grant.
	_, err := pool.Exec(ctx, `INSERT INTO oncekey_grants (id, namespace, tenant, tool, created_by, created_at, expires_at, revoked_at, revoked_by, purge_at)
SELECT 'g1_' || lpad(i::text, 32, '0'), 'default',
    CASE WHEN i <= 10000 THEN 'tenant-' || (i % 100) ELSE 'acme' END,
    CASE WHEN i <= 10000 THEN 'tool-' || (i % 7) ELSE 'IssueRefund' END,
    'ada', now() - interval '2 days' + i * interval '1 millisecond',
    CASE WHEN i > 15000 THEN now() - interval '1 day' ELSE now() + interval '1 day' END,
    CASE WHEN i > 10000 AND i <= 15000 THEN now() - interval '1 day' END,
    CASE WHEN i > 10000 AND i <= 15000 THEN 'grace' ELSE '' END,
    now() + interval '30 days'
FROM generate_series(1, 20000) i`)
	require.NoError(t, err)
	active, err := s.CreateGrant(ctx, &oncekeystore.CreateGrantParams{Namespace: "default", Tenant: "acme", Tool: "IssueRefund",
		CreatedBy: "ada", Duration: time.Hour})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE oncekey_grants`)
	require.NoError(t, err)

	p := &oncekeystore.ListGrantsParams{Namespace: "default", Tenant: "acme", Tool: "IssueRefund", Status: oncekeystore.GrantActive, Limit: oncekeystore.MaxListLimit}
	res, err := s.ListGrants(ctx, p)
	require.NoError(t, err)
	require.Len(t, res.Grants, 1)
	require.Equal(t, active.ID, res.Grants[0].ID)

	q, args, err := pgstore.ListGrantsSQL(s, p)
	require.NoError(t, err)
	var out []byte
	require.NoError(t, pool.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+q, args...).Scan(&out))
	var plans []struct {
		Plan planNode
		Took float64 `json:"Execution Time"`
	}
	require.NoError(t, json.Unmarshal(out, &plans))
	var scans []planNode
	plans[0].Plan.walk(func(n planNode) {
		if n.Relation == "oncekey_grants" || n.Index != "" {
			scans = append(scans, n)
		}
	})
	indexes := 0
	for _, n := range scans {
		if n.Index != "" {
			indexes++
			require.Equal(t, "oncekey_grants_active_idx", n.Index, "the lookup reads the scope's active grants through its index: %s", out)
		} else {
			require.NotEqual(t, "Seq Scan", n.Type, "no scan of the table: %s", out)
		}
		require.LessOrEqual(t, n.Rows, 1.0, "rows read: the one active grant: %s", out)
		require.Zero(t, n.Filtered, "no row read and then dropped: %s", out)
	}
	require.Positive(t, indexes, "plan: %s", out)
	blocks := plans[0].Plan.HitBlocks + plans[0].Plan.ReadBlocks
	require.Less(t, blocks, int64(20), "buffers touched by the lookup: %s", out)

	// What the lookup takes, to report (not asserted: timings are the machine's).
	var took []time.Duration
	for range 200 {
		start := time.Now()
		_, err := s.ListGrants(ctx, p)
		require.NoError(t, err)
		took = append(took, time.Since(start))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("lookup with 20,001 grants: %d buffers, server execution %.3f ms; ListGrants round trip median %s, p99 %s",
		blocks, plans[0].Took, took[len(took)/2], took[len(took)*99/100])
}

// planNode is the part of an EXPLAIN (FORMAT JSON) node the lookup test reads.
type planNode struct {
	Type       string     `json:"Node Type"`
	Relation   string     `json:"Relation Name"`
	Index      string     `json:"Index Name"`
	Rows       float64    `json:"Actual Rows"`
	Filtered   float64    `json:"Rows Removed by Filter"`
	HitBlocks  int64      `json:"Shared Hit Blocks"`
	ReadBlocks int64      `json:"Shared Read Blocks"`
	Plans      []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}
