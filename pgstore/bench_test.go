package pgstore_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// benchClaim is the claim the benchmarks make; key varies.
func benchClaim(key string) *oncekeystore.ClaimParams {
	return &oncekeystore.ClaimParams{Tenant: "bench", OperationKey: key, Tool: "create_ticket", Version: "v1",
		Fingerprint: "3f8a1c0e9b7d6a5f4e3d2c1b0a99887766554433221100ffeeddccbbaa998877",
		WorkflowID:  "bench-workflow", StepID: "record_issue", Effect: oncekeystore.Effectful,
		Lease: 30 * time.Second, Retention: 7 * 24 * time.Hour, Tombstone: 30 * 24 * time.Hour}
}

// BenchmarkClaimComplete measures one acquired claim of a new key followed by its Complete, the
// store's work for every Effectful call that runs. The client-side cost (allocations, CPU) is
// what it shows; make bench compares throughput with pgbench.
func BenchmarkClaimComplete(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	result := []byte(`{"ticket":"T-1042","status":"open"}`)
	var n atomic.Int64
	b.ReportAllocs()
	defer reportCPU(b)()
	b.SetParallelism(8 / min(8, runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := "k" + strconv.FormatInt(n.Add(1), 10)
			c, err := s.Claim(ctx, benchClaim(key))
			if err != nil || !c.Acquired {
				b.Fatalf("claim %s: %v %+v", key, err, c)
			}
			if _, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "bench", OperationKey: key, Epoch: c.Record.Epoch,
				Status: oncekeystore.StatusApplied, Result: result, Failure: []byte{}, EffectReference: "T-1042"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReplay measures a claim that finds an applied record (a duplicate call replayed).
func BenchmarkReplay(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	result := []byte(`{"ticket":"T-1042","status":"open"}`)
	const keys = 100
	for i := range keys {
		key := "r" + strconv.Itoa(i)
		c, err := s.Claim(ctx, benchClaim(key))
		require.NoError(b, err)
		_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "bench", OperationKey: key, Epoch: c.Record.Epoch,
			Status: oncekeystore.StatusApplied, Result: result, Failure: []byte{}, EffectReference: "T-1042"})
		require.NoError(b, err)
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	b.SetParallelism(8 / min(8, runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := "r" + strconv.FormatInt(n.Add(1)%keys, 10)
			c, err := s.Claim(ctx, benchClaim(key))
			if err != nil || c.Acquired || c.Record.Status != oncekeystore.StatusApplied {
				b.Fatalf("replay %s: %v %+v", key, err, c)
			}
		}
	})
}

// benchStore returns a store on a fresh schema whose pool is set up as make bench sets up its
// own (pgstore.ConfigurePool, room for every client), so that the benchmark shows the client
// cost of the figures make bench compares, not waits for a connection.
func benchStore(b *testing.B) *pgstore.Store {
	url, _ := testenv.PostgresURL(b)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(b, err)
	cfg.MaxConns = 32
	pgstore.ConfigurePool(cfg, nil)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	require.NoError(b, pgstore.Migrate(context.Background(), pool))
	return pgstore.New(pool, nil)
}

// reportCPU reports this process's CPU time (user and system) per op as cpu-ns/op: the
// client's cost of a call, which throughput alone hides when client and server share cores.
// Call it after setup; run the returned function at the end.
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() {
		b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
