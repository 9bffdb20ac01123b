// Command benchcmd measures redisstore against its floor: the same Lua scripts, with the same
// keys and arguments, run by a bare go-redis loop (EVALSHA, the reply's status code and epoch
// read, nothing else), on the same server at the same concurrency, in the same run. It prints
// one line per figure:
//
//	BENCH name=<id> unit=ops/s ours=<n> baseline=<n> speedup=<n> baseline_is=<what>
//
// Figures: redis_claim_complete_c1, _c8, _c32 (claim of a new key then complete, pairs per
// second) and redis_replay_c8 (claims that find an applied record, per second), and
// redis_claim_complete_coalesced_c8 and _c32: the same pairs on a Store with
// redisstore.Options.Coalesce (concurrent calls in one pipeline) against the same floor. With
// -pg-replay n (pgstore's replay_pinned_c8 of the same make bench run) it also prints
// redis_vs_pg_replay_c8: redisstore's replay against pgstore's. Each figure alternates ours and
// the floor for -rounds rounds of -duration each and reports the medians.
//
// It starts a private redis-server of its own (a temporary directory, a free port, AOF on with
// appendfsync everysec, no RDB snapshots, no automatic AOF rewrite: its fork stalled whichever side's
// round it fell in) pinned to -server-cpu with taskset; start this
// process pinned to another CPU (taskset -c 1), so both clients ask the same server on its own
// core. BENCH_DEBUG=1 adds this process's CPU time per operation for ours and the floor.
//
// Run (from redisstore/): taskset -c 1 go run ./internal/benchcmd [-duration 3s] [-rounds 5] [-only regexp] [-server-cpu 0] [-pg-replay n] [-cpuprofile file]
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncekey/oncekey/internal/dev/benchdrive"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/redisstore"
	"github.com/oncekey/oncekey/redisstore/internal/lua"
)

// prefix starts every key the benchmark writes.
const prefix = "oncekey-bench:"

func main() {
	duration := flag.Duration("duration", 3*time.Second, "length of each measured round")
	rounds := flag.Int("rounds", 5, "rounds per figure (ours and the floor alternate); medians are reported")
	only := flag.String("only", "", "run only figures whose name matches this regexp")
	serverCPU := flag.Int("server-cpu", 0, "CPU the private redis-server is pinned to; -1: not pinned")
	pgReplay := flag.Float64("pg-replay", 0, "pgstore's replay_pinned_c8 (ops/s) of the same run, for redis_vs_pg_replay_c8")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process to the file")
	flag.Parse()
	benchdrive.Main(*cpuProfile, func() error { return run(*duration, *rounds, *only, *serverCPU, *pgReplay) })
}

type figure struct {
	name    string
	clients int
	ours    func(ctx context.Context, s *redisstore.Store, clients int, d time.Duration) (float64, error)
	floor   func(ctx context.Context, rdb *redis.Client, clients int, d time.Duration) (float64, error)
	// coalesce runs ours on a Store with redisstore.Options.Coalesce.
	coalesce bool
}

