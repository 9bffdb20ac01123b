package systemtest_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/worker"
)

// benchCounter is the fake downstream of the benchmark: it counts its effects.
type benchCounter struct{ n atomic.Int64 }

func (b *benchCounter) BenchCharge(ctx context.Context, amount int) (int64, error) {
	return b.n.Add(1), nil
}

// BenchWorkflow makes one Effectful call with an explicit step ID.
func BenchWorkflow(ctx workflow.Context, amount int) (int64, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond},
	})
	var n int64
	err := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "charge"), "BenchCharge", amount).Get(ctx, &n)
	return n, err
}

type benchSide struct {
	c       client.Client
	tq      string
	counter *benchCounter
}

func benchWorker(t *testing.T, name string, plugins []client.Plugin) *benchSide {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalHostPort(t), Namespace: "default", Logger: quiet{}, Plugins: plugins})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s := &benchSide{c: c, tq: fmt.Sprintf("oncekey-bench-%s-%d", name, time.Now().UnixNano()), counter: &benchCounter{}}
	w := sdkworker.New(c, s.tq, sdkworker.Options{})
	w.RegisterWorkflow(BenchWorkflow)
	w.RegisterActivity(s.counter.BenchCharge)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return s
}

// round runs n workflows, conc at a time, and returns each one's start-to-result latency and the
// round's wall time.
func (s *benchSide) round(t *testing.T, prefix string, n, conc int) ([]time.Duration, time.Duration) {
	t.Helper()
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, conc)
	var failed atomic.Value
	start := time.Now()
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t0 := time.Now()
			run, err := s.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
				ID: fmt.Sprintf("%s-%d", prefix, i), TaskQueue: s.tq,
			}, BenchWorkflow, i)
			if err == nil {
				var out int64
				err = run.Get(context.Background(), &out)
			}
			if err != nil {
				failed.Store(err)
			}
			lat[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("bench workflow failed: %v", err)
	}
	return lat, time.Since(start)
}

func p50(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// TestBenchE2EEffectful measures 500 Effectful activities (one per workflow, 16 in parallel)
// through oncekey on Postgres against the same workflow on a worker without oncekey, in the same
// run, rounds interleaved so both see the same machine. It prints BENCH lines and asserts
// nothing about speed. It runs only with ONCEKEY_BENCH=1 (make bench).
func TestBenchE2EEffectful(t *testing.T) {
	if os.Getenv("ONCEKEY_BENCH") == "" {
		t.Skip("set ONCEKEY_BENCH=1 to run the end-to-end benchmark")
	}
	const total, rounds, conc = 500, 5, 16
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set("BenchCharge", oncekey.Policy{Effect: oncekey.Effectful}))
	// What oncekey's activity side adds to each call, for the account beside the figures: the
	// interception's whole time, and the claim's round trip within it.
	var mu sync.Mutex
	var calls, claims []time.Duration
	onEvent := func(e worker.Event) {
		mu.Lock()
		calls, claims = append(calls, e.Duration), append(claims, e.ClaimLatency)
		mu.Unlock()
	}
	plugin, err := worker.NewPlugin(worker.Options{Store: pgstore.New(pool, nil), Registry: reg, OnEvent: onEvent})
	require.NoError(t, err)
	ours := benchWorker(t, "ours", []client.Plugin{plugin})
	base := benchWorker(t, "baseline", nil)

	// Warm both paths up.
	ours.round(t, "warm-ours", 20, conc)
	base.round(t, "warm-base", 20, conc)

	var oursLat, baseLat []time.Duration
	var oursWall, baseWall time.Duration
	per := total / rounds
	for r := range rounds {
		// Alternate which side goes first.
		sides := []struct {
			s    *benchSide
			lat  *[]time.Duration
			wall *time.Duration
			name string
		}{{ours, &oursLat, &oursWall, "ours"}, {base, &baseLat, &baseWall, "base"}}
		if r%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, sd := range sides {
			l, w := sd.s.round(t, fmt.Sprintf("%s-r%d", sd.name, r), per, conc)
			*sd.lat = append(*sd.lat, l...)
			*sd.wall += w
		}
	}
	require.EqualValues(t, total+20, ours.counter.n.Load(), "one effect per workflow")

	mu.Lock()
	fmt.Fprintf(os.Stderr, "# oncekey's activity side per call (medians of %d): %v in all, of which the claim's round trip %v; "+
		"the rest is the body, the completion's round trip and the interceptor's own work\n",
		len(calls), p50(calls).Round(time.Microsecond), p50(claims).Round(time.Microsecond))
	mu.Unlock()
	op50, bp50 := p50(oursLat), p50(baseLat)
	othr := float64(total) / oursWall.Seconds()
	bthr := float64(total) / baseWall.Seconds()
	fmt.Printf("BENCH name=e2e_effectful_latency_p50 unit=s ours=%.4f baseline=%.4f speedup=%.3f baseline_is=%s\n",
		op50.Seconds(), bp50.Seconds(), bp50.Seconds()/op50.Seconds(), "same_workflow_without_oncekey")
	fmt.Printf("BENCH name=e2e_effectful_throughput unit=ops/s ours=%.1f baseline=%.1f speedup=%.3f baseline_is=%s\n",
		othr, bthr, othr/bthr, "same_workflow_without_oncekey")
}
