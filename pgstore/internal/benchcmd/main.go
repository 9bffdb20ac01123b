// Command benchcmd measures pgstore against pgbench running the same SQL statements on the same
// database at the same concurrency, in the same run, and prints one line per figure:
//
//	BENCH name=<id> unit=ops/s ours=<n> baseline=<n> speedup=<n> baseline_is=<what>
//
// Figures: claim_complete_c1, claim_complete_c8, claim_complete_c32 (claim of a new key then
// complete, pairs per second), replay_c8 (claims that find an applied record, per second) and
// transactional_c8 (transactional.go: a Transactional tool's calls against its Effectful variant
// and against pgbench).
// Each figure alternates ours and pgbench for -rounds rounds of -duration each and reports the
// medians. It works in a fresh schema of the database (TEST_DATABASE_URL, else DATABASE_URL, else
// postgres://root@127.0.0.1:5432/test) and drops it at the end. Needs pgbench on PATH (Debian:
// apt-get install postgresql-client).
//
// claim_complete_coalesced_c8 and _c32 are the claim and complete of a new key on a Store with
// pgstore.Options.Coalesce, against the same pgbench script (one statement per call), and
// claim_complete_coalesced_c1_p50 and _p99 one client's pair latency on that Store against the
// Store without coalescing (coalesce.go).
//
// Also purge_1m (seconds to purge -purge-rows records past their tombstone window vs one DELETE
// of the same rows) and purge_1m_claim_p99 (claim p99 while the purge runs vs on the idle table).
// With BENCH_DEBUG=1 it prints pgbench's per-statement latencies and ours, the client CPU time per
// operation of each side (this process's and pgbench's user+system time), the server's CPU time
// per operation (the postgres processes', when the server runs on this machine) and the
// machine's idle time. With -floor it also runs the pgx floor (see floor.go) in every round of
// the claim and replay figures and prints, on standard error, its ratio to pgbench beside ours.
// With -activity-context ours and the floor run under a context that can be canceled and has a
// deadline, as every call in a Temporal activity does, instead of context.Background (whose
// statements pgconn does not watch, while the store's, with their statement timeout, it does).
//
// With -pinned-server-cpu N it runs the claim and replay figures against a private Postgres
// instance of its own pinned to CPU N (pinned.go), and names them claim_complete_pinned_c1, …,
// replay_pinned_c8; start it pinned to another CPU (taskset -c 1). It then also prints
// worker_cpu_claim_complete: this process's CPU time per claim+complete at 8 clients, in µs,
// against the pgx floor's (speedup = floor / ours), measured in 40 alternating slices of 250 ms a
// side after the claim_complete_c8 rounds (workercpu.go), with the rounds' figures and pgbench's
// on standard error. Without
// it, the figures share the machine's cores with the server and are informational: their
// baseline_is ends in _shared_cores_informational.
//
// Run: go run ./pgstore/internal/benchcmd [-duration 5s] [-rounds 3] [-only regexp] [-purge-rows n] [-floor] [-activity-context] [-pinned-server-cpu n]
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncekey/oncekey/internal/dev/benchdrive"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/pgstore/internal/benchsql"
)

func main() {
	duration := flag.Duration("duration", 5*time.Second, "length of each measured round")
	rounds := flag.Int("rounds", 3, "rounds per figure (ours and pgbench alternate); medians are reported")
	only := flag.String("only", "", "run only figures whose name matches this regexp")
	purgeRows := flag.Int("purge-rows", 1_000_000, "records purged by the purge_1m figures")
	flag.IntVar(&purgeBatch, "purge-batch", 0, "PurgeParams.BatchSize for purge_1m (0: the default, oncekeystore.DefaultPurgeBatchSize)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process to the file")
	flag.BoolVar(&activityContext, "activity-context", false, "run ours and the floor under a cancelable context with a deadline an hour away, as a call in a Temporal activity runs (default: context.Background)")
	flag.BoolVar(&floor, "floor", false, "also run the pgx floor (floor.go) in every round of the claim and replay figures and print its ratio to pgbench")
	pinnedCPU := flag.Int("pinned-server-cpu", -1, "run the claim and replay figures against a private Postgres pinned to this CPU (start this process pinned to another: taskset -c 1)")
	flag.Parse()
	benchdrive.Main(*cpuProfile, func() error { return start(*pinnedCPU, *duration, *rounds, *only, *purgeRows) })
}

