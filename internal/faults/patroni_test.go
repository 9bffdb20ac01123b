package faults_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/dev/patroni"
	"github.com/oncekey/oncekey/internal/dev/privatepg"
	"github.com/oncekey/oncekey/internal/faults"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// A Patroni cluster under the soak's load (-faults.failover-ops operations): one etcd, a primary
// and its synchronous standby (synchronous_mode and synchronous_mode_strict on, ttl 10s,
// loop_wait 1s), the workers' URL naming both with target_session_attrs=read-write. When half the
// operations have an effect, the primary's node is SIGKILLed, its Patroni and its Postgres, as
// the loss of its machine would end them. Patroni promotes the synchronous standby once the
// dead primary's leader key runs out. Strict synchronous mode holds the new primary's commits
// until a synchronous standby is back, so the killed node is started again as soon as the
// promotion is seen, as a machine coming back would be, and rejoins (pg_rewind) as one. Nothing
// is double, lost or stuck; the note gives the time from the kill to the promotion, to the
// standby's return and to the first claim that succeeded on the new primary (a probe claiming a
// fresh key every 100ms in a schema of its own).
func TestPatroniFailover(t *testing.T) {
	const scenario = "pg_failover_patroni"
	if !*flagPGRestart {
		newEnvSkip(t, scenario, "left out with -faults.pg-restart=false")
	}
	if testing.Short() {
		newEnvSkip(t, scenario, "needs Patroni, etcd, Postgres and a Temporal dev server")
	}
	cluster := startPatroni(t, scenario)
	e := newEnvOn(t, scenario, cluster.URL())
	probe := probeStore(t, cluster.URL())
	fault := func() string {
		ctx := e.ctx(5 * time.Minute)
		old, err := cluster.Primary(ctx)
		if err != nil {
			t.Error(err)
			return err.Error()
		}
		at := len(e.ds.Effects())
		killed := time.Now()
		old.Kill()
		recovered := make(chan error, 1)
		var recovery time.Duration
		go func() {
			err := firstClaim(ctx, probe)
			recovery = time.Since(killed)
			recovered <- err
		}()
		promoted, err := cluster.WaitPrimary(ctx, old)
		if err != nil {
			t.Error(err)
			return err.Error()
		}
		tookOver := time.Since(killed)
		if err := old.Start(ctx); err != nil {
			t.Error(err)
			return err.Error()
		}
		sync, err := cluster.WaitSync(ctx)
		if err != nil {
			t.Error(err)
			return err.Error()
		}
		back := time.Since(killed)
		if err := <-recovered; err != nil {
			t.Errorf("no claim succeeded on the new primary: %v", err)
		}
		return fmt.Sprintf("primary %s (Patroni and Postgres) SIGKILLed at %d effects; Patroni promoted %s after %.1fs; %s its synchronous standby again after %.1fs; recovered (first claim on the new primary) %.1fs after the kill",
			old.Name, at, promoted.Name, tookOver.Seconds(), sync.Name, back.Seconds(), recovery.Seconds())
	}
	e.note("%s", e.soak(soakConfig{ops: *flagFailoverOps, fault: fault, strict: true}))
}

// startPatroni starts a Patroni cluster of the test's own (patroni.Start, fsync off), closed
// in t.Cleanup, its logs printed when the test failed. A missing patroni, etcd or Postgres
// fails the row, naming the Debian packages.
func startPatroni(t *testing.T, scenario string) *patroni.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := patroni.Start(ctx, patroni.Options{})
	if errors.Is(err, patroni.ErrNoPatroni) || errors.Is(err, privatepg.ErrNoPostgres) {
		record(faults.Result{Scenario: scenario, Note: err.Error() + "; make faults-deps installs them"})
		t.Fatalf("%v; make faults-deps installs them", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("patroni cluster log:\n%s", c.Log())
		}
		c.Close()
	})
	return c
}

// probeStore is a pgstore on a schema of its own in the database url names, apart from the
// scenario's records and audit.
func probeStore(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	schemaURL, _ := testenv.SchemaIn(t, url)
	cfg, err := pgxpool.ParseConfig(schemaURL)
	require.NoError(t, err)
	pgstore.ConfigurePool(cfg, nil)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pgstore.Migrate(context.Background(), pool))
	return pgstore.New(pool, nil)
}

// firstClaim claims a fresh key every 100ms (each attempt given 30s, so one waiting for a
// synchronous standby is not cut short) until one is acquired, and returns nil then; or the
// last attempt's error when ctx ends first.
func firstClaim(ctx context.Context, store *pgstore.Store) error {
	for i := 0; ; i++ {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := store.Claim(actx, &oncekeystore.ClaimParams{Tenant: "probe", OperationKey: fmt.Sprintf("probe-%d", i),
			Tool: "probe", Fingerprint: "probe", Effect: oncekeystore.Effectful, Lease: time.Minute, Retention: time.Hour, Tombstone: time.Hour})
		cancel()
		if err == nil && res.Acquired {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("claim of probe-%d not acquired", i)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