func run(duration time.Duration, rounds int, only string, serverCPU int, pgReplay float64) error {
	filter := regexp.MustCompile(only)
	ctx := context.Background()
	srv, err := startRedis(serverCPU)
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Fprintf(os.Stderr, "# private redis-server on %s pinned to CPU %d, clients on CPU %s\n", srv.addr, serverCPU, benchdrive.AllowedCPUs())

	// One client for both sides, with a connection per benchmark client.
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr, PoolSize: 64, MinIdleConns: 32})
	defer rdb.Close()
	s, err := redisstore.New(rdb, &redisstore.Options{Prefix: prefix})
	if err != nil {
		return err
	}
	if err := s.Check(ctx); err != nil {
		return err
	}
	if err := benchdrive.SeedReplay(ctx, s); err != nil {
		return err
	}
	figures := []figure{
		{"redis_claim_complete_c1", 1, oursClaimComplete, floorClaimComplete, false},
		{"redis_claim_complete_c8", 8, oursClaimComplete, floorClaimComplete, false},
		{"redis_claim_complete_c32", 32, oursClaimComplete, floorClaimComplete, false},
		{"redis_replay_c8", 8, oursReplay, floorReplay, false},
		{"redis_claim_complete_coalesced_c8", 8, oursClaimComplete, floorClaimComplete, true},
		{"redis_claim_complete_coalesced_c32", 32, oursClaimComplete, floorClaimComplete, true},
	}
	coalesced, err := redisstore.New(rdb, &redisstore.Options{Prefix: prefix, Coalesce: true})
	if err != nil {
		return err
	}
	for _, f := range figures {
		if !filter.MatchString(f.name) {
			continue
		}
		var ours, floors, oursCPU, floorCPU []float64
		for r := range rounds {
			var o, fl float64
			// measure runs one side into its ops per second and CPU per op.
			measure := func(side string, drive func() (float64, error), ops *float64, cpu *[]float64) func() error {
				return func() error {
					c0 := benchdrive.SelfCPU()
					var err error
					if *ops, err = drive(); err != nil {
						return fmt.Errorf("%s %s: %w", f.name, side, err)
					}
					*cpu = append(*cpu, benchdrive.PerOp(benchdrive.SelfCPU()-c0, *ops, duration))
					return nil
				}
			}
			store := s
			if f.coalesce {
				store = coalesced
			}
			oursRun := measure("ours", func() (float64, error) { return f.ours(ctx, store, f.clients, duration) }, &o, &oursCPU)
			floorRun := measure("floor", func() (float64, error) { return f.floor(ctx, rdb, f.clients, duration) }, &fl, &floorCPU)
			runs := []func() error{oursRun, floorRun}
			if r%2 == 1 {
				runs[0], runs[1] = floorRun, oursRun
			}
			for _, run := range runs {
				if err := run(); err != nil {
					return err
				}
			}
			fmt.Fprintf(os.Stderr, "# %s round %d: ours %.0f ops/s, floor %.0f ops/s\n", f.name, r+1, o, fl)
			ours, floors = append(ours, o), append(floors, fl)
		}
		o, fl := benchdrive.Median(ours), benchdrive.Median(floors)
		if os.Getenv("BENCH_DEBUG") != "" {
			fmt.Fprintf(os.Stderr, "#   client CPU per op: ours %.1f µs, floor %.1f µs\n", benchdrive.Median(oursCPU), benchdrive.Median(floorCPU))
		}
		fmt.Printf("BENCH name=%s unit=ops/s ours=%.1f baseline=%.1f speedup=%.3f baseline_is=bare_go_redis_same_scripts_c%d_server_pinned_apart\n",
			f.name, o, fl, o/fl, f.clients)
		if f.name == "redis_replay_c8" && pgReplay > 0 {
			fmt.Printf("BENCH name=redis_vs_pg_replay_c8 unit=ops/s ours=%.1f baseline=%.1f speedup=%.3f baseline_is=pgstore_replay_pinned_c8\n",
				o, pgReplay, o/pgReplay)
		}
	}
	return nil
}

func newKey() string {
	return "ok1_" + strconv.FormatUint(rand.Uint64(), 16) + strconv.FormatUint(rand.Uint64(), 16)
}

func oursClaimComplete(ctx context.Context, s *redisstore.Store, clients int, d time.Duration) (float64, error) {
	res := []byte(benchdrive.Result)
	return benchdrive.Drive(ctx, clients, d, func(ctx context.Context, _ int) error {
		key := newKey()
		c, err := s.Claim(ctx, benchdrive.ClaimParams("ours", key))
		if err != nil {
			return err
		}
		if !c.Acquired {
			return fmt.Errorf("claim of new key %s not acquired", key)
		}
		_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "ours", OperationKey: key, Epoch: c.Record.Epoch,
			Status: oncekeystore.StatusApplied, Result: res, Failure: []byte{}, EffectReference: benchdrive.EffectRef})
		return err
	})
}

func oursReplay(ctx context.Context, s *redisstore.Store, clients int, d time.Duration) (float64, error) {
	return benchdrive.Replay(ctx, s, clients, d)
}

// The floor: the store's scripts with bare go-redis calls. The keys and arguments are the
// store's (lua.Layout, the same argument order); the reply is checked by its code and, for the
// claim, the epoch field only.