// start runs the figures, against a private instance pinned to pinnedCPU when it is not
// negative, which it stops before returning.
func start(pinnedCPU int, duration time.Duration, rounds int, only string, purgeRows int) error {
	url := databaseURL()
	if pinnedCPU >= 0 {
		floor = true
		if cpus := benchdrive.AllowedCPUs(); cpus == "" || strings.ContainsAny(cpus, ",-") || cpus == strconv.Itoa(pinnedCPU) {
			return fmt.Errorf("-pinned-server-cpu %d: this process runs on CPUs %q; start it pinned to one other CPU (taskset -c 1)", pinnedCPU, cpus)
		}
		pg, err := startPrivatePostgres(context.Background(), pinnedCPU, url)
		if err != nil {
			return err
		}
		defer pg.Close()
		fmt.Fprintf(os.Stderr, "# private postgres pinned to CPU %d, clients on CPU %s; settings from the main cluster: %v\n", pinnedCPU, benchdrive.AllowedCPUs(), pg.Settings)
		url, pinned = pg.URL, true
	}
	return run(url, duration, rounds, only, purgeRows)
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
	script  string                                                                                       // pgbench script
	tenant  string                                                                                       // pgbench's tenant (ours uses its own, so keys never collide)
	floor   func(ctx context.Context, pool *pgxpool.Pool, clients int, d time.Duration) (float64, error) // see floor.go; nil: none
	// coalesce runs ours on a Store with pgstore.Options.Coalesce.
	coalesce bool
}

