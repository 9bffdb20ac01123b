package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/metricstest"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/metrics"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/worker"
)

// unknownAt claims key for tool and marks it unknown at the store's clock.
func unknownAt(t *testing.T, s oncekeystore.Store, tenant, tool, key string) {
	t.Helper()
	ctx := context.Background()
	cr, err := s.Claim(ctx, &oncekeystore.ClaimParams{Tenant: tenant, OperationKey: key, Tool: tool, Fingerprint: "fp", WorkflowID: "wf", StepID: key,
		Effect: oncekey.Effectful, Lease: time.Minute, Retention: 24 * time.Hour, Tombstone: time.Hour})
	require.NoError(t, err)
	_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: tenant, OperationKey: key, Epoch: cr.Record.Epoch})
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
	cr, err := s.Claim(context.Background(), &oncekeystore.ClaimParams{Tenant: "acme", OperationKey: "ok1_d", Tool: "CreateTicket", Fingerprint: "fp", WorkflowID: "wf", StepID: "d",
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
		_, err := s.Resolve(context.Background(), &oncekeystore.ResolveParams{Tenant: tenant, OperationKey: key, Epoch: 1, Status: oncekeystore.StatusApplied, ResolvedBy: "gina"})
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

// The sampler's approval gauges count the pending approvals by tool and give the oldest one's
// wait since it was asked; a decided approval no longer counts.
func TestUnknownsSamplerApprovalGauges(t *testing.T) {
	now := time.Now()
	clock := now.Add(-3 * time.Hour)
	s := memstore.New(&memstore.Options{Clock: func() time.Time { return clock }})
	ask := func(tenant, tool, key string) {
		t.Helper()
		res, err := s.RequestApproval(context.Background(), &oncekeystore.RequestApprovalParams{Tenant: tenant, OperationKey: key, Tool: tool,
			Fingerprint: "fp", WorkflowID: "wf", StepID: key, Summary: "refund 120.00 EUR", Timeout: 24 * time.Hour})
		require.NoError(t, err)
		require.True(t, res.Created)
	}
	ask("acme", "Refund", "ok1_a")
	clock = now.Add(-10 * time.Minute)
	ask("globex", "Refund", "ok1_b")
	ask("acme", "Wire", "ok1_c")

	h := metricstest.New()
	u := &worker.UnknownsSampler{Store: s, Handler: h}
	require.NoError(t, u.Sample(context.Background()))
	gauge := func(name, tool string) float64 {
		v, ok := h.GaugeValue(name, map[string]string{metrics.TagTool: tool})
		require.True(t, ok, "%s{tool=%s} in %v", name, tool, h.Names())
		return v
	}
	require.Equal(t, 2.0, gauge(metrics.ApprovalsWaiting, "Refund"))
	require.Equal(t, 1.0, gauge(metrics.ApprovalsWaiting, "Wire"))
	require.InDelta(t, (3 * time.Hour).Seconds(), gauge(metrics.ApprovalOldestWait, "Refund"), 60)
	require.InDelta(t, (10 * time.Minute).Seconds(), gauge(metrics.ApprovalOldestWait, "Wire"), 60)

	_, err := s.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: "ok1_a", Episode: 1,
		Status: oncekeystore.ApprovalApproved, DecidedBy: "gina", Retention: time.Hour})
	require.NoError(t, err)
	_, err = s.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: "ok1_c", Episode: 1,
		Status: oncekeystore.ApprovalDenied, DecidedBy: "gina", Reason: "not this one", Retention: time.Hour})
	require.NoError(t, err)
	require.NoError(t, u.Sample(context.Background()))
	require.Equal(t, 1.0, gauge(metrics.ApprovalsWaiting, "Refund"))
	require.InDelta(t, (10 * time.Minute).Seconds(), gauge(metrics.ApprovalOldestWait, "Refund"), 60)
	require.Equal(t, 0.0, gauge(metrics.ApprovalsWaiting, "Wire"), "decided: back to 0")
	require.Equal(t, 0.0, gauge(metrics.ApprovalOldestWait, "Wire"))
	_, ok := h.GaugeValue(metrics.UnknownsWaiting, map[string]string{metrics.TagTool: "Refund"})
	require.False(t, ok, "no unknown records, no unknown series")
}

