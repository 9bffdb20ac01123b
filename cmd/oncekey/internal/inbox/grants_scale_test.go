package inbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/redisstore"
)

// The grants page reaches every active grant whatever ended before it: with 10,000 older ended
// grants (revoked and expired, of two tenants) and one active grant, the active one is on the
// first page for an all-tenants token and for a tenant-scoped one, and can be revoked there; the
// ended ones are listed apart, a page at a time, through the page's own next links. On memstore
// Postgres and Redis.
func TestGrantsPageReachesTheActiveGrant(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) oncekeystore.Store
	}{
		{"memstore", func(*testing.T) oncekeystore.Store { return memstore.New(nil) }},
		{"postgres", func(t *testing.T) oncekeystore.Store {
			pool := testenv.Postgres(t)
			require.NoError(t, pgstore.Migrate(context.Background(), pool))
			return pgstore.New(pool, nil)
		}},
		{"redis", redisStore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.store(t)
			gs := st.(oncekeystore.GrantStore)
			e := setup(t, func(o *Options) { o.Addr = "0.0.0.0:7780"; o.Store = st; withTokens(o) })
			ctx := context.Background()
			mk := func(tenant string, d time.Duration) (*oncekeystore.Grant, error) {
				return gs.CreateGrant(ctx, &oncekeystore.CreateGrantParams{Namespace: "default", Tenant: tenant, Tool: "IssueRefund",
					Rule: "amount_cents <= 100", CreatedBy: "ada", Reason: "small refunds", Duration: d})
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < 10000; i += 8 {
						tenant := []string{"acme", "globex"}[i%2]
						var err error
						if i%10 == 0 {
							var g *oncekeystore.Grant
							if g, err = mk(tenant, time.Hour); err == nil {
								_, err = gs.RevokeGrant(ctx, &oncekeystore.RevokeGrantParams{ID: g.ID, RevokedBy: "grace"})
							}
						} else {
							_, err = mk(tenant, time.Microsecond)
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			require.NoError(t, <-errs)
			active, err := mk("acme", time.Hour)
			require.NoError(t, err)
			rows := regexp.MustCompile(`data-grant="(g1_[0-9a-f]{32})"`)

			for _, tok := range []string{inesToken, acmeToken} {
				res, body := e.req("GET", "/grants", nil, bearer(tok))
				require.Equal(t, http.StatusOK, res.StatusCode, body)
				ids := rows.FindAllStringSubmatch(body, -1)
				require.Len(t, ids, 1, "the one active grant, no ended one")
				require.Equal(t, active.ID, ids[0][1])
				require.NotContains(t, body, "Next page")
				t.Logf("%s: the active grants page of %s is %d bytes", tc.name, strings.SplitN(tok, "-", 2)[0], len(body))
			}

			// The ended grants, apart: a tenant-scoped token pages through its tenant's 5,000 by
			// the page's next links, each grant once, none of another tenant.
			seen := map[string]bool{}
			link, pages := "/grants?show=ended", 0
			for link != "" {
				res, body := e.req("GET", link, nil, bearer(acmeToken))
				require.Equal(t, http.StatusOK, res.StatusCode, body)
				pages++
				for _, m := range rows.FindAllStringSubmatch(body, -1) {
					require.False(t, seen[m[1]], "listed twice: %s", m[1])
					seen[m[1]] = true
				}
				require.NotContains(t, body, "globex")
				require.NotContains(t, body, active.ID)
				link = ""
				if m := regexp.MustCompile(`<a href="([^"]+)">Next page`).FindStringSubmatch(body); m != nil {
					link = strings.ReplaceAll(m[1], "&amp;", "&")
					u, err := url.Parse(link)
					require.NoError(t, err)
					require.Equal(t, "acme", u.Query().Get("tenant"))
				}
			}
			require.Equal(t, 5000, len(seen), "every ended grant of acme, once")
			require.Equal(t, 50, pages)

			// Reachable, so revocable.
			cookie, csrf := e.session("/grants", bearer(acmeToken))
			res, body := e.req("POST", "/grants/revoke", url.Values{"grant": {active.ID}, "csrf": {csrf}}, both(bearer(acmeToken), withCookie(cookie)))
			require.Equal(t, http.StatusOK, res.StatusCode, body)
			g, err := gs.GetGrant(ctx, active.ID)
			require.NoError(t, err)
			require.Equal(t, oncekeystore.GrantRevoked, g.Status)
		})
	}
}

// redisStore is a redisstore (one bucket) on the test Redis under a key prefix of its own, whose
// keys are deleted in t.Cleanup. A missing Redis skips the test, or fails it when CI is set.
func redisStore(t *testing.T) oncekeystore.Store {
	addr := os.Getenv("TEST_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		testenv.Missing(t, "Redis at %s: %v", addr, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "oncekey-inbox-test-" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator() // the test's own keys
		var keys []string
		for iter.Next(ctx) {
			if keys = append(keys, iter.Val()); len(keys) == 500 {
				_ = rdb.Unlink(ctx, keys...).Err()
				keys = keys[:0]
			}
		}
		if len(keys) > 0 {
			_ = rdb.Unlink(ctx, keys...).Err()
		}
	})
	s, err := redisstore.New(rdb, &redisstore.Options{Prefix: prefix, Buckets: 1})
	require.NoError(t, err)
	return s
}
