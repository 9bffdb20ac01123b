package interceptor_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	tinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
)

// heartbeatSpy is a worker interceptor installed before oncekey's: its activity outbound side
// is below oncekey's, so it sees every heartbeat that reaches the SDK (the body's and oncekey's),
// before the SDK's throttle.
type heartbeatSpy struct {
	tinterceptor.WorkerInterceptorBase
	mu    sync.Mutex
	beats [][]any
}

func (s *heartbeatSpy) InterceptActivity(ctx context.Context, next tinterceptor.ActivityInboundInterceptor) tinterceptor.ActivityInboundInterceptor {
	return &spyInbound{ActivityInboundInterceptorBase: tinterceptor.ActivityInboundInterceptorBase{Next: next}, spy: s}
}

func (s *heartbeatSpy) heartbeats() [][]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.beats)
}

type spyInbound struct {
	tinterceptor.ActivityInboundInterceptorBase
	spy *heartbeatSpy
}

func (i *spyInbound) Init(outbound tinterceptor.ActivityOutboundInterceptor) error {
	return i.Next.Init(&spyOutbound{ActivityOutboundInterceptorBase: tinterceptor.ActivityOutboundInterceptorBase{Next: outbound}, spy: i.spy})
}

type spyOutbound struct {
	tinterceptor.ActivityOutboundInterceptorBase
	spy *heartbeatSpy
}

func (o *spyOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	o.spy.mu.Lock()
	o.spy.beats = append(o.spy.beats, slices.Clone(details))
	o.spy.mu.Unlock()
	o.Next.RecordHeartbeat(ctx, details...)
}

// renewCounter counts the lease renewals: oncekey's heartbeat ticks run with them (the same
// Lease/3 period when the activity has no HeartbeatTimeout).
type renewCounter struct {
	oncekeystore.Store
	mu    sync.Mutex
	count int
}

func (r *renewCounter) Renew(ctx context.Context, p *oncekeystore.RenewParams) (*oncekeystore.Record, error) {
	r.mu.Lock()
	r.count++
	r.mu.Unlock()
	return r.Store.Renew(ctx, p)
}

func (r *renewCounter) renewals() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// longBody is a long claimed tool driven by the test: it heartbeats what it is sent on beat
// (nil: a heartbeat without details) and returns when finish is closed.
type longBody struct {
	beat   chan []any
	finish chan struct{}
}

