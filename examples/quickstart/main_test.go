package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestQuickstartReplays runs the README's quick start on the test services: two runs of one
// workflow ID send one e-mail (the tool's own count), and the store holds one applied record.
func TestQuickstartReplays(t *testing.T) {
	pool := testenv.Postgres(t)
	copts := client.Options{HostPort: testenv.TemporalHostPort(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := sent.Load()

	require.NoError(t, run(ctx, copts, pool, "quickstart-"+t.Name(), "welcome-"+t.Name()))

	require.Equal(t, int64(1), sent.Load()-before, "the second run must replay, not send again")
	page, err := pgstore.New(pool, nil).List(ctx, &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	require.Equal(t, oncekeystore.StatusApplied, page.Records[0].Status)
}