func run(url string, duration time.Duration, rounds int, only string, purgeRows int) error {
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		return fmt.Errorf("pgbench not found on PATH (Debian: apt-get install postgresql-client): %w", err)
	}
	filter := regexp.MustCompile(only)
	ctx := context.Background()
	if activityContext {
		// As inside a Temporal activity, whose context can always be canceled: pgconn watches
		// every statement's context, the floor's too (the store's always has a deadline).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Hour)
		defer cancel()
	}

	schema, drop, err := newSchema(ctx, url, "oncekey_bench_")
	if err != nil {
		return err
	}
	defer drop()

	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 32
	pgstore.ConfigurePool(cfg, nil)
	pool, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	// Unqualified table name: ours and pgbench resolve it through search_path to the same table
	// and send byte-identical statement text.
	s := pgstore.New(pool, nil)
	if err := benchdrive.SeedReplay(ctx, s); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "oncekey-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	claimNames := []string{"tenant", "k", "tool", "version", "fp", "wf", "step", "effect", "lease", "retention", "tombstone", "tok", "ns"}
	completeNames := []string{"tenant", "k", "c_epoch", "status", "result", "c_failure", "ref"}
	claimComplete := "\\set k random(1, 9000000000000000000)\n\\set tok random(1, 9000000000000000000)\n" +
		pgbenchSQL(benchsql.Claim("oncekey_operations"), claimNames) + "\n\\gset c_\n" +
		pgbenchSQL(benchsql.Complete("oncekey_operations"), completeNames) + "\n"
	replayNames := append([]string{"tenant", "r"}, claimNames[2:]...)
	replay := "\\set r random(1, " + strconv.Itoa(benchdrive.ReplayKeys) + ")\n\\set tok random(1, 9000000000000000000)\n" +
		pgbenchSQL(benchsql.Claim("oncekey_operations"), replayNames) + "\n"

	figures := []figure{
		{name: "claim_complete_c1", clients: 1, ours: oursClaimComplete, script: claimComplete, tenant: "pgbench", floor: floorClaimComplete},
		{name: "claim_complete_c8", clients: 8, ours: oursClaimComplete, script: claimComplete, tenant: "pgbench", floor: floorClaimComplete},
		{name: "claim_complete_c32", clients: 32, ours: oursClaimComplete, script: claimComplete, tenant: "pgbench", floor: floorClaimComplete},
		{name: "replay_c8", clients: 8, ours: oursReplay, script: replay, tenant: "replay", floor: floorReplay},
		{name: "claim_complete_coalesced_c8", clients: 8, ours: oursClaimComplete, script: claimComplete, tenant: "pgbench", coalesce: true},
		{name: "claim_complete_coalesced_c32", clients: 32, ours: oursClaimComplete, script: claimComplete, tenant: "pgbench", coalesce: true},
	}
	coalesced := pgstore.New(pool, &pgstore.Options{Coalesce: true})
	for _, f := range figures {
		if !filter.MatchString(f.name) {
			continue
		}
		ourStore := s
		if f.coalesce {
			ourStore = coalesced
		}
		script := filepath.Join(dir, f.name+".sql")
		if err := os.WriteFile(script, []byte(f.script), 0o600); err != nil {
			return err
		}
		var ours, base, floors []float64
		var oursCPUs, floorCPUs, pgbenchCPUs []float64 // worker CPU per op, µs
		for r := range rounds {
			// Alternate which side goes first, so drift in the machine's load hits both.
			var o, p float64
			skipped := false
			var oursCPU, oursIdle, pgbenchIdle, oursServer, pgbenchServer time.Duration
			oursRun := func() (err error) {
				if err := settle(ctx, pool); err != nil {
					return err
				}
				// The same number of client threads as pgbench's -j: with fewer goroutines than
				// Ps, Go's scheduler spins idle Ps up and down on every network wake-up, a cost
				// of the process's setup, not of the store.
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(clientThreads(f.clients)))
				cpu0, idle0, srv0 := benchdrive.SelfCPU(), idleCPU(), serverCPU()
				o, err = f.ours(ctx, ourStore, f.clients, duration)
				oursCPU, oursIdle, oursServer = benchdrive.SelfCPU()-cpu0, idleCPU()-idle0, serverCPU()-srv0
				if err != nil {
					err = fmt.Errorf("%s ours: %w", f.name, err)
				}
				return err
			}
			baseRun := func() (err error) {
				if err := settle(ctx, pool); err != nil {
					return err
				}
				before, err := countStatuses(ctx, pool, f.tenant)
				if err != nil {
					return err
				}
				idle0, srv0 := idleCPU(), serverCPU()
				p, err = runPgbench(ctx, pgbench, url, schema, script, f.tenant, f.clients, duration)
				pgbenchIdle, pgbenchServer = idleCPU()-idle0, serverCPU()-srv0
				if errors.Is(err, errNoTPS) {
					// A round pgbench reported nothing for (it stalled on a loaded machine) is
					// left out, not the whole figure.
					fmt.Fprintf(os.Stderr, "# %s round %d: pgbench reported no tps; the round is left out\n", f.name, r+1)
					skipped = true
					return nil
				}
				if err != nil {
					return fmt.Errorf("%s pgbench: %w", f.name, err)
				}
				pgbenchCPUs = append(pgbenchCPUs, benchdrive.PerOp(time.Duration(pgbenchCPU.Load()), p, duration))
				after, err := countStatuses(ctx, pool, f.tenant)
				if err != nil {
					return err
				}
				// pgbench must have done the work: every claim completed, none left pending.
				if after["pending"] != 0 || (f.tenant == "pgbench" && after["applied"] <= before["applied"]) {
					return fmt.Errorf("%s pgbench: records before %v, after %v: the script did not complete its claims", f.name, before, after)
				}
				fmt.Fprintf(os.Stderr, "#   pgbench records %v -> %v\n", before, after)
				return nil
			}
			runs := []func() error{oursRun, baseRun}
			if r%2 == 1 {
				runs[0], runs[1] = baseRun, oursRun
			}
			var fl float64
			if floor && f.floor != nil {
				runs = append(runs, func() (err error) {
					if err := settle(ctx, pool); err != nil {
						return err
					}
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(clientThreads(f.clients)))
					cpu0 := benchdrive.SelfCPU()
					if fl, err = f.floor(ctx, pool, f.clients, duration); err != nil {
						return fmt.Errorf("%s pgx floor: %w", f.name, err)
					}
					floorCPUs = append(floorCPUs, benchdrive.PerOp(benchdrive.SelfCPU()-cpu0, fl, duration))
					floors = append(floors, fl)
					return nil
				})
			}
			for _, run := range runs {
				if err := run(); err != nil {
					return err
				}
			}
			if skipped {
				continue
			}
			fmt.Fprintf(os.Stderr, "# %s round %d: ours %.0f ops/s, pgbench %.0f ops/s", f.name, r+1, o, p)
			if fl > 0 {
				fmt.Fprintf(os.Stderr, ", pgx floor %.0f ops/s", fl)
			}
			fmt.Fprintln(os.Stderr)
			ours, base = append(ours, o), append(base, p)
			oursCPUs = append(oursCPUs, benchdrive.PerOp(oursCPU, o, duration))
			if os.Getenv("BENCH_DEBUG") != "" {
				fmt.Fprintf(os.Stderr, "#   client CPU per op: ours %s, pgbench %s; machine idle: ours %s, pgbench %s\n",
					time.Duration(float64(oursCPU)/(o*duration.Seconds())), time.Duration(float64(pgbenchCPU.Swap(0))/(p*duration.Seconds())),
					oursIdle, pgbenchIdle)
				fmt.Fprintf(os.Stderr, "#   server (postgres processes) CPU per op: ours %s, pgbench %s\n",
					time.Duration(float64(oursServer)/(o*duration.Seconds())), time.Duration(float64(pgbenchServer)/(p*duration.Seconds())))
				if n := dbgN.Swap(0); n > 0 {
					fmt.Fprintf(os.Stderr, "#   ours: claim %s complete %s\n", time.Duration(dbgClaim.Swap(0)/n), time.Duration(dbgComplete.Swap(0)/n))
				}
			}
		}
		if len(base) == 0 {
			return fmt.Errorf("%s: pgbench reported no tps in any of %d rounds", f.name, rounds)
		}
		o, p := benchdrive.Median(ours), benchdrive.Median(base)
		if len(floors) > 0 {
			fl := benchdrive.Median(floors)
			fmt.Fprintf(os.Stderr, "# %s pgx floor: %.1f ops/s, %.3f of pgbench; ours is %.3f of the floor (medians of %d rounds)\n",
				f.name, fl, fl/p, o/fl, len(floors))
		}
		name, baselineIs := f.name, fmt.Sprintf("pgbench_same_sql_prepared_c%d", f.clients)
		if f.coalesce {
			baselineIs = fmt.Sprintf("pgbench_same_sql_prepared_one_statement_per_call_c%d", f.clients)
		}
		if pinned {
			name, baselineIs = pinnedName(f.name), baselineIs+"_server_pinned_apart"
		} else {
			baselineIs += "_shared_cores_informational"
		}
		fmt.Printf("BENCH name=%s unit=ops/s ours=%.1f baseline=%.1f speedup=%.3f baseline_is=%s\n", name, o, p, o/p, baselineIs)
		if pinned && f.name == "claim_complete_c8" {
			oc, fc, pc := benchdrive.Median(oursCPUs), benchdrive.Median(floorCPUs), benchdrive.Median(pgbenchCPUs)
			fmt.Fprintf(os.Stderr, "# worker CPU per claim+complete at 8 clients over the rounds: ours %.1f µs, pgx floor %.1f µs, pgbench %.1f µs (medians of %d rounds)\n",
				oc, fc, pc, len(oursCPUs))
			if err := settle(ctx, pool); err != nil {
				return err
			}
			oc, fc, ratio, err := workerCPU(ctx, pool, s, f.clients, workerSlices, workerSlice)
			if err != nil {
				return fmt.Errorf("worker_cpu_claim_complete: %w", err)
			}
			fmt.Fprintf(os.Stderr, "# worker CPU per claim+complete at 8 clients in %d alternating slices of %v a side: ours %.1f µs, pgx floor %.1f µs (medians); "+
				"median of the pairs' floor / ours %.3f\n", workerSlices, workerSlice, oc, fc, ratio)
			if !activityContext {
				// Informational: the same under a context like an activity's, which pgconn
				// watches for the floor too (see -activity-context).
				actx, cancel := context.WithTimeout(ctx, time.Hour)
				aoc, afc, aratio, err := workerCPU(actx, pool, s, f.clients, workerSlices, workerSlice)
				cancel()
				if err != nil {
					return fmt.Errorf("worker_cpu_claim_complete under an activity's context: %w", err)
				}
				fmt.Fprintf(os.Stderr, "# the same under a cancelable context with a deadline, as in an activity (informational): ours %.1f µs, pgx floor %.1f µs (medians); "+
					"median of the pairs' floor / ours %.3f\n", aoc, afc, aratio)
			}
			fmt.Printf("BENCH name=worker_cpu_claim_complete unit=µs ours=%.1f baseline=%.1f speedup=%.3f baseline_is=pgx_floor_client_cpu_per_claim_complete_c8\n",
				oc, fc, fc/oc)
		}
	}
	// The latency figures run after the throughput ones: their rows (tenant "ours") would
	// otherwise grow the part of the table ours writes before pgbench's, and skew those ratios.
	for _, clients := range []int{1, 8} {
		if filter.MatchString(latencyFigures[clients]) {
			if err := coalescedLatency(ctx, pool, s, coalesced, clients, duration, rounds); err != nil {
				return err
			}
		}
	}
	if filter.MatchString("transactional_c8") {
		if err := transactionalFigure(ctx, pool, s, pgbench, url, schema, dir, duration, rounds); err != nil {
			return err
		}
	}
	if !pinned && (filter.MatchString("purge_1m") || filter.MatchString("purge_1m_claim_p99")) {
		if err := purgeFigures(ctx, url, cfg, purgeRows); err != nil {
			return fmt.Errorf("purge_1m: %w", err)
		}
	}
	return nil
}