// The near-deadline gauge counts the pending approvals in the last quarter of their wait, by
// tool, and goes back to 0 once they are decided.
func TestUnknownsSamplerNearDeadlineGauge(t *testing.T) {
	now := time.Now()
	clock := now.Add(-3*time.Hour - 30*time.Minute)
	s := memstore.New(&memstore.Options{Clock: func() time.Time { return clock }})
	ask := func(tool, key string) {
		t.Helper()
		_, err := s.RequestApproval(context.Background(), &oncekeystore.RequestApprovalParams{Tenant: "acme", OperationKey: key, Tool: tool,
			Fingerprint: "fp", WorkflowID: "wf", StepID: key, Summary: "refund", Timeout: 4 * time.Hour})
		require.NoError(t, err)
	}
	ask("Refund", "ok1_old") // 30 minutes left of 4 hours
	clock = now.Add(-10 * time.Minute)
	ask("Refund", "ok1_new")
	ask("Wire", "ok1_wire")

	h := metricstest.New()
	u := &worker.UnknownsSampler{Store: s, Handler: h}
	require.NoError(t, u.Sample(context.Background()))
	near := func(tool string) float64 {
		v, ok := h.GaugeValue(metrics.ApprovalsNearDeadline, map[string]string{metrics.TagTool: tool})
		require.True(t, ok, "%s{tool=%s} in %v", metrics.ApprovalsNearDeadline, tool, h.Names())
		return v
	}
	require.Equal(t, 1.0, near("Refund"))
	require.Equal(t, 0.0, near("Wire"))

	_, err := s.DecideApproval(context.Background(), &oncekeystore.DecideApprovalParams{Tenant: "acme", OperationKey: "ok1_old", Episode: 1,
		Status: oncekeystore.ApprovalApproved, DecidedBy: "gina", Retention: time.Hour})
	require.NoError(t, err)
	require.NoError(t, u.Sample(context.Background()))
	require.Equal(t, 0.0, near("Refund"), "decided: back to 0")
}

// The sampler reads a pgstore's outbox: a message whose delivery failed shows in
// metrics.OutboxFailing, and once delivered the gauges go back to 0.
func TestUnknownsSamplerOutboxGauges(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(ctx, pool))
	s := pgstore.New(pool, nil)
	c, err := s.Claim(ctx, &oncekeystore.ClaimParams{Tenant: "t", OperationKey: "ok1_credit", Tool: "GrantCredit", Fingerprint: "fp",
		Effect: oncekeystore.Transactional, Lease: time.Minute, Retention: time.Hour, Tombstone: time.Hour})
	require.NoError(t, err)
	stx, err := s.BeginTx(ctx, &oncekeystore.BeginTxParams{Tenant: "t", OperationKey: "ok1_credit", Epoch: c.Record.Epoch, Tool: "GrantCredit"})
	require.NoError(t, err)
	require.NoError(t, pgstore.Enqueue(stx.Context(ctx), "confirmation", []byte(`{"to":"ada@example.com"}`)))
	_, err = stx.Commit(ctx, &oncekeystore.CompleteParams{Tenant: "t", OperationKey: "ok1_credit", Epoch: c.Record.Epoch, Status: oncekeystore.StatusApplied})
	require.NoError(t, err)
	failing := true
	deliver := func(context.Context, *pgstore.OutboxMessage) error {
		if failing {
			return errors.New("smtp: 451 try again later")
		}
		return nil
	}
	now := &pgstore.RelayOptions{Backoff: func(int) time.Duration { return 0 }}
	_, err = s.RelayOnce(ctx, deliver, now)
	require.NoError(t, err)

	h := metricstest.New()
	u := &worker.UnknownsSampler{Store: s, Handler: h}
	require.NoError(t, u.Sample(ctx))
	gauge := func(name string) float64 {
		v, ok := h.GaugeValue(name, nil)
		require.True(t, ok, "%s in %v", name, h.Names())
		return v
	}
	require.Equal(t, 1.0, gauge(metrics.OutboxPending))
	require.Equal(t, 1.0, gauge(metrics.OutboxFailing))
	require.Positive(t, gauge(metrics.OutboxOldestPending))

	failing = false
	_, err = s.RelayOnce(ctx, deliver, now)
	require.NoError(t, err)
	require.NoError(t, u.Sample(ctx))
	require.Equal(t, 0.0, gauge(metrics.OutboxPending), "delivered: back to 0")
	require.Equal(t, 0.0, gauge(metrics.OutboxFailing))
	require.Equal(t, 0.0, gauge(metrics.OutboxOldestPending))
}
