// Command benchcmd measures pgstore against pgbench running the same SQL statements on the same
// database at the same concurrency, in the same run, and prints one line per figure:
//
//	BENCH name=<id> unit=ops/s ours=<n> baseline=<n> speedup=<n> baseline_is=<what>
//
// Figures: claim_complete_c1, claim_complete_c8, claim_complete_c32 (claim of a new key then
// complete, pairs per second) and replay_c8 (claims that find an applied record, per second).
// Each figure alternates ours and pgbench for -rounds rounds of -duration each and reports the
// medians. It works in a fresh schema of the database (TEST_DATABASE_URL, else DATABASE_URL, else
// postgres://root@127.0.0.1:5432/test) and drops it at the end. Needs pgbench on PATH (Debian:
// apt-get install postgresql-client).
//
// Run: go run ./pgstore/internal/benchcmd [-duration 5s] [-rounds 3] [-only regexp]
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/pgstore"
)

// The workload's constant arguments, identical for ours and pgbench.
const (
	tool        = "create_ticket"
	version     = "v1"
	fingerprint = "3f8a1c0e9b7d6a5f4e3d2c1b0a99887766554433221100ffeeddccbbaa998877"
	workflowID  = "bench-workflow"
	stepID      = "record_issue"
	lease       = 30 * time.Second
	retention   = 7 * 24 * time.Hour
	tombstone   = 30 * 24 * time.Hour
	result      = `{"ticket":"T-1042","status":"open"}`
	effectRef   = "T-1042"
	replayKeys  = 1000
)

func main() {
	duration := flag.Duration("duration", 5*time.Second, "length of each measured round")
	rounds := flag.Int("rounds", 3, "rounds per figure (ours and pgbench alternate); medians are reported")
	only := flag.String("only", "", "run only figures whose name matches this regexp")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process to the file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchcmd:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*duration, *rounds, *only); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "benchcmd:", err)
		os.Exit(1)
	}
}

func databaseURL() string {
	for _, k := range []string{"TEST_DATABASE_URL", "DATABASE_URL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "postgres://root@127.0.0.1:5432/test?sslmode=disable"
}

type figure struct {
	name    string
	clients int
	ours    func(ctx context.Context, s *pgstore.Store, clients int, d time.Duration) (float64, error)
	script  string // pgbench script
	tenant  string // pgbench's tenant (ours uses its own, so keys never collide)
}

func run(duration time.Duration, rounds int, only string) error {
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		return fmt.Errorf("pgbench not found on PATH (Debian: apt-get install postgresql-client): %w", err)
	}
	filter := regexp.MustCompile(only)
	ctx := context.Background()
	url := databaseURL()

	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "oncekey_bench_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect %s: %w", url, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return err
	}
	defer func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			fmt.Fprintln(os.Stderr, "benchcmd: drop schema:", err)
		}
	}()

	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 32
	pgstore.ConfigurePool(cfg, nil)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		return err
	}
	// Unqualified table name: ours and pgbench resolve it through search_path to the same table
	// and send byte-identical statement text.
	var sopts *pgstore.Options
	if os.Getenv("BENCH_NO_TIMEOUT") != "" {
		sopts = &pgstore.Options{StatementTimeout: -1}
	}
	s := pgstore.New(pool, sopts)
	if err := seedReplay(ctx, s); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "oncekey-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	claimNames := []string{"tenant", "k", "tool", "version", "fp", "wf", "step", "effect", "lease", "retention", "tombstone", "tok"}
	completeNames := []string{"tenant", "k", "c_epoch", "status", "result", "c_failure", "ref"}
	claimComplete := "\\set k random(1, 9000000000000000000)\n\\set tok random(1, 9000000000000000000)\n" +
		pgbenchSQL(pgstore.ClaimSQL("oncekey_operations"), claimNames) + "\n\\gset c_\n" +
		pgbenchSQL(pgstore.CompleteSQL("oncekey_operations"), completeNames) + "\n"
	replayNames := append([]string{"tenant", "r"}, claimNames[2:]...)
	replay := "\\set r random(1, " + strconv.Itoa(replayKeys) + ")\n\\set tok random(1, 9000000000000000000)\n" +
		pgbenchSQL(pgstore.ClaimSQL("oncekey_operations"), replayNames) + "\n"

	figures := []figure{
		{name: "claim_complete_c1", clients: 1, ours: oursClaimComplete, script: claimComplete, tenant: "pgbench"},
		{name: "claim_complete_c8", clients: 8, ours: oursClaimComplete, script: claimComplete, tenant: "pgbench"},
		{name: "claim_complete_c32", clients: 32, ours: oursClaimComplete, script: claimComplete, tenant: "pgbench"},
		{name: "replay_c8", clients: 8, ours: oursReplay, script: replay, tenant: "replay"},
	}
	for _, f := range figures {
		if !filter.MatchString(f.name) {
			continue
		}
		script := filepath.Join(dir, f.name+".sql")
		if err := os.WriteFile(script, []byte(f.script), 0o600); err != nil {
			return err
		}
		var ours, base []float64
		for r := range rounds {
			// Alternate which side goes first, so drift in the machine's load hits both.
			var o, p float64
			oursRun := func() (err error) {
				o, err = f.ours(ctx, s, f.clients, duration)
				if err != nil {
					err = fmt.Errorf("%s ours: %w", f.name, err)
				}
				return err
			}
			baseRun := func() (err error) {
				p, err = runPgbench(ctx, pgbench, url, schema, script, f.tenant, f.clients, duration)
				if err != nil {
					err = fmt.Errorf("%s pgbench: %w", f.name, err)
				}
				return err
			}
			first, second := oursRun, baseRun
			if r%2 == 1 {
				first, second = baseRun, oursRun
			}
			if err := first(); err != nil {
				return err
			}
			if err := second(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "# %s round %d: ours %.0f ops/s, pgbench %.0f ops/s\n", f.name, r+1, o, p)
			ours, base = append(ours, o), append(base, p)
		}
		o, p := median(ours), median(base)
		fmt.Printf("BENCH name=%s unit=ops/s ours=%.1f baseline=%.1f speedup=%.3f baseline_is=pgbench_same_sql_prepared_c%d\n",
			f.name, o, p, o/p, f.clients)
	}
	return nil
}