// newSchema creates a schema named prefix and random hex in the database at url; drop drops it
// with everything in it.
func newSchema(ctx context.Context, url, prefix string) (schema string, drop func(), err error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = prefix + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", nil, fmt.Errorf("connect %s: %w", url, err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close(ctx)
		return "", nil, err
	}
	return schema, func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			fmt.Fprintln(os.Stderr, "benchcmd: drop schema:", err)
		}
		admin.Close(context.Background())
	}, nil
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
	return runPgbenchEffect(ctx, pgbench, url, schema, script, tenant, clients, d, oncekeystore.Effectful)
}

// errNoTPS is runPgbench's error when pgbench printed no rate for the run.
var errNoTPS = errors.New("no tps in pgbench output")

// runPgbenchEffect is runPgbench with the claims' effect class.
func runPgbenchEffect(ctx context.Context, pgbench, url, schema, script, tenant string, clients int, d time.Duration, effect oncekeystore.Effect) (float64, error) {
	threads := clientThreads(clients)
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads),
		"-T", strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second))), "-f", script,
		"-D", "tenant=" + tenant, "-D", "tool=" + benchdrive.Tool, "-D", "version=" + benchdrive.Version, "-D", "fp=" + benchdrive.Fingerprint,
		"-D", "ns=default", "-D", "wf=" + benchdrive.WorkflowID, "-D", "step=" + benchdrive.StepID, "-D", "effect=" + strconv.Itoa(int(effect)),
		"-D", "lease=" + strconv.FormatInt(benchdrive.Lease.Microseconds(), 10),
		"-D", "retention=" + strconv.FormatInt(benchdrive.Retention.Microseconds(), 10),
		"-D", "tombstone=" + strconv.FormatInt(benchdrive.Tombstone.Microseconds(), 10),
		"-D", "status=applied", "-D", "result=\\x" + hex.EncodeToString([]byte(benchdrive.Result)),
		"-D", "ref=" + benchdrive.EffectRef,
		url}
	if os.Getenv("BENCH_DEBUG") != "" {
		args = append([]string{"-r"}, args...)
	}
	cmd := exec.CommandContext(ctx, pgbench, args...)
	cmd.Env = append(os.Environ(), "PGOPTIONS=-c search_path="+schema)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	pgbenchCPU.Store(int64(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()))
	if os.Getenv("BENCH_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "%s\n", out)
	}
	if regexp.MustCompile(`number of failed transactions: [1-9]`).Match(out) || regexp.MustCompile(`(?i)error`).Match(out) {
		return 0, fmt.Errorf("pgbench reported errors: %s", out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("%w: %s", errNoTPS, out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// clientThreads is the number of client threads both sides run with: pgbench's -j, and the
// GOMAXPROCS of this process while ours runs.
func clientThreads(clients int) int { return min(clients, runtime.NumCPU()) }

// settle gives each measured run the same start: a vacuum of the table, so that dead row
// versions left by the previous run (a replay rewrites its row) are cleared first. A refusal
// (the table belongs to another role) is reported once and ignored.
func settle(ctx context.Context, pool *pgxpool.Pool) error {
	for _, q := range []string{"VACUUM oncekey_operations"} {
		if _, err := pool.Exec(ctx, q); err != nil {
			if settleWarned.CompareAndSwap(false, true) {
				fmt.Fprintf(os.Stderr, "# benchcmd: %s: %v (runs start without it)\n", q, err)
			}
		}
	}
	return nil
}

var settleWarned atomic.Bool

// pinnedName is the name of a figure measured against the pinned private instance:
// claim_complete_c8 → claim_complete_pinned_c8.
func pinnedName(name string) string {
	i := strings.LastIndex(name, "_c")
	return name[:i] + "_pinned" + name[i:]
}

var (
	pinned                      bool // -pinned-server-cpu given
	floor                       bool // -floor
	activityContext             bool // -activity-context
	dbgClaim, dbgComplete, dbgN atomic.Int64
	pgbenchCPU                  atomic.Int64 // user+system time of the last pgbench run, ns
)

// idleCPU returns the machine's idle time so far, summed over its CPUs (Linux /proc/stat).
func idleCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	if len(f) < 6 {
		return 0
	}
	idle, _ := strconv.ParseInt(f[4], 10, 64)
	iowait, _ := strconv.ParseInt(f[5], 10, 64)
	return time.Duration(idle+iowait) * 10 * time.Millisecond // USER_HZ = 100
}

// serverCPU returns the user+system CPU time so far of every process on this machine named
// postgres and of their exited children (pgbench's backends, once pgbench disconnects, are the
// postmaster's): the server's side of a run when it runs here, 0 otherwise.
func serverCPU() time.Duration { return benchdrive.ProcessCPU("postgres")[0] }

func oursClaimComplete(ctx context.Context, s *pgstore.Store, clients int, d time.Duration) (float64, error) {
	return benchdrive.Drive(ctx, clients, d, func(ctx context.Context, _ int) error { return oursPair(ctx, s) })
}

var benchResult = []byte(benchdrive.Result)

// oursPair claims a new key on s and completes it.
func oursPair(ctx context.Context, s *pgstore.Store) error {
	// A random key in the range pgbench draws from, so both insert at random places in the index.
	key := strconv.FormatUint(1+randUint64()%9000000000000000000, 10)
	t0 := time.Now()
	c, err := s.Claim(ctx, benchdrive.ClaimParams("ours", key))
	if err != nil {
		return err
	}
	if !c.Acquired {
		return fmt.Errorf("claim of new key %s not acquired", key)
	}
	t1 := time.Now()
	_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "ours", OperationKey: key, Epoch: c.Record.Epoch,
		Status: oncekeystore.StatusApplied, Result: benchResult, Failure: []byte{}, EffectReference: benchdrive.EffectRef})
	dbgClaim.Add(int64(t1.Sub(t0)))
	dbgComplete.Add(int64(time.Since(t1)))
	dbgN.Add(1)
	return err
}