func (b *longBody) LongTask(ctx context.Context, in TicketRequest) (string, error) {
	for {
		select {
		case d := <-b.beat:
			activity.RecordHeartbeat(ctx, d...)
		case <-b.finish:
			return "done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

type heartbeatEnv struct {
	spy     *heartbeatSpy
	renews  *renewCounter
	body    *longBody
	env     *testsuite.TestActivityEnvironment
	results chan error
}

func setupHeartbeats(t *testing.T, effect oncekey.Effect, opts func(*interceptor.Options)) *heartbeatEnv {
	t.Helper()
	h := &heartbeatEnv{spy: &heartbeatSpy{}, renews: &renewCounter{Store: memstore.New(nil)},
		body: &longBody{beat: make(chan []any), finish: make(chan struct{})}, results: make(chan error, 1)}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(h.body.LongTask, oncekey.Policy{Effect: effect, Lease: 300 * time.Millisecond}))
	o := interceptor.Options{Store: h.renews, Registry: reg}
	if opts != nil {
		opts(&o)
	}
	ic, err := interceptor.New(o)
	require.NoError(t, err)
	var s testsuite.WorkflowTestSuite
	h.env = s.NewTestActivityEnvironment()
	h.env.SetWorkerOptions(sdkworker.Options{Interceptors: []tinterceptor.WorkerInterceptor{h.spy, ic}, DeadlockDetectionTimeout: time.Minute})
	h.env.RegisterActivity(h.body.LongTask)
	return h
}

func (h *heartbeatEnv) start() {
	go func() {
		_, err := h.env.ExecuteActivity(h.body.LongTask, req1)
		h.results <- err
	}()
}

// waitRenewals waits until n more lease renewals have been made (as many heartbeat ticks, give
// or take one).
func (h *heartbeatEnv) waitRenewals(t *testing.T, n int) {
	t.Helper()
	from := h.renews.renewals()
	require.Eventually(t, func() bool { return h.renews.renewals() >= from+n }, 10*time.Second, 10*time.Millisecond)
}

func (h *heartbeatEnv) waitBeats(t *testing.T, n int) [][]any {
	t.Helper()
	require.Eventually(t, func() bool { return len(h.spy.heartbeats()) >= n }, 10*time.Second, 10*time.Millisecond)
	return h.spy.heartbeats()
}

func (h *heartbeatEnv) finish(t *testing.T) {
	t.Helper()
	close(h.body.finish)
	require.NoError(t, <-h.results)
}

// A claimed body that never heartbeats gets heartbeats from oncekey while it runs (without
// details: it recorded none), for an Effectful and an Idempotent tool alike.
func TestBodyHeartbeatForABodyThatNeverHeartbeats(t *testing.T) {
	for _, effect := range []oncekey.Effect{oncekey.Effectful, oncekey.Idempotent} {
		t.Run(effect.String(), func(t *testing.T) {
			h := setupHeartbeats(t, effect, nil)
			h.start()
			for _, beat := range h.waitBeats(t, 3) {
				require.Empty(t, beat, "no details: the body recorded none")
			}
			h.finish(t)
		})
	}
}

// oncekey's heartbeats repeat the details of the body's latest heartbeat, so the body's progress
// is never overwritten; a newer heartbeat of the body's is what they repeat from then on.
func TestBodyHeartbeatRepeatsTheBodysLatestDetails(t *testing.T) {
	h := setupHeartbeats(t, oncekey.Effectful, nil)
	h.start()
	h.body.beat <- []any{"step-1", 1}
	beats := h.waitBeats(t, 4)
	for _, beat := range beats {
		require.Equal(t, []any{"step-1", 1}, beat)
	}
	h.body.beat <- []any{"step-2", 2}
	n := len(h.spy.heartbeats())
	beats = h.waitBeats(t, n+4)
	require.Equal(t, []any{"step-2", 2}, beats[len(beats)-1])
	for _, beat := range beats[len(beats)-3:] {
		require.Equal(t, []any{"step-2", 2}, beat, "after the body's newer heartbeat, oncekey repeats that one")
	}
	h.finish(t)
}

// An attempt that started with an earlier attempt's heartbeat details gets oncekey's heartbeats
// with those details, sent again unchanged (a heartbeat without them would clear them), so a
// pause still reaches a body that has not heartbeated yet; once the body heartbeats, oncekey
// repeats the body's.
func TestBodyHeartbeatKeepsAnEarlierAttemptsDetails(t *testing.T) {
	h := setupHeartbeats(t, oncekey.Effectful, nil)
	h.env.SetHeartbeatDetails("checkpoint-7")
	h.start()
	for _, beat := range h.waitBeats(t, 3) {
		require.Equal(t, "checkpoint-7", decodeBeat(t, beat), "the earlier attempt's details, unchanged")
	}
	h.body.beat <- []any{"checkpoint-8"}
	n := len(h.spy.heartbeats())
	beats := h.waitBeats(t, n+3)
	for _, beat := range beats[n:] {
		require.Equal(t, []any{"checkpoint-8"}, beat)
	}
	h.finish(t)
}

// decodeBeat decodes a heartbeat oncekey repeated from an earlier attempt: one raw payload
// holding a string.
func decodeBeat(t *testing.T, beat []any) string {
	t.Helper()
	require.Len(t, beat, 1)
	raw, ok := beat[0].(converter.RawValue)
	require.True(t, ok, "a raw payload: %T", beat[0])
	var s string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(raw.Payload(), &s))
	return s
}

// Options.DisableBodyHeartbeat turns oncekey's heartbeats off; the body's own still pass.
func TestBodyHeartbeatDisabled(t *testing.T) {
	h := setupHeartbeats(t, oncekey.Effectful, func(o *interceptor.Options) { o.DisableBodyHeartbeat = true })
	h.start()
	h.waitRenewals(t, 3)
	require.Empty(t, h.spy.heartbeats())
	h.body.beat <- []any{"mine"}
	h.waitRenewals(t, 3)
	require.Equal(t, [][]any{{"mine"}}, h.spy.heartbeats())
	h.finish(t)
}
