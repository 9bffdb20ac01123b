// Package benchdrive holds what the store benchmarks (pgstore's and redisstore's benchcmd)
// share: the workload's constant arguments, the loop that drives clients, and the round
// statistics. It is internal: nothing here is API.
package benchdrive

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
)

// The workload's constant arguments, the same for every store and for its baseline.
const (
	Tool        = "create_ticket"
	Version     = "v1"
	Fingerprint = "3f8a1c0e9b7d6a5f4e3d2c1b0a99887766554433221100ffeeddccbbaa998877"
	WorkflowID  = "bench-workflow"
	StepID      = "record_issue"
	Lease       = 30 * time.Second
	Retention   = 7 * 24 * time.Hour
	Tombstone   = 30 * 24 * time.Hour
	Result      = `{"ticket":"T-1042","status":"open"}`
	EffectRef   = "T-1042"
	// ReplayKeys is the number of applied records the replay figures claim again at random.
	ReplayKeys = 1000
)

// ClaimParams returns the workload's claim of key for tenant.
func ClaimParams(tenant, key string) *oncekeystore.ClaimParams {
	return &oncekeystore.ClaimParams{Tenant: tenant, OperationKey: key, Tool: Tool, Version: Version,
		Fingerprint: Fingerprint, WorkflowID: WorkflowID, StepID: StepID, Effect: oncekey.Effectful,
		Lease: Lease, Retention: Retention, Tombstone: Tombstone}
}

// Drive runs op from clients goroutines (client is 0..clients-1) for d and returns completed ops
// per second, with the first error an op returned (its goroutine stops there).
func Drive(ctx context.Context, clients int, d time.Duration, op func(ctx context.Context, client int) error) (float64, error) {
	start := time.Now()
	n, err := Count(ctx, clients, d, op)
	return float64(n) / time.Since(start).Seconds(), err
}

// Count runs op as Drive does and returns the number of ops completed, with the first error.
// Each goroutine starts no op after d has passed, so the run ends when the last op started in
// time does.
func Count(ctx context.Context, clients int, d time.Duration, op func(ctx context.Context, client int) error) (int64, error) {
	var (
		n     atomic.Int64
		wg    sync.WaitGroup
		first error
		once  sync.Once
	)
	deadline := time.Now().Add(d)
	for client := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := op(ctx, client); err != nil {
					once.Do(func() { first = err })
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return n.Load(), first
}

// Median returns the median of xs (0 for none).
func Median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// PerOp returns cpu spent over opsPerSec ops per second for d, in µs per op.
func PerOp(cpu time.Duration, opsPerSec float64, d time.Duration) float64 {
	if opsPerSec <= 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / (opsPerSec * d.Seconds())
}

// SelfCPU returns this process's user+system CPU time so far.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// StopServer stops a private server started as cmd: sig, then a kill after wait if it has not
// exited. Then it removes dir, the server's data directory.
func StopServer(cmd *exec.Cmd, sig os.Signal, wait time.Duration, dir string) {
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(wait):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(dir)
}

// SeedReplay creates the applied records the replay figures claim again: keys "1".."ReplayKeys"
// in tenant "replay", each claimed and completed with the workload's result.
func SeedReplay(ctx context.Context, s oncekeystore.Store) error {
	for i := 1; i <= ReplayKeys; i++ {
		key := strconv.Itoa(i)
		c, err := s.Claim(ctx, ClaimParams("replay", key))
		if err != nil {
			return err
		}
		if _, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "replay", OperationKey: key, Epoch: c.Record.Epoch,
			Status: oncekeystore.StatusApplied, Result: []byte(Result), Failure: []byte{}, EffectReference: EffectRef}); err != nil {
			return err
		}
	}
	return nil
}

// AllowedCPUs returns this process's CPU affinity as the kernel lists it (Cpus_allowed_list of
// /proc/self/status), or "" when it cannot be read.
func AllowedCPUs() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Main runs a benchmark command's body: it writes a CPU profile of the process to profile while
// run runs (none when profile is ""), and on an error from either prints "benchcmd: ERR" to
// stderr and exits with status 1.
func Main(profile string, run func() error) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "benchcmd:", err)
		os.Exit(1)
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fail(err)
		}
	}
	err := run()
	pprof.StopCPUProfile()
	if err != nil {
		fail(err)
	}
}

// Replay drives clients concurrent replays of the records SeedReplay wrote (random keys of
// 1..ReplayKeys) for d, each checked to be the applied record, and returns replays per second.
func Replay(ctx context.Context, s oncekeystore.Store, clients int, d time.Duration) (float64, error) {
	return Drive(ctx, clients, d, func(ctx context.Context, _ int) error {
		key := strconv.Itoa(1 + rand.IntN(ReplayKeys))
		c, err := s.Claim(ctx, ClaimParams("replay", key))
		if err != nil {
			return err
		}
		if c.Acquired || c.Record.Status != oncekeystore.StatusApplied || string(c.Record.Result) != Result {
			return fmt.Errorf("replay of %s did not find the applied record: %+v", key, c)
		}
		return nil
	})
}

// ProcessCPU returns, for each of names, the user+system CPU time so far of every process on this
// machine whose command name is that name (the kernel's comm: the executable's name, at most 15
// bytes), with the time of their exited children (Linux /proc, read once; zeros elsewhere). Its
// resolution is the kernel's clock tick, 10 ms: read it around work that takes seconds.
func ProcessCPU(names ...string) []time.Duration {
	cpu := make([]time.Duration, len(names))
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: utime and stime are the 14th and 15th fields, cutime and
		// cstime the 16th and 17th.
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open {
			continue
		}
		i := slices.Index(names, string(b[open+1:end]))
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[end+1:]))
		if len(f) < 15 {
			continue
		}
		for _, v := range f[11:15] {
			n, _ := strconv.ParseInt(v, 10, 64)
			cpu[i] += time.Duration(n) * 10 * time.Millisecond // USER_HZ = 100
		}
	}
	return cpu
}
