package worker

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/metrics"
	"github.com/oncekey/oncekey/oncekeystore"
)

// DefaultUnknownsSampleInterval is how often the plugin samples the unknown records for
// metrics.UnknownsWaiting and metrics.UnknownOldestWait when
// Options.UnknownsSampleInterval is 0.
const DefaultUnknownsSampleInterval = time.Minute

// maxSampled bounds how many unknown records one sample reads (in pages of 1000): past it the
// counts say "at least". Unknown records are the exceptions that wait for a person; many more
// than this is an incident whatever the exact number.
const maxSampled = 100_000

// unknownSeries is one gauge series: a tool, and the tenant when tenants are tagged.
type unknownSeries struct{ tool, tenant string }

// UnknownsSampler records what waits for a person in a store, as gauges tagged with the tool
// (and the tenant, with WithTenant): how many records are unknown and how long the oldest has
// waited (metrics.UnknownsWaiting, metrics.UnknownOldestWait, seconds) and, when the store is an
// oncekeystore.ApprovalStore, how many approvals are pending and how long the oldest has waited
// (metrics.ApprovalsWaiting, metrics.ApprovalOldestWait, seconds) and how many are near their
// deadline (metrics.ApprovalsNearDeadline); and, when the store is an
// oncekeystore.OutboxInspector (pgstore), what its outbox holds (metrics.OutboxPending,
// metrics.OutboxFailing, metrics.OutboxOldestPending, untagged). A tool whose unknowns or
// approvals were all settled is set to 0 on the next sample. The zero value is not usable: set
// Store and Handler.
type UnknownsSampler struct {
	Store   oncekeystore.Store
	Handler client.MetricsHandler
	// WithTenant adds the "tenant" tag (Options.MetricsTenantTag).
	WithTenant bool

	mu                  sync.Mutex
	seen, seenApprovals map[unknownSeries]bool
}

// waiting tallies what waits, per series: how many and since when the oldest.
type waiting struct {
	count  map[unknownSeries]float64
	oldest map[unknownSeries]time.Time
}

func (w *waiting) add(k unknownSeries, since time.Time) {
	if w.count == nil {
		w.count, w.oldest = map[unknownSeries]float64{}, map[unknownSeries]time.Time{}
	}
	w.count[k]++
	if o, ok := w.oldest[k]; !ok || since.Before(o) {
		w.oldest[k] = since
	}
}

func (u *UnknownsSampler) series(tool, tenant string) unknownSeries {
	k := unknownSeries{tool: tool}
	if u.WithTenant {
		k.tenant = tenant
	}
	return k
}

// Sample reads the unknown records (Store.List with status unknown) and, from an
// oncekeystore.ApprovalStore, the pending approvals (ListApprovals), at most 100,000 of each, and
// updates the gauges, then the outbox's from an oncekeystore.OutboxInspector. It returns the
// store's first error, and updates nothing then.
func (u *UnknownsSampler) Sample(ctx context.Context) error {
	var outbox *oncekeystore.OutboxStats
	if oi, ok := u.Store.(oncekeystore.OutboxInspector); ok {
		var err error
		if outbox, err = oi.OutboxStats(ctx); err != nil {
			return err
		}
	}
	var unknowns, approvals waiting
	near := map[unknownSeries]float64{}
	err := pages(func(cursor string) (int, string, error) {
		res, err := u.Store.List(ctx, &oncekeystore.ListParams{Status: oncekeystore.StatusUnknown, Limit: 1000, Cursor: cursor})
		if err != nil {
			return 0, "", err
		}
		for _, r := range res.Records {
			unknowns.add(u.series(r.Tool, r.Tenant), r.UpdatedAt)
		}
		return len(res.Records), res.Next, nil
	})
	if err != nil {
		return err
	}
	as, sampleApprovals := u.Store.(oncekeystore.ApprovalStore)
	if sampleApprovals {
		err := pages(func(cursor string) (int, string, error) {
			res, err := as.ListApprovals(ctx, &oncekeystore.ListApprovalsParams{Status: oncekeystore.ApprovalPending, Limit: 1000, Cursor: cursor})
			if err != nil {
				return 0, "", err
			}
			now := time.Now()
			for _, a := range res.Approvals {
				k := u.series(a.Tool, a.Tenant)
				approvals.add(k, a.RequestedAt)
				if a.NearDeadline(now) {
					near[k]++
				}
			}
			return len(res.Approvals), res.Next, nil
		})
		if err != nil {
			return err
		}
	}
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	if outbox != nil {
		oldest := 0.0
		if !outbox.OldestPending.IsZero() {
			oldest = max(now.Sub(outbox.OldestPending).Seconds(), 0)
		}
		u.Handler.Gauge(metrics.OutboxPending).Update(float64(outbox.Pending))
		u.Handler.Gauge(metrics.OutboxFailing).Update(float64(outbox.Failing))
		u.Handler.Gauge(metrics.OutboxOldestPending).Update(oldest)
	}
	u.seen = u.update(u.seen, unknowns, now, metrics.UnknownsWaiting, metrics.UnknownOldestWait)
	if sampleApprovals {
		u.seenApprovals = u.update(u.seenApprovals, approvals, now, metrics.ApprovalsWaiting, metrics.ApprovalOldestWait)
		for k := range u.seenApprovals {
			metrics.Tagged(u.Handler, k.tool, k.tenant, u.WithTenant).Gauge(metrics.ApprovalsNearDeadline).Update(near[k])
		}
	}
	return nil
}

// update sets the gauges count and oldestWait of every series in w, and of every series seen
// before (to 0 when nothing of it waits now), and returns the series seen so far.
func (u *UnknownsSampler) update(seen map[unknownSeries]bool, w waiting, now time.Time, count, oldestWait string) map[unknownSeries]bool {
	if seen == nil {
		seen = map[unknownSeries]bool{}
	}
	for k := range w.count {
		seen[k] = true
	}
	for k := range seen {
		h := metrics.Tagged(u.Handler, k.tool, k.tenant, u.WithTenant)
		wait := 0.0
		if o, ok := w.oldest[k]; ok {
			wait = max(now.Sub(o).Seconds(), 0)
		}
		h.Gauge(count).Update(w.count[k])
		h.Gauge(oldestWait).Update(wait)
	}
	return seen
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

// pages calls page with each cursor of a listing, starting from "", until it returns no next
// cursor or maxSampled items have been read; page returns how many items it read and the next
// cursor. It returns page's first error.
func pages(page func(cursor string) (n int, next string, err error)) error {
	cursor := ""
	for n := 0; n < maxSampled; {
		read, next, err := page(cursor)
		if err != nil {
			return err
		}
		n += read
		if next == "" {
			return nil
		}
		cursor = next
	}
	return nil
}
