package redisstore_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storetest"
	"github.com/oncekey/oncekey/redisstore"
)

// startCluster starts a Redis Cluster of three primaries (redis-server processes of this test,
// in a temporary directory, on free ports, no persistence) and returns their addresses. The
// processes are stopped in t.Cleanup.
func startCluster(t *testing.T) []string {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server for a Redis Cluster: %v", err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		missing(t, "redis-cli for a Redis Cluster: %v", err)
	}
	dir := t.TempDir()
	var addrs []string
	for i := range 3 {
		port := freeClusterPort(t)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		nodeDir := fmt.Sprintf("%s/n%d", dir, i)
		require.NoError(t, os.Mkdir(nodeDir, 0o700))
		cmd := exec.Command(server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", nodeDir+"/nodes.conf", "--dir", nodeDir, "--save", "", "--appendonly", "no",
			"--cluster-node-timeout", "5000")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		addrs = append(addrs, addr)
	}
	for _, a := range addrs {
		require.Eventually(t, func() bool {
			c, err := net.DialTimeout("tcp", a, 200*time.Millisecond)
			if err == nil {
				_ = c.Close()
			}
			return err == nil
		}, 10*time.Second, 50*time.Millisecond, "redis-server at %s never listened", a)
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-yes")...).CombinedOutput()
	require.NoError(t, err, "redis-cli --cluster create: %s", out)
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		require.Eventually(t, func() bool {
			info, err := rdb.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		}, 30*time.Second, 100*time.Millisecond, "cluster never became ok at %s", a)
		_ = rdb.Close()
	}
	return addrs
}

// freeClusterPort returns a port that is free, and whose cluster bus port (port + 10000) is
// free too.
func freeClusterPort(t *testing.T) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		_ = bus.Close()
		return port
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}

// The store on a real Redis Cluster of three primaries: every script's keys are in one slot
// (a cross-slot script would fail with CROSSSLOT), the buckets spread over the nodes, and the
// whole contract holds.
func TestConformanceCluster(t *testing.T) {
	addrs := startCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })

	// The default 16 buckets land on every node.
	s, err := redisstore.New(rdb, &redisstore.Options{Prefix: "spread:"})
	require.NoError(t, err)
	ctx := ctxT(t)
	require.NoError(t, s.Check(ctx))
	for i := range 64 {
		_, err := s.Claim(ctx, claimParams(fmt.Sprintf("ok1_spread_%d", i), oncekeystore.Idempotent))
		require.NoError(t, err)
	}
	for _, a := range addrs {
		n := redis.NewClient(&redis.Options{Addr: a})
		size, err := n.DBSize(ctx).Result()
		_ = n.Close()
		require.NoError(t, err)
		require.Positive(t, size, "node %s holds some of the records", a)
	}
	lr, err := s.List(ctx, &oncekeystore.ListParams{Tenant: "acme", Limit: 1000})
	require.NoError(t, err)
	require.Len(t, lr.Records, 64)
	fr, err := s.Forget(ctx, &oncekeystore.ForgetParams{Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, int64(64), fr.Deleted)

	// Subtests run in parallel; the cluster is thrown away at the end, so prefixes need no cleanup.
	var n atomic.Int64
	storetest.Run(t, func(t *testing.T) oncekeystore.Store {
		s, err := redisstore.New(rdb, &redisstore.Options{Prefix: fmt.Sprintf("conformance-%d:", n.Add(1))})
		require.NoError(t, err)
		return s
	})
}
