package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/redisstore/internal/lua"
)

var _ oncekeystore.StoreInspector = (*Store)(nil)

// inspectScan is how many index entries one inspection script looks at.
const inspectScan = 1000

// Stats implements oncekeystore.StoreInspector: it reads every record's tenant, tool, status and
// update time through the buckets' update-ordered indexes (the tenant's with tenant set), at
// most 1,000 entries per script, one script per bucket per round trip, and counts them. It is
// not one snapshot: a record updated while it counts may be counted twice or not at all.
func (s *Store) Stats(ctx context.Context, tenant string) ([]oncekeystore.StatsRow, error) {
	type group struct{ tenant, tool, status string }
	rows := map[group]*oncekeystore.StatsRow{}
	kind, index := "a", ":all"
	if tenant != "" {
		kind, index = "t", ":t:"+tenant
	}
	from := make([]string, len(s.bases))
	todo := make([]int, len(s.bases))
	for i := range s.bases {
		from[i], todo[i] = "-", i
	}
	for len(todo) > 0 {
		calls := make([]call, len(todo))
		for j, i := range todo {
			b := s.bases[i]
			calls[j] = call{lua.Count, []string{b + index}, []any{b + ":r:", kind, tenant, from[i], inspectScan}}
		}
		replies, err := s.runAll(ctx, "stats", calls)
		if err != nil {
			return nil, err
		}
		var again []int
		for j, v := range replies {
			i := todo[j]
			if len(v) < 2 || (len(v)-2)%4 != 0 {
				return nil, fmt.Errorf("redisstore: stats: reply of %d values", len(v))
			}
			if last := str(v[0]); last != "" {
				from[i] = "(" + last
			}
			if str(v[1]) != "1" {
				again = append(again, i)
			}
			for f := v[2:]; len(f) > 0; f = f[4:] {
				g := group{str(f[0]), str(f[1]), str(f[2])}
				us, err := strconv.ParseInt(str(f[3]), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("redisstore: stats: updated %q is not a number", str(f[3]))
				}
				r := rows[g]
				if r == nil {
					r = &oncekeystore.StatsRow{Tenant: g.tenant, Tool: g.tool, Status: oncekeystore.Status(g.status)}
					rows[g] = r
				}
				r.Count++
				if at := time.UnixMicro(us); r.OldestUpdate.IsZero() || at.Before(r.OldestUpdate) {
					r.OldestUpdate = at
				}
			}
		}
		todo = again
	}
	out := make([]oncekeystore.StatsRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		if a.Tool != b.Tool {
			return a.Tool < b.Tool
		}
		return a.Status < b.Status
	})
	return out, nil
}

// PurgePreview implements oncekeystore.StoreInspector: it reads the server's clock once and walks the
// due entries of each bucket's purge indexes (end of retention, end of the tombstone window,
// decided approvals by end of retention), judging each as Purge's scripts would at that time,
// at most 1,000 entries per script, one script per bucket per round trip.
func (s *Store) PurgePreview(ctx context.Context) (*oncekeystore.PurgePreview, error) {
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return nil, wrapErr("purge preview", "", err)
	}
	pv := &oncekeystore.PurgePreview{Now: now}
	nowUS := strconv.FormatInt(now.UnixMicro(), 10)
	for _, step := range []struct {
		index, base, kind string
		count             *int64
	}{{":exp", ":r:", "e", &pv.Tombstones}, {":tomb", ":r:", "t", &pv.Deletes}, {":apexp", ":ap:", "a", &pv.ApprovalDeletes}} {
		offset := make([]int64, len(s.bases))
		todo := make([]int, len(s.bases))
		for i := range todo {
			todo[i] = i
		}
		for len(todo) > 0 {
			calls := make([]call, len(todo))
			for j, i := range todo {
				b := s.bases[i]
				calls[j] = call{lua.Preview, []string{b + step.index}, []any{b + step.base, step.kind, nowUS, offset[i], inspectScan}}
			}
			replies, err := s.runAll(ctx, "purge preview", calls)
			if err != nil {
				return nil, err
			}
			var again []int
			for j, v := range replies {
				i := todo[j]
				if len(v) < 4 {
					return nil, fmt.Errorf("redisstore: purge preview: reply of %d values", len(v))
				}
				looked, _ := v[0].(int64)
				n, _ := v[1].(int64)
				unset, _ := v[2].(int64)
				*step.count += n
				pv.Unsettled += unset
				keepOldest(&pv.OldestUnsettled, v[3])
				if looked == inspectScan {
					offset[i] += looked
					again = append(again, i)
				}
			}
			todo = again
		}
	}
	// The grants due in gpurge, which PurgeGrants deletes as they are.
	pv.GrantDeletes, err = s.rdb.ZCount(ctx, lua.GrantIndex(s.prefix, "gpurge"), "-inf", nowUS).Result()
	if err != nil {
		return nil, wrapErr("purge preview", "", err)
	}
	return pv, nil
}
