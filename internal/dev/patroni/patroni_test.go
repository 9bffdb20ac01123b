package patroni

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/dev/privatepg"
	"github.com/oncekey/oncekey/internal/testing/testenv"
)

// A commit the primary acknowledged is on the synchronous standby that Patroni promotes once the
// primary's node is killed; the cluster's multi-host URL reaches the new primary; the killed node,
// started again, rejoins as the new primary's synchronous standby.
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and two Postgres instances")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{})
	if errors.Is(err, ErrNoPatroni) || errors.Is(err, privatepg.ErrNoPostgres) {
		testenv.Missing(t, "%v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster log:\n%s", c.Log())
		}
		c.Close()
	})
	old, err := c.Primary(ctx)
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE probe (id int); INSERT INTO probe VALUES (1)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	killed := time.Now()
	old.Kill()
	promoted, err := c.WaitPrimary(ctx, old)
	require.NoError(t, err)
	t.Logf("node %s promoted %.1fs after node %s was killed", promoted.Name, time.Since(killed).Seconds(), old.Name)

	conn, err = pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM probe").Scan(&n))
	require.Equal(t, 1, n, "the acknowledged row is on the promoted standby")

	require.NoError(t, old.Start(ctx))
	sync, err := c.WaitSync(ctx)
	require.NoError(t, err)
	require.Same(t, old, sync, "the killed node rejoins as the synchronous standby")
	_, err = conn.Exec(ctx, "INSERT INTO probe VALUES (2)")
	require.NoError(t, err, "writes go on once a synchronous standby is back (synchronous_mode_strict)")
	t.Logf("node %s is the synchronous standby %.1fs after it was killed", old.Name, time.Since(killed).Seconds())
}
