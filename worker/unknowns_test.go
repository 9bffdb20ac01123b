package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/metricstest"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/metrics"
	"github.com/oncekey/oncekey/worker"
)

// unknownAt claims key for tool and marks it unknown at the store's clock.
func unknownAt(t *testing.T, s oncekey.Store, tenant, tool, key string) {
	t.Helper()
	ctx := context.Background()
	cr, err := s.Claim(ctx, &oncekey.ClaimParams{Tenant: tenant, OperationKey: key, Tool: tool, Fingerprint: "fp", WorkflowID: "wf", StepID: key,
		Effect: oncekey.Effectful, Lease: time.Minute, Retention: 24 * time.Hour, Tombstone: time.Hour})
	require.NoError(t, err)
	_, err = s.MarkUnknown(ctx, &oncekey.MarkUnknownParams{Tenant: tenant, OperationKey: key, Epoch: cr.Record.Epoch})
	require.NoError(t, err)
}

// The sampler's gauges count the store's unknown records by tool and give the oldest one's wait;
// once they are settled the gauges go back to 0.
func TestUnknownsSamplerGauges(t *testing.T) {
	now := time.Now()
	clock := now.Add(-2 * time.Hour)
	s := memstore.New(&memstore.Options{Clock: func() time.Time { return clock }})
	unknownAt(t, s, "acme", "Refund", "ok1_a")
	clock = now.Add(-30 * time.Minute)
	unknownAt(t, s, "globex", "Refund", "ok1_b")
	unknownAt(t, s, "acme", "CreateTicket", "ok1_c")
	cr, err := s.Claim(context.Background(), &oncekey.ClaimParams{Tenant: "acme", OperationKey: "ok1_d", Tool: "CreateTicket", Fingerprint: "fp", WorkflowID: "wf", StepID: "d",
		Effect: oncekey.Effectful, Lease: time.Minute, Retention: 24 * time.Hour, Tombstone: time.Hour})
	require.NoError(t, err)
	require.True(t, cr.Acquired, "a pending record is not waiting for anyone")

	h := metricstest.New()
	u := &worker.UnknownsSampler{Store: s, Handler: h}
	require.NoError(t, u.Sample(context.Background()))
	gauge := func(name, tool string) float64 {
		v, ok := h.GaugeValue(name, map[string]string{metrics.TagTool: tool})
		require.True(t, ok, "%s{tool=%s} in %v", name, tool, h.Names())
		return v
	}
	require.Equal(t, 2.0, gauge(metrics.UnknownsWaiting, "Refund"))
	require.Equal(t, 1.0, gauge(metrics.UnknownsWaiting, "CreateTicket"))
	require.InDelta(t, (2 * time.Hour).Seconds(), gauge(metrics.UnknownOldestWait, "Refund"), 60)
	require.InDelta(t, (30 * time.Minute).Seconds(), gauge(metrics.UnknownOldestWait, "CreateTicket"), 60)
	for _, n := range h.Names() {
		require.NotContains(t, n, "tenant=")
	}

	for _, key := range []string{"ok1_a", "ok1_b"} {
		tenant := map[string]string{"ok1_a": "acme", "ok1_b": "globex"}[key]
		_, err := s.Resolve(context.Background(), &oncekey.ResolveParams{Tenant: tenant, OperationKey: key, Epoch: 1, Status: oncekey.StatusApplied, ResolvedBy: "gina"})
		require.NoError(t, err)
	}
	require.NoError(t, u.Sample(context.Background()))
	require.Equal(t, 0.0, gauge(metrics.UnknownsWaiting, "Refund"), "settled: back to 0")
	require.Equal(t, 0.0, gauge(metrics.UnknownOldestWait, "Refund"))
	require.Equal(t, 1.0, gauge(metrics.UnknownsWaiting, "CreateTicket"))

	ht := metricstest.New()
	require.NoError(t, (&worker.UnknownsSampler{Store: s, Handler: ht, WithTenant: true}).Sample(context.Background()))
	v, ok := ht.GaugeValue(metrics.UnknownsWaiting, map[string]string{metrics.TagTool: "CreateTicket", metrics.TagTenant: "acme"})
	require.True(t, ok, "%v", ht.Names())
	require.Equal(t, 1.0, v)
}