// pgbenchSQL turns the statement's $N parameters into pgbench variables :names[N-1], so that
// pgbench -M prepared sends the same statement text (up to whitespace) with the same values.
// The statement is put on one line: pgbench ends a SQL command at a line end.
func pgbenchSQL(q string, names []string) string {
	q = regexp.MustCompile(`\$(\d+)`).ReplaceAllStringFunc(q, func(m string) string {
		n, _ := strconv.Atoi(m[1:])
		return ":" + names[n-1] + " "
	})
	return strings.Join(strings.Fields(q), " ")
}

func runPgbench(ctx context.Context, pgbench, url, schema, script, tenant string, clients int, d time.Duration) (float64, error) {
	threads := min(clients, runtime.NumCPU())
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads),
		"-T", strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second))), "-f", script,
		"-D", "tenant=" + tenant, "-D", "tool=" + tool, "-D", "version=" + version, "-D", "fp=" + fingerprint,
		"-D", "wf=" + workflowID, "-D", "step=" + stepID, "-D", "effect=" + strconv.Itoa(int(oncekey.Effectful)),
		"-D", "lease=" + strconv.FormatInt(lease.Microseconds(), 10),
		"-D", "retention=" + strconv.FormatInt(retention.Microseconds(), 10),
		"-D", "tombstone=" + strconv.FormatInt(tombstone.Microseconds(), 10),
		"-D", "status=applied", "-D", "result=\\x" + hex.EncodeToString([]byte(result)),
		"-D", "ref=" + effectRef,
		url}
	cmd := exec.CommandContext(ctx, pgbench, args...)
	cmd.Env = append(os.Environ(), "PGOPTIONS=-c search_path="+schema)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	if regexp.MustCompile(`number of failed transactions: [1-9]`).Match(out) || regexp.MustCompile(`(?i)error`).Match(out) {
		return 0, fmt.Errorf("pgbench reported errors: %s", out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no tps in pgbench output: %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

var keySeq atomic.Int64

func claimParams(tenant, key string) *oncekey.ClaimParams {
	return &oncekey.ClaimParams{Tenant: tenant, OperationKey: key, Tool: tool, Version: version,
		Fingerprint: fingerprint, WorkflowID: workflowID, StepID: stepID, Effect: oncekey.Effectful,
		Lease: lease, Retention: retention, Tombstone: tombstone}
}

// drive runs op from clients goroutines for d and returns completed ops per second.
func drive(ctx context.Context, clients int, d time.Duration, op func(ctx context.Context) error) (float64, error) {
	var (
		n     atomic.Int64
		wg    sync.WaitGroup
		first error
		once  sync.Once
	)
	deadline := time.Now().Add(d)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := op(ctx); err != nil {
					once.Do(func() { first = err })
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds(), first
}

func oursClaimComplete(ctx context.Context, s *pgstore.Store, clients int, d time.Duration) (float64, error) {
	res := []byte(result)
	return drive(ctx, clients, d, func(ctx context.Context) error {
		key := strconv.FormatInt(time.Now().UnixNano()<<8|keySeq.Add(1)&0xff, 10)
		c, err := s.Claim(ctx, claimParams("ours", key))
		if err != nil {
			return err
		}
		if !c.Acquired {
			return fmt.Errorf("claim of new key %s not acquired", key)
		}
		_, err = s.Complete(ctx, &oncekey.CompleteParams{Tenant: "ours", OperationKey: key, Epoch: c.Record.Epoch,
			Status: oncekey.StatusApplied, Result: res, Failure: []byte{}, EffectReference: effectRef})
		return err
	})
}

func oursReplay(ctx context.Context, s *pgstore.Store, clients int, d time.Duration) (float64, error) {
	return drive(ctx, clients, d, func(ctx context.Context) error {
		key := strconv.Itoa(1 + int(randUint64()%replayKeys))
		c, err := s.Claim(ctx, claimParams("replay", key))
		if err != nil {
			return err
		}
		if c.Acquired || c.Record.Status != oncekey.StatusApplied || string(c.Record.Result) != result {
			return fmt.Errorf("replay of %s did not find the applied record: %+v", key, c)
		}
		return nil
	})
}

func randUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}

// seedReplay creates the applied records the replay figure claims again: keys "1".."1000" in
// tenant "replay".
func seedReplay(ctx context.Context, s *pgstore.Store) error {
	for i := 1; i <= replayKeys; i++ {
		key := strconv.Itoa(i)
		c, err := s.Claim(ctx, claimParams("replay", key))
		if err != nil {
			return err
		}
		if _, err := s.Complete(ctx, &oncekey.CompleteParams{Tenant: "replay", OperationKey: key, Epoch: c.Record.Epoch,
			Status: oncekey.StatusApplied, Result: []byte(result), Failure: []byte{}, EffectReference: effectRef}); err != nil {
			return err
		}
	}
	return nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
