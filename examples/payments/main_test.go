package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestLostResponseRecoveredByProvider runs the example on the test services: the provider loses
// the first charge's response after committing it, and the retry with the same Idempotency-Key
// is answered from the provider's own stored response. The counts come from the provider's
// ledger and from Postgres and Temporal directly, not from the report alone.
func TestLostResponseRecoveredByProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and a dev server")
	}
	pool := testenv.Postgres(t)
	c := testenv.Temporal(t)
	provider, err := StartProvider(1)
	require.NoError(t, err)
	defer provider.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	rep, err := Run(ctx, Config{Client: c, Pool: pool, Provider: provider})
	require.NoError(t, err)

	// The provider's own ledger: one charge, one lost response, one repeat it deduplicated, and
	// every request carried the operation key.
	stats := provider.Stats()
	require.Equal(t, 1, stats.Charges)
	require.Equal(t, 1, stats.LostResponses)
	require.Equal(t, 2, stats.Requests, "the lost response was retried once; the agent's repeat never reached the provider")
	require.Equal(t, 1, stats.Replays)
	require.Equal(t, []string{rep.OperationKey, rep.OperationKey}, stats.RequestKeys)
	require.Equal(t, 2, rep.ToolRuns)

	// Both calls got the one charge; the first through the provider's deduplication, the
	// second from oncekey's stored result.
	require.Equal(t, "ch_0001", rep.Result.First.ID)
	require.True(t, rep.Result.First.ProviderReplayed)
	require.Equal(t, rep.Result.First, rep.Result.Again)
	require.Equal(t, 1, rep.Outcomes[oncekey.OutcomeReplayed])
	require.Zero(t, rep.Outcomes[oncekey.OutcomeUnknown])

	// No reconciliation: the record is applied, nothing is unknown, and Temporal has no
	// reconciliation workflow for the key.
	store := pgstore.New(pool, nil)
	rec, err := store.Get(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: rep.OperationKey})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Empty(t, rec.ResolvedBy)
	unknown, err := store.List(ctx, &oncekeystore.ListParams{Status: oncekeystore.StatusUnknown})
	require.NoError(t, err)
	require.Empty(t, unknown.Records)
	_, err = c.DescribeWorkflow(ctx, reconcile.WorkflowID(rep.OperationKey), "")
	var nf *serviceerror.NotFound
	require.True(t, errors.As(err, &nf), "want no reconciliation workflow, got %v", err)
	require.False(t, rep.ReconciliationStarted)
	require.Empty(t, check(rep))

	var out bytes.Buffer
	printReport(&out, rep)
	require.Contains(t, out.String(), "payments: charges=1 provider_requests=2 provider_replays=1 oncekey_replays=1 reconciliations=0\n")
}

// TestCheckCatchesADoubleCharge makes sure the exit status can fail: a second charge, a
// reconciliation or a foreign key are each reported.
func TestCheckCatchesADoubleCharge(t *testing.T) {
	good := &Report{OperationKey: "ok1_a", Provider: ProviderStats{Charges: 1, RequestKeys: []string{"ok1_a"}},
		Result: CheckoutResult{First: Charge{ID: "ch_1"}, Again: Charge{ID: "ch_1"}}}
	require.Empty(t, check(good))
	bad := *good
	bad.Provider.Charges = 2
	require.Len(t, check(&bad), 1)
	bad = *good
	bad.ReconciliationStarted = true
	require.Len(t, check(&bad), 1)
	bad = *good
	bad.Provider.RequestKeys = []string{"ok1_a", ""}
	require.Len(t, check(&bad), 1)
}

// TestProviderWithoutKeyChargesTwice shows what the key buys: the same request twice without
// an Idempotency-Key is two charges; with one it is one.
func TestProviderWithoutKeyChargesTwice(t *testing.T) {
	p, err := StartProvider(0)
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()
	hc := &http.Client{Timeout: 5 * time.Second}
	in := chargeRequest{OrderID: "o1", AmountCents: 100, Currency: "EUR"}
	a, _, err := postCharge(ctx, hc, p.URL, "", in)
	require.NoError(t, err)
	b, _, err := postCharge(ctx, hc, p.URL, "", in)
	require.NoError(t, err)
	require.NotEqual(t, a.ID, b.ID)
	require.Equal(t, 2, p.Stats().Charges)

	k1, r1, err := postCharge(ctx, hc, p.URL, "ok1_k", in)
	require.NoError(t, err)
	require.False(t, r1)
	k2, r2, err := postCharge(ctx, hc, p.URL, "ok1_k", in)
	require.NoError(t, err)
	require.True(t, r2)
	require.Equal(t, k1, k2)
	require.Equal(t, 3, p.Stats().Charges)

	// The same key for another charge is refused, and charges nothing.
	_, _, err = postCharge(ctx, hc, p.URL, "ok1_k", chargeRequest{OrderID: "o2", AmountCents: 100, Currency: "EUR"})
	var pe *ProviderError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 422, pe.Status)
	require.Equal(t, 3, p.Stats().Charges)
}
