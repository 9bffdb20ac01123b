package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

func TestPostgresSchemaIsolated(t *testing.T) {
	pool := Postgres(t)
	ctx := context.Background()
	var schema string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema))
	require.Regexp(t, `^t_[0-9a-f]{12}$`, schema)
	_, err := pool.Exec(ctx, "CREATE TABLE probe (id int)")
	require.NoError(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'probe'", schema).Scan(&n))
	require.Equal(t, 1, n)
}

func TestTemporalDevServer(t *testing.T) {
	c := Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.CheckHealth(ctx, nil)
	require.NoError(t, err)
}

// A test database that does not exist yet is created, so `make test` needs no `createdb test`.
func TestEnsureDatabaseCreatesIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := DatabaseURL()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		Missing(t, "postgres at %s: %v", base, err)
	}
	defer admin.Close(context.Background())
	cfg, err := pgx.ParseConfig(base)
	require.NoError(t, err)
	name := "oncekey_ensure_" + randSuffix(t)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name) })
	url := strings.Replace(base, "/"+cfg.Database+"?", "/"+name+"?", 1)
	require.NotEqual(t, base, url)

	_, err = pgx.Connect(ctx, url)
	require.ErrorContains(t, err, "3D000", "the database exists before the test")
	require.NoError(t, EnsureDatabase(ctx, url))
	c, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	require.NoError(t, c.Close(ctx))
	require.NoError(t, EnsureDatabase(ctx, url), "an existing database is left as it is")
}

func randSuffix(t *testing.T) string {
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

// The private instance keeps its data across Stop and Start, on the same port.
func TestPrivatePostgres(t *testing.T) {
	pg := PrivatePostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exec := func(sql string) error {
		c, err := pgx.Connect(ctx, pg.URL)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, sql)
		return err
	}
	require.NoError(t, exec("CREATE TABLE kept (id int); INSERT INTO kept VALUES (7)"))
	pg.Stop()
	require.False(t, pg.Running())
	require.Error(t, exec("SELECT 1"), "the server answers after Stop")
	require.NoError(t, pg.Start(ctx))
	require.Error(t, pg.Start(ctx), "a second Start of a running server")
	require.NoError(t, exec("DO $$ BEGIN IF (SELECT id FROM kept) <> 7 THEN RAISE 'lost'; END IF; END $$"))
}

// A skip for a missing service is noted, one line per skip, in the NotesEnv file that
// `make test` prints at the end; with CI set it fails instead (not run here: it would fail).
func TestMissingNotesTheSkip(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes")
	t.Setenv(NotesEnv, notes)
	t.Setenv("CI", "")
	for range 2 {
		t.Run("skipped", func(t *testing.T) {
			Missing(t, "chromium, for %s", "the browser tests")
			t.Error("Missing did not skip")
		})
	}
	b, err := os.ReadFile(notes)
	require.NoError(t, err)
	require.Equal(t, "chromium, for the browser tests\nchromium, for the browser tests\n", string(b))
}

// A commit acknowledged by a primary with a synchronous standby is on the standby after the
// primary is killed and the standby promoted; a URL naming both servers with
// target_session_attrs=read-write reaches the promoted one.
func TestPrivateFailoverPair(t *testing.T) {
	primary, standby := PrivateFailoverPair(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	both := "postgres://oncekey@127.0.0.1:" + strconv.Itoa(primary.Port) + ",127.0.0.1:" + strconv.Itoa(standby.Port) +
		"/postgres?sslmode=disable&target_session_attrs=read-write"
	c, err := pgx.Connect(ctx, both)
	require.NoError(t, err)
	_, err = c.Exec(ctx, "CREATE TABLE probe (id int); INSERT INTO probe VALUES (1)")
	require.NoError(t, err)
	require.NoError(t, c.Close(ctx))

	primary.Kill()
	require.False(t, primary.Running())
	_, err = pgx.Connect(ctx, both)
	require.Error(t, err, "the standby is read-only until promoted")
	require.NoError(t, standby.Promote(ctx))
	c, err = pgx.Connect(ctx, both)
	require.NoError(t, err)
	defer c.Close(context.Background())
	var n int
	require.NoError(t, c.QueryRow(ctx, "SELECT count(*) FROM probe").Scan(&n))
	require.Equal(t, 1, n)
	_, err = c.Exec(ctx, "INSERT INTO probe VALUES (2)")
	require.NoError(t, err, "the promoted standby takes writes")
}
