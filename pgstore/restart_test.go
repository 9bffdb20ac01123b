package pgstore_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

// pgCtl runs pg_ctlcluster for the local cluster ("start", "stop", "restart").
func pgCtl(t *testing.T, action string) error {
	t.Helper()
	versions, _ := filepath.Glob("/etc/postgresql/*")
	if len(versions) != 1 {
		t.Fatalf("want one cluster under /etc/postgresql, found %v", versions)
	}
	out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", filepath.Base(versions[0]), "main", action).CombinedOutput()
	if err != nil {
		t.Logf("pg_ctlcluster %s: %v: %s", action, err, out)
	}
	return err
}

// TestSurvivesPostgresRestart stops and restarts the local Postgres server under a live Store:
// while it is down every call fails closed with *oncekey.StoreUnavailableError; once it is back
// the same Store works again and the record written before is intact. It disturbs every other
// user of the server, so it runs only when ONCEKEY_TEST_PG_RESTART=1: `make test` runs it in a
// step of its own, after every other package, so it cannot disturb them.
func TestSurvivesPostgresRestart(t *testing.T) {
	if os.Getenv("ONCEKEY_TEST_PG_RESTART") != "1" {
		t.Skip("restarts Postgres: set ONCEKEY_TEST_PG_RESTART=1 to run (make test does, in a serial step)")
	}
	if _, err := exec.LookPath("pg_ctlcluster"); err != nil {
		t.Skip("pg_ctlcluster not found: the server is not a local Debian cluster")
	}
	_, s := setup(t)
	t.Cleanup(func() {
		// Whatever happened, leave the server running.
		if exec.Command("pg_isready", "-h", "127.0.0.1", "-q").Run() != nil {
			_ = pgCtl(t, "start")
		}
	})
	ctx := ctxT(t)
	first, err := s.Claim(ctx, claimParams("ok1_restart", oncekey.Effectful))
	require.NoError(t, err)
	require.True(t, first.Acquired)

	require.NoError(t, pgCtl(t, "stop"))
	for range 3 {
		_, err = s.Claim(ctx, claimParams("ok1_down", oncekey.Effectful))
		var su *oncekey.StoreUnavailableError
		require.ErrorAs(t, err, &su, "claim while the server is down: %v", err)
		_, err = s.Complete(ctx, &oncekey.CompleteParams{Tenant: "acme", OperationKey: "ok1_restart", Epoch: 1, Status: oncekey.StatusApplied})
		require.ErrorAs(t, err, &su, "complete while the server is down: %v", err)
	}
	require.NoError(t, pgCtl(t, "start"))

	// Every failure on the way back up is StoreUnavailable; then the same Store works.
	require.Eventually(t, func() bool {
		res, err := s.Claim(context.Background(), claimParams("ok1_restart", oncekey.Effectful))
		if err != nil {
			var su *oncekey.StoreUnavailableError
			require.ErrorAs(t, err, &su)
			return false
		}
		require.False(t, res.Acquired)
		require.Equal(t, first.Record.Epoch, res.Record.Epoch, "the record survived the restart")
		return true
	}, 60*time.Second, 100*time.Millisecond)
	_, err = s.Complete(ctx, &oncekey.CompleteParams{Tenant: "acme", OperationKey: "ok1_restart", Epoch: 1, Status: oncekey.StatusApplied, Result: []byte("after restart")})
	require.NoError(t, err)

	// A restart while the pool holds idle connections: the next calls recover by themselves.
	require.NoError(t, pgCtl(t, "restart"))
	require.Eventually(t, func() bool {
		r, err := s.Get(context.Background(), &oncekey.GetParams{Tenant: "acme", OperationKey: "ok1_restart"})
		if err != nil {
			var su *oncekey.StoreUnavailableError
			require.ErrorAs(t, err, &su)
			return false
		}
		return string(r.Result) == "after restart"
	}, 60*time.Second, 100*time.Millisecond)
}
