package systemtest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/dev/benchdrive"
	"github.com/oncekey/oncekey/internal/dev/devserver"
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

// TestBenchE2EEffectful measures 600 Effectful activities (one per workflow, 16 in parallel)
// through oncekey on Postgres against the same workflow on a worker without oncekey, in the same
// run: 12 rounds of 50 workflows a side, the two sides alternating which goes first, so both see
// the same machine. Latency is the p50 of every workflow's start-to-result time; throughput is
// the median of the rounds' rates (50 workflows over the round's wall time), so that one round
// slowed by something else on the machine does not decide the figure. It prints BENCH lines and,
// on standard error, the rounds' rates, oncekey's activity-side time per call and the events
// each side's workflow has in its history. It asserts nothing about speed and runs only with
// ONCEKEY_BENCH=1 (make bench).
func TestBenchE2EEffectful(t *testing.T) {
	if os.Getenv("ONCEKEY_BENCH") == "" {
		t.Skip("set ONCEKEY_BENCH=1 to run the end-to-end benchmark")
	}
	const rounds, per, conc = 12, 50, 16
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	// Start from a clean checkpoint, so that writes made before the benchmark (other stages of
	// make bench, other tests) are not flushed during it, slowing oncekey's commits and not the
	// baseline's. It needs the pg_checkpoint role (or a superuser); without it the run goes on.
	if _, err := pool.Exec(context.Background(), "CHECKPOINT"); err != nil {
		fmt.Fprintf(os.Stderr, "# CHECKPOINT before the end-to-end benchmark failed (%v); a checkpoint during it slows oncekey's side only\n", err)
	}
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
	var oursRate, baseRate []float64
	var oursCPU, baseCPU cpuUse
	for r := range rounds {
		// Alternate which side goes first.
		sides := []struct {
			s    *benchSide
			lat  *[]time.Duration
			rate *[]float64
			cpu  *cpuUse
			name string
		}{{ours, &oursLat, &oursRate, &oursCPU, "ours"}, {base, &baseLat, &baseRate, &baseCPU, "base"}}
		if r%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, sd := range sides {
			before := readCPU(false)
			l, w := sd.s.round(t, fmt.Sprintf("%s-r%d", sd.name, r), per, conc)
			sd.cpu.add(readCPU(true), before)
			*sd.lat = append(*sd.lat, l...)
			*sd.rate = append(*sd.rate, float64(per)/w.Seconds())
		}
	}
	require.EqualValues(t, rounds*per+20, ours.counter.n.Load(), "one effect per workflow")

	mu.Lock()
	fmt.Fprintf(os.Stderr, "# oncekey's activity side per call (medians of %d): %v in all, of which the claim's round trip %v; "+
		"the rest is the body, the completion's round trip and the interceptor's own work\n",
		len(calls), p50(calls).Round(time.Microsecond), p50(claims).Round(time.Microsecond))
	mu.Unlock()
	fmt.Fprintf(os.Stderr, "# rounds' rates (workflows/s), ours: %s; baseline: %s\n", rates(oursRate), rates(baseRate))
	n := float64(rounds * per)
	fmt.Fprintf(os.Stderr, "# CPU per workflow (ms; this test process, which runs both workers and clients / the dev server / every postgres process), ours: %s; baseline: %s\n",
		oursCPU.per(n), baseCPU.per(n))
	fmt.Fprintf(os.Stderr, "# history events per workflow, ours: %s; baseline: %s\n",
		historyEvents(t, ours.c, "ours-r0-0"), historyEvents(t, base.c, "base-r0-0"))
	op50, bp50 := p50(oursLat), p50(baseLat)
	othr, bthr := benchdrive.Median(oursRate), benchdrive.Median(baseRate)
	fmt.Printf("BENCH name=e2e_effectful_latency_p50 unit=s ours=%.4f baseline=%.4f speedup=%.3f baseline_is=%s\n",
		op50.Seconds(), bp50.Seconds(), bp50.Seconds()/op50.Seconds(), "same_workflow_without_oncekey")
	fmt.Printf("BENCH name=e2e_effectful_throughput unit=ops/s ours=%.1f baseline=%.1f speedup=%.3f baseline_is=%s\n",
		othr, bthr, othr/bthr, "same_workflow_without_oncekey")
}

// cpuUse is CPU time spent during a side's rounds: by this process (both workers and both
// clients; the other side's are idle then), by the dev server and by every postgres process.
type cpuUse struct{ self, temporal, postgres time.Duration }

// readCPU returns the CPU time spent so far (benchdrive.ProcessCPU: Linux only, 10 ms ticks,
// summed over 12 rounds of seconds each). This process's own is read after the other two at the
// start of a round (selfFirst false) and before them at its end, so that reading /proc is not
// counted in the round.
func readCPU(selfFirst bool) cpuUse {
	var c cpuUse
	if selfFirst {
		c.self = benchdrive.SelfCPU()
	}
	cpu := benchdrive.ProcessCPU(filepath.Base(devserver.Binary()), "postgres")
	c.temporal, c.postgres = cpu[0], cpu[1]
	if !selfFirst {
		c.self = benchdrive.SelfCPU()
	}
	return c
}

func (c *cpuUse) add(after, before cpuUse) {
	c.self += after.self - before.self
	c.temporal += after.temporal - before.temporal
	c.postgres += after.postgres - before.postgres
}

func (c cpuUse) per(n float64) string {
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / n }
	return fmt.Sprintf("%.2f / %.2f / %.2f (%.2f in all)", ms(c.self), ms(c.temporal), ms(c.postgres), ms(c.self+c.temporal+c.postgres))
}

func rates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(parts, " ")
}

// historyEvents returns the number of events in the history of workflow id and their types.
func historyEvents(t *testing.T, c client.Client, id string) string {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var types []string
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		types = append(types, strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_"))
	}
	return fmt.Sprintf("%d (%s)", len(types), strings.Join(types, ", "))
}
