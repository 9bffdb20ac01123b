package redisstore_test

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/redisstore"
)

// serverProc is a redis-server process of this test.
type serverProc struct {
	cmd  *exec.Cmd
	addr string
}

// startServer starts redis-server on port with its files in dir and args, and waits until it
// answers. It is killed in t.Cleanup if still running.
func startServer(t *testing.T, dir string, port int, args ...string) *serverProc {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server: %v", err)
	}
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir}, args...)...)
	require.NoError(t, cmd.Start())
	p := &serverProc{cmd: cmd, addr: "127.0.0.1:" + strconv.Itoa(port)}
	t.Cleanup(p.kill)
	rdb := redis.NewClient(&redis.Options{Addr: p.addr})
	defer rdb.Close()
	require.Eventually(t, func() bool { return rdb.Ping(context.Background()).Err() == nil }, 20*time.Second, 20*time.Millisecond)
	return p
}

// kill ends the process with SIGKILL, as a crash would.
func (p *serverProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// What docs/stores.md says about durability, on a real redis-server killed with SIGKILL and
// started again: without persistence the claim is gone and a repeat acquires the key again (the
// second effect oncekey cannot prevent); with the AOF fsynced on every write
// (appendfsync always) the acknowledged claim survives, and a repeat finds it in flight.
func TestCrashLosesClaimsWithoutFsync(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		args     []string
		survives bool
	}{
		{"no persistence", []string{"--save", "", "--appendonly", "no"}, false},
		{"appendfsync always", []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			port := freeClusterPort(t)
			srv := startServer(t, dir, port, tc.args...)
			rdb := redis.NewClient(&redis.Options{Addr: srv.addr, MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			s, err := redisstore.New(rdb, nil)
			require.NoError(t, err)
			ctx := ctxT(t)
			p := claimParams("ok1_crash", oncekeystore.Effectful)
			first, err := s.Claim(ctx, p)
			require.NoError(t, err)
			require.True(t, first.Acquired)

			srv.kill()
			startServer(t, dir, port, tc.args...)

			again, err := s.Claim(ctx, p)
			for i := 0; err != nil && i < 10; i++ { // the client's pooled connection died with the server
				again, err = s.Claim(ctx, p)
			}
			require.NoError(t, err)
			if tc.survives {
				require.False(t, again.Acquired, "the claim survived the crash: the repeat finds it in flight")
				require.Equal(t, oncekeystore.StatusPending, again.Record.Status)
				_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: first.Record.Epoch, Status: oncekeystore.StatusApplied})
				require.NoError(t, err)
			} else {
				require.True(t, again.Acquired, "the claim was lost with the crash: the repeat acquires the key again")
				require.Equal(t, int64(1), again.Record.Epoch, "and the epochs start again")
			}
		})
	}
}
