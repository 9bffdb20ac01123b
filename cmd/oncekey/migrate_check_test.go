package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
)

// migrate --check warns about an asynchronous standby streaming from the server (a failover to
// it can lose acknowledged claims) and is quiet about a synchronous one; it applies nothing.
func TestMigrateCheckWarnsAboutAsyncStandby(t *testing.T) {
	needsServices(t)
	for _, tc := range []struct {
		name string
		sync bool
	}{{"async", false}, {"sync", true}} {
		t.Run(tc.name, func(t *testing.T) {
			primary, _ := testenv.PrivateFailoverPair(t, tc.sync)
			r := cli(t, nil, "migrate", "--check", "--database-url", primary.URL)
			require.Equal(t, 0, r.code, r.stderr)
			ups, err := filepath.Glob(filepath.Join("..", "..", "pgstore", "migrations", "*.up.sql"))
			require.NoError(t, err)
			require.NotEmpty(t, ups)
			require.Contains(t, r.stdout, fmt.Sprintf("would apply %d migration(s)", len(ups)), "--check applies nothing")
			// The private instances run fsync=off, which both runs warn about.
			require.Contains(t, r.stderr, "warning: fsync is off")
			if tc.sync {
				require.NotContains(t, r.stderr, "standby")
				return
			}
			require.Contains(t, r.stderr, "warning: 1 standby(s) stream from this server asynchronously")
			require.Contains(t, r.stderr, "set synchronous_standby_names")
		})
	}
}
