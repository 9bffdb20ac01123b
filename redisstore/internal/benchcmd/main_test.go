package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/dev/benchdrive"
	"github.com/oncekey/oncekey/redisstore"
)

// The floor runs the store's own scripts with the store's keys and arguments: a script that
// changes its KEYS or ARGV without the floor following fails here, not in make bench. It runs
// each loop briefly on the test Redis (TEST_REDIS_ADDR, default 127.0.0.1:6379) and deletes
// the keys it wrote.
func TestLoopsRunOnTheStoreScripts(t *testing.T) {
	addr := os.Getenv("TEST_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() }) // after the keys are deleted: cleanups run last first
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("required service missing (CI is set): redis at %s: %v", addr, err)
		}
		t.Skipf("service missing: redis at %s: %v", addr, err)
	}
	t.Cleanup(func() {
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
				t.Errorf("delete %q: %v", iter.Val(), err)
			}
		}
		if err := iter.Err(); err != nil {
			t.Errorf("scan %s: %v", prefix, err)
		}
	})
	s, err := redisstore.New(rdb, &redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	require.NoError(t, s.Check(ctx))
	require.NoError(t, benchdrive.SeedReplay(ctx, s))
	for name, run := range map[string]func() (float64, error){
		"ours claim+complete":  func() (float64, error) { return oursClaimComplete(ctx, s, 2, 100*time.Millisecond) },
		"floor claim+complete": func() (float64, error) { return floorClaimComplete(ctx, rdb, 2, 100*time.Millisecond) },
		"ours replay":          func() (float64, error) { return oursReplay(ctx, s, 2, 100*time.Millisecond) },
		"floor replay":         func() (float64, error) { return floorReplay(ctx, rdb, 2, 100*time.Millisecond) },
	} {
		ops, err := run()
		require.NoError(t, err, name)
		require.Positive(t, ops, name)
	}
}
