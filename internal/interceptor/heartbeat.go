package interceptor

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/converter"
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
	// earlier holds the details the attempt started with (an earlier attempt's latest
	// heartbeat) as raw payloads, to be sent again unchanged; nil when they could not be read so
	// (earlierRead: they were looked at).
	earlier     []any
	earlierRead bool
}

// maxRepeatedDetails is the most heartbeat details of an earlier attempt oncekey repeats; an
// attempt that started with more gets no heartbeat from oncekey until the body heartbeats.
const maxRepeatedDetails = 32

// earlierDetails returns the details the attempt started with as converter.RawValue values, to
// be sent again unchanged (the data converter passes a RawValue through, codec included), and
// whether they could be read so: not with a data converter that does not handle RawValue, or
// with more than maxRepeatedDetails values. Called with h.mu held.
func (h *heartbeats) earlierDetails(ctx context.Context) ([]any, bool) {
	if h.earlierRead {
		return h.earlier, h.earlier != nil
	}
	h.earlierRead = true
	raws := make([]converter.RawValue, maxRepeatedDetails+1)
	ptrs := make([]any, len(raws))
	for i := range raws {
		ptrs[i] = &raws[i]
	}
	if err := h.next.GetHeartbeatDetails(ctx, ptrs...); err != nil {
		return nil, false
	}
	n := 0
	for n < len(raws) && raws[n].Payload() != nil {
		n++
	}
	if n == 0 || n > maxRepeatedDetails {
		return nil, false
	}
	h.earlier = make([]any, n)
	for i := range n {
		h.earlier[i] = raws[i]
	}
	return h.earlier, true
}

// current returns the details oncekey's heartbeats carry: the user's latest in this attempt;
// before the user's first, none, or the earlier attempt's the attempt started with
// (earlierDetails). ok is false when there are earlier details that cannot be repeated: a
// heartbeat would clear them. Called with h.mu held.
func (h *heartbeats) current(ctx context.Context) (details []any, ok bool) {
	if !h.sent && h.next.HasHeartbeatDetails(ctx) {
		return h.earlierDetails(ctx)
	}
	return h.details, true
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
// sends the details the attempt started with (an earlier attempt's, activity.HasHeartbeatDetails),
// unchanged, or none when there are none; when those cannot be repeated (earlierDetails) it
// sends nothing until the user's first heartbeat, since a heartbeat would clear them.
func (h *heartbeats) tick(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since {
		h.since = false
		return
	}
	if d, ok := h.current(ctx); ok {
		h.next.RecordHeartbeat(ctx, d...)
	}
}

// keepAlive heartbeats for an attempt that waits before its body runs (another attempt holds
// the claim), so that it does not time out on its HeartbeatTimeout: with the details tick would
// send, or, when the attempt's earlier details cannot be repeated, without details (staying
// alive matters more there than details the waiting attempt never wrote).
func (h *heartbeats) keepAlive(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, _ := h.current(ctx)
	h.next.RecordHeartbeat(ctx, d...)
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