var (
	layout       = lua.NewLayout(prefix, redisstore.DefaultBuckets)
	floorEffect  = int(oncekeystore.Effectful)
	floorLease   = benchdrive.Lease.Microseconds()
	floorRetain  = benchdrive.Retention.Microseconds()
	floorTombWin = benchdrive.Tombstone.Microseconds()
)

// epochField is the position of the epoch in a record reply: code, now, then F's fields.
const epochField = 2 + 9

func floorClaim(ctx context.Context, rdb *redis.Client, tenant, key string) ([]any, error) {
	return rdb.EvalSha(ctx, lua.Claim.Hash(), layout.RecordKeys(tenant, key, true), tenant, key, benchdrive.Tool, benchdrive.Version, benchdrive.Fingerprint,
		benchdrive.WorkflowID, benchdrive.StepID, floorEffect, floorLease, floorRetain, floorTombWin, rand.Int64(), "default").Slice()
}

func floorClaimComplete(ctx context.Context, rdb *redis.Client, clients int, d time.Duration) (float64, error) {
	res := []byte(benchdrive.Result)
	return benchdrive.Drive(ctx, clients, d, func(ctx context.Context, _ int) error {
		key := newKey()
		v, err := floorClaim(ctx, rdb, "floor", key)
		if err != nil {
			return fmt.Errorf("floor claim: %w", err)
		}
		if v[0] != "A" {
			return fmt.Errorf("floor claim of new key %s: code %v", key, v[0])
		}
		epoch, _ := strconv.ParseInt(v[epochField].(string), 10, 64)
		v, err = rdb.EvalSha(ctx, lua.Fenced.Hash(), layout.RecordKeys("floor", key, true), "floor", key, epoch, rand.Int64(), "complete",
			"applied", benchdrive.EffectRef, "1", res, "1", []byte{}).Slice()
		if err != nil {
			return fmt.Errorf("floor complete: %w", err)
		}
		if v[0] != "K" {
			return fmt.Errorf("floor complete of %s: code %v", key, v[0])
		}
		return nil
	})
}

func floorReplay(ctx context.Context, rdb *redis.Client, clients int, d time.Duration) (float64, error) {
	return benchdrive.Drive(ctx, clients, d, func(ctx context.Context, _ int) error {
		key := strconv.Itoa(1 + rand.IntN(benchdrive.ReplayKeys))
		v, err := floorClaim(ctx, rdb, "replay", key)
		if err != nil {
			return fmt.Errorf("floor replay: %w", err)
		}
		if v[0] != "O" {
			return fmt.Errorf("floor replay of %s: code %v", key, v[0])
		}
		return nil
	})
}

// redisServer is the private redis-server of the run.
type redisServer struct {
	addr string
	dir  string
	cmd  *exec.Cmd
}

// startRedis starts redis-server in a temporary directory on a free port, pinned to cpu with
// taskset (not pinned when cpu is negative), and waits until it answers.
func startRedis(cpu int) (*redisServer, error) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (Debian: apt-get install redis-server): %w", err)
	}
	dir, err := os.MkdirTemp("", "oncekey-bench-redis")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--appendonly", "yes", "--appendfsync", "everysec", "--auto-aof-rewrite-percentage", "0", "--daemonize", "no", "--logfile", filepath.Join(dir, "redis.log")}
	cmd := exec.Command(server, args...)
	if cpu >= 0 {
		taskset, err := exec.LookPath("taskset")
		if err != nil {
			return nil, fmt.Errorf("taskset not found (Debian: apt-get install util-linux): %w", err)
		}
		cmd = exec.Command(taskset, append([]string{"-c", strconv.Itoa(cpu), server}, args...)...)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	srv := &redisServer{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, cmd: cmd}
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr})
	defer rdb.Close()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if err := rdb.Ping(context.Background()).Err(); err == nil {
			return srv, nil
		} else if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			srv.Stop()
			return nil, fmt.Errorf("private redis-server on port %d did not start: %v: %s", port, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server and removes its directory.
func (s *redisServer) Stop() {
	benchdrive.StopServer(s.cmd, syscall.SIGTERM, 20*time.Second, s.dir)
}
