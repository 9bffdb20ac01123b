package interceptor

import (
	"context"
	"slices"
	"sync"
	"time"

	tinterceptor "go.temporal.io/sdk/interceptor"
)

// heartbeats is what one attempt's activity outbound interceptor keeps of the user's heartbeats
// (activity.RecordHeartbeat), so that the heartbeats oncekey sends while a claimed body runs
// repeat the user's latest details instead of overwriting them. Temporal delivers a pause
// (`temporal activity pause`), a reset and a cancellation to a running activity only in a
// heartbeat's answer, so a body that never heartbeats itself would never be told.
type heartbeats struct {
	// next is the outbound interceptor below oncekey's; oncekey's own heartbeats go there.
	next tinterceptor.ActivityOutboundInterceptor

	mu sync.Mutex
	// sent: the user heartbeated in this attempt; details are the values of the latest call.
	sent    bool
	details []any
	// since: the user heartbeated since oncekey's last tick.
	since bool
}

// activityOutbound passes the user's heartbeats on and remembers them in hb.
type activityOutbound struct {
	tinterceptor.ActivityOutboundInterceptorBase
	hb *heartbeats
}

var _ tinterceptor.ActivityOutboundInterceptor = (*activityOutbound)(nil)

// RecordHeartbeat remembers details as the attempt's latest and sends them on. The lock is held
// while the SDK takes them, so a heartbeat oncekey repeats never lands after a newer one of the
// user's.
func (o *activityOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	h := o.hb
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent, h.since, h.details = true, true, slices.Clone(details)
	o.Next.RecordHeartbeat(ctx, details...)
}

// tick sends a heartbeat for the body unless the user sent one since the last tick. It repeats
// the user's latest details (the values given to activity.RecordHeartbeat, encoded again, so a
// pointer gives its current contents). When the user has not heartbeated in this attempt it
// sends a heartbeat without details, unless the attempt started with an earlier attempt's
// details (activity.HasHeartbeatDetails): a heartbeat would clear those, so it sends nothing
// until the user's first heartbeat.
func (h *heartbeats) tick(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since {
		h.since = false
		return
	}
	if !h.sent && h.next.HasHeartbeatDetails(ctx) {
		return
	}
	h.next.RecordHeartbeat(ctx, h.details...)
}

// bodyHeartbeatInterval is how often oncekey heartbeats for a body: with the lease renewal
// (Lease/3), or every half of the activity's HeartbeatTimeout when that is shorter, so that the
// heartbeats keep the attempt alive. The SDK sends at most one heartbeat per throttle interval
// (0.8 × HeartbeatTimeout; without one, worker.Options.DefaultHeartbeatThrottleInterval, 30 s by
// default, at most MaxHeartbeatThrottleInterval, 60 s) and sends the latest details of a window
// when it ends, so ticks more frequent than that are coalesced, never lost.
func (c *call) bodyHeartbeatInterval() time.Duration {
	every := c.policy.Lease / 3
	if half := c.info.HeartbeatTimeout / 2; half > 0 && half < every {
		every = half
	}
	return every
}

// heartbeatForBody heartbeats for the body (heartbeats.tick) every bodyHeartbeatInterval until
// done is closed or ctx ends. The caller cancels ctx when it closes done (leaseRenewer.stop), so a
// heartbeat the SDK is still sending then is abandoned, and the body's completion never waits for
// an unreachable Temporal.
func (c *call) heartbeatForBody(ctx context.Context, done <-chan struct{}) {
	t := time.NewTicker(c.bodyHeartbeatInterval())
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.hb.tick(ctx)
	}
}