func oursReplay(ctx context.Context, s *pgstore.Store, clients int, d time.Duration) (float64, error) {
	return benchdrive.Replay(ctx, s, clients, d)
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

// countStatuses counts the tenant's records by status.
func countStatuses(ctx context.Context, pool *pgxpool.Pool, tenant string) (map[string]int64, error) {
	rows, err := pool.Query(ctx, `SELECT status, count(*) FROM oncekey_operations WHERE tenant = $1 GROUP BY status`, tenant)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	var st string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error { out[st] = n; return nil })
	return out, err
}

// purgeFigures measures purge_1m (Purge of n records past their tombstone window, default
// batches, vs one DELETE of the same rows on identical data) and purge_1m_claim_p99 (p99 of
// claims made while the purge runs vs claims on the idle table). It works in its own schema.
var purgeBatch int

func purgeFigures(ctx context.Context, url string, base *pgxpool.Config, n int) error {
	schema, drop, err := newSchema(ctx, url, "oncekey_bench_purge_")
	if err != nil {
		return err
	}
	defer drop()
	cfg := base.Copy()
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	// The purge runs without a statement timeout of its own: batches are short by design, and
	// the baseline's single DELETE must not be cut off.
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "0"
	pool, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	s := pgstore.New(pool, &pgstore.Options{StatementTimeout: -1})
	populate := func() error {
		if _, err := pool.Exec(ctx, `TRUNCATE oncekey_operations`); err != nil {
			return err
		}
		// Records whose retention and tombstone window are both over, as months of traffic leave them.
		if _, err := pool.Exec(ctx, `INSERT INTO oncekey_operations (tenant, operation_key, tool, version,
    fingerprint, workflow_id, step_id, effect, status, epoch, claim_token, result, effect_ref,
    created_at, updated_at, expires_at, tombstone_until)
SELECT 'tenant-' || (g % 50), 'ok1_' || md5(g::text) || md5((g + 1)::text), 'create_ticket', 'v1',
    md5(g::text) || md5(g::text), 'wf-' || g, 'record_issue', 3, 'applied', 1, g, $2::bytea, 'T-' || g,
    now() - interval '40 days' - g * interval '1 millisecond', now() - interval '40 days' + g * interval '1 millisecond',
    now() - interval '33 days' - g * interval '1 millisecond', now() - interval '3 days' - g * interval '1 millisecond'
FROM generate_series(1, $1::int) AS g`, n, []byte(benchdrive.Result)); err != nil {
			return err
		}
		_, err := pool.Exec(ctx, `VACUUM ANALYZE oncekey_operations`)
		return err
	}

	// Claims on the idle table.
	if err := populate(); err != nil {
		return err
	}
	idle, err := claimLatencies(ctx, s, 3*time.Second, nil)
	if err != nil {
		return err
	}

	// Ours: Purge, with claims running alongside.
	if err := populate(); err != nil {
		return err
	}
	stop := make(chan struct{})
	type lat struct {
		d   []time.Duration
		err error
	}
	during := make(chan lat, 1)
	go func() {
		d, err := claimLatencies(ctx, s, 0, stop)
		during <- lat{d, err}
	}()
	start := time.Now()
	pr, err := s.Purge(ctx, &oncekeystore.PurgeParams{BatchSize: purgeBatch})
	ours := time.Since(start)
	close(stop)
	got := <-during
	if err != nil {
		return err
	}
	if got.err != nil {
		return got.err
	}
	if pr.Deleted != int64(n) {
		return fmt.Errorf("purge deleted %d of %d records", pr.Deleted, n)
	}

	// Baseline: one DELETE of the same rows.
	if err := populate(); err != nil {
		return err
	}
	start = time.Now()
	tag, err := pool.Exec(ctx, `DELETE FROM oncekey_operations WHERE tombstone_until <= now()`)
	baseline := time.Since(start)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("baseline deleted %d of %d records", tag.RowsAffected(), n)
	}
	fmt.Fprintf(os.Stderr, "# purge_1m: %d records, %d batches in %s; one DELETE in %s; claims during purge: %d\n",
		n, pr.Batches, ours.Round(time.Millisecond), baseline.Round(time.Millisecond), len(got.d))
	fmt.Printf("BENCH name=purge_1m unit=s ours=%.3f baseline=%.3f speedup=%.3f baseline_is=one_DELETE_of_the_same_rows\n",
		ours.Seconds(), baseline.Seconds(), baseline.Seconds()/ours.Seconds())
	pIdle, pDuring := p99(idle), p99(got.d)
	fmt.Printf("BENCH name=purge_1m_claim_p99 unit=ns/op ours=%d baseline=%d speedup=%.3f baseline_is=claim_p99_on_the_idle_table\n",
		pDuring.Nanoseconds(), pIdle.Nanoseconds(), float64(pIdle)/float64(pDuring))
	return nil
}

// claimLatencies claims new keys one after another, for d or until stop is closed, and returns
// each claim's latency.
func claimLatencies(ctx context.Context, s *pgstore.Store, d time.Duration, stop <-chan struct{}) ([]time.Duration, error) {
	var out []time.Duration
	end := time.Now().Add(d)
	for i := 0; ; i++ {
		if stop != nil {
			select {
			case <-stop:
				return out, nil
			default:
			}
		} else if time.Now().After(end) {
			return out, nil
		}
		key := fmt.Sprintf("ok1_lat_%d_%d", time.Now().UnixNano(), i)
		t0 := time.Now()
		c, err := s.Claim(ctx, benchdrive.ClaimParams("latency", key))
		if err != nil {
			return out, err
		}
		out = append(out, time.Since(t0))
		if !c.Acquired {
			return out, fmt.Errorf("claim of new key %s not acquired", key)
		}
	}
}

func p99(ds []time.Duration) time.Duration { return quantile(ds, 99) }

// quantile returns the q-th percentile of ds (0 for none).
func quantile(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)*q)/100]
}

// openMigrated opens a pool on cfg and migrates the schema its search_path names.
func openMigrated(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pgstore.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}
