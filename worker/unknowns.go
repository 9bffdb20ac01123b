package worker

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/metrics"
)

// DefaultUnknownsSampleInterval is how often the plugin samples the unknown records for
// metrics.UnknownsWaiting and metrics.UnknownOldestWait when
// interceptor.Options.UnknownsSampleInterval is 0.
const DefaultUnknownsSampleInterval = time.Minute

// maxSampled bounds how many unknown records one sample reads (in pages of 1000): past it the
// counts say "at least". Unknown records are the exceptions that wait for a person; many more
// than this is an incident whatever the exact number.
const maxSampled = 100_000

// unknownSeries is one gauge series: a tool, and the tenant when tenants are tagged.
type unknownSeries struct{ tool, tenant string }

// UnknownsSampler records how many records of a store are unknown and how long the oldest has
// waited, as the gauges metrics.UnknownsWaiting and metrics.UnknownOldestWait (seconds), tagged
// with the tool (and the tenant, with WithTenant). A tool whose unknowns were all settled is
// set to 0 on the next sample. The zero value is not usable: set Store and Handler.
type UnknownsSampler struct {
	Store   oncekey.Store
	Handler client.MetricsHandler
	// WithTenant adds the "tenant" tag (interceptor.Options.MetricsTenantTag).
	WithTenant bool

	mu   sync.Mutex
	seen map[unknownSeries]bool
}

// Sample reads the unknown records (Store.List with status unknown; at most 100,000) and
// updates the gauges. It returns the store's error, and updates nothing then.
func (u *UnknownsSampler) Sample(ctx context.Context) error {
	count := map[unknownSeries]float64{}
	oldest := map[unknownSeries]time.Time{}
	p := oncekey.ListParams{Status: oncekey.StatusUnknown, Limit: 1000}
	for n := 0; n < maxSampled; {
		res, err := u.Store.List(ctx, &p)
		if err != nil {
			return err
		}
		for _, r := range res.Records {
			k := unknownSeries{tool: r.Tool}
			if u.WithTenant {
				k.tenant = r.Tenant
			}
			count[k]++
			if o, ok := oldest[k]; !ok || r.UpdatedAt.Before(o) {
				oldest[k] = r.UpdatedAt
			}
		}
		n += len(res.Records)
		if res.Next == "" {
			break
		}
		p.Cursor = res.Next
	}
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen == nil {
		u.seen = map[unknownSeries]bool{}
	}
	for k := range count {
		u.seen[k] = true
	}
	for k := range u.seen {
		h := metrics.Tagged(u.Handler, k.tool, k.tenant, u.WithTenant)
		wait := 0.0
		if o, ok := oldest[k]; ok {
			wait = max(now.Sub(o).Seconds(), 0)
		}
		h.Gauge(metrics.UnknownsWaiting).Update(count[k])
		h.Gauge(metrics.UnknownOldestWait).Update(wait)
	}
	return nil
}

// Run samples at once and then every interval until ctx ends. A failed sample leaves the
// gauges as they were (they keep the last values read) and is tried again at the next tick.
func (u *UnknownsSampler) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, interval)
		_ = u.Sample(sctx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// samplerRun is the plugin's sampler: one per plugin, running while at least one of its workers
// runs.
type samplerRun struct {
	mu      sync.Mutex
	workers map[string]bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// start runs s for the worker instance key unless it already runs for another worker.
func (r *samplerRun) start(key string, s *UnknownsSampler, interval time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.workers == nil {
		r.workers = map[string]bool{}
	}
	r.workers[key] = true
	if r.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		s.Run(ctx, interval)
	}(r.done)
}

// stop ends the sampler once the last worker that started it stops.
func (r *samplerRun) stop(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.workers, key)
	if len(r.workers) > 0 || r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.cancel, r.done = nil, nil
}
