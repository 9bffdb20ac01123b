package interceptor

import (
	"sync"
	"time"

	"github.com/oncekey/oncekey"
)

// Bounds of the wait an in_flight answer asks for (InFlightError.RetryAfter, the model's
// retry_after_seconds).
const (
	minPollAfter = time.Second
	maxPollAfter = time.Minute
)

// durations keeps, per tool, how long its body took when it ran to an applied result on this
// worker: an exponentially weighted mean, in memory (a new worker starts without one).
type durations struct {
	mu sync.Mutex
	by map[string]time.Duration
}

// observe records one body's duration d for tool.
func (d *durations) observe(tool string, took time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.by == nil {
		d.by = map[string]time.Duration{}
	}
	if prev, ok := d.by[tool]; ok {
		took = (3*prev + took) / 4
	}
	d.by[tool] = took
}

// typical returns tool's mean duration, 0 when none was observed.
func (d *durations) typical(tool string) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.by[tool]
}

// pollAfter sizes the wait before asking again about an operation another attempt holds: what
// the tool usually takes on this worker (typical; 0 when unknown), else the policy's lease renewal
// interval (Lease/3, the longest the holder goes without proving it lives), never past the time
// the holder's lease has left (untilLease, when positive: then the store can give the claim to a
// new attempt), bounded to [minPollAfter, min(Lease, maxPollAfter)].
func pollAfter(p oncekey.Policy, typical, untilLease time.Duration) time.Duration {
	d := typical
	if d <= 0 {
		d = p.Lease / 3
	}
	if untilLease > 0 && untilLease < d {
		d = untilLease
	}
	upper := maxPollAfter
	if p.Lease > 0 && p.Lease < upper {
		upper = p.Lease
	}
	return max(min(d, upper), minPollAfter)
}
