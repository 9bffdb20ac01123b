// Command faults runs oncekey's fault-injection suite (the tests of package faults, on a Temporal
// dev server and Postgres) with `go test`, then prints the table of scenarios and, last, exactly:
//
//	faults: passed=N total=N double_effects=N lost=N stuck=N
//
// A scenario outside the promise (a failover to an asynchronous standby, a Redis failover)
// reports what it measured; its counts are printed on a line of their own before the summary,
// not in it. It exits 0 only when go test passed, every scenario passed and the three counts are
// 0. A scenario that never reported (a crash, a timeout, a filter) counts as not passed. `make
// faults` runs it with the full soak (20,000 operations), the Postgres restart and failovers (a
// standby promoted by hand, and by Patroni), the Temporal restart, and the Redis failover
// (TestSentinelFailoverLoss, in the redisstore module, run after package faults).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/oncekey/oncekey/internal/faults"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("faults", flag.ContinueOnError)
	soakOps := fs.Int("soak-ops", 20000, "operations in the soak")
	soakWorkers := fs.Int("soak-workers", 4, "worker processes in the soak")
	soakKill := fs.Duration("soak-kill-every", 20*time.Second, "how often the soak SIGKILLs a worker and starts a fresh one")
	soakBudget := fs.Duration("soak-budget", 30*time.Minute, "how long a soak (the soak, each failover's) may take before it fails")
	failoverOps := fs.Int("failover-ops", 1000, "operations in the soak of each failover scenario (pg_failover_sync, pg_failover_patroni, pg_failover_async, temporal_restart)")
	redisOps := fs.Int("redis-ops", 20000, "operations in the Redis failover scenario (redis_failover)")
	lin := fs.Duration("lin-duration", 30*time.Second, "how long the linearizability scenario records histories")
	pgRestart := fs.Bool("pg-restart", true, "run the Postgres restart and failover scenarios (on private Postgres instances they start, never the shared server)")
	runRE := fs.String("run", "", "only the tests matching this regexp (go test -run, in package faults and for the Redis failover in redisstore); the others count as not run")
	verbose := fs.Bool("v", false, "verbose go test output")
	timeout := fs.Duration("timeout", 40*time.Minute, "go test timeout")
	out := fs.String("out", "", "directory for artifacts such as a non-linearizable history (default: a temp dir, printed on failure)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	report, err := os.CreateTemp("", "oncekey-faults-*.jsonl")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 2
	}
	report.Close()
	defer os.Remove(report.Name())

	goArgs := []string{"test", "-count=1", "-timeout", timeout.String()}
	if *verbose {
		goArgs = append(goArgs, "-v")
	}
	if *runRE != "" {
		goArgs = append(goArgs, "-run", *runRE)
	}
	goArgs = append(goArgs, "github.com/oncekey/oncekey/internal/faults", "-args",
		"-faults.report="+report.Name(),
		"-faults.soak-ops="+strconv.Itoa(*soakOps),
		"-faults.soak-workers="+strconv.Itoa(*soakWorkers),
		"-faults.soak-kill-every="+soakKill.String(),
		"-faults.soak-budget="+soakBudget.String(),
		"-faults.lin-duration="+lin.String(),
		"-faults.pg-restart="+strconv.FormatBool(*pgRestart),
		"-faults.failover-ops="+strconv.Itoa(*failoverOps),
	)
	if *out != "" {
		goArgs = append(goArgs, "-faults.out="+*out)
	}
	fmt.Printf("faults: go %v\n", goArgs)
	began := time.Now()
	cmd := exec.Command("go", goArgs...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	testErr := cmd.Run()
	if err := runRedisFailover(*runRE, *timeout, *redisOps, report.Name()); err != nil && testErr == nil {
		testErr = err
	}

	f, err := os.Open(report.Name())
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	results, rerr := faults.ReadResults(f)
	f.Close()
	verdict := "passed"
	if testErr != nil {
		verdict = "FAILED (" + testErr.Error() + ")"
	}
	if rerr != nil {
		fmt.Fprintln(os.Stderr, "faults:", rerr)
	}
	fmt.Printf("\nfaults: go test %s in %s\n\n", verdict, time.Since(began).Round(time.Second))
	s := faults.WriteReport(os.Stdout, results)
	if testErr != nil || rerr != nil || !s.OK() {
		return 1
	}
	return 0
}

// redisFailoverTest is the Redis failover scenario's test, in the redisstore module.
const redisFailoverTest = "TestSentinelFailoverLoss"

// runRedisFailover runs the Redis failover scenario (redisFailoverTest in the redisstore module,
// next to the root module's go.mod) when runRE selects it (or is empty), appending its row to
// report.
func runRedisFailover(runRE string, timeout time.Duration, ops int, report string) error {
	if runRE != "" {
		re, err := regexp.Compile(runRE)
		if err != nil || !re.MatchString(redisFailoverTest) {
			return nil
		}
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	args := []string{"test", "-count=1", "-timeout", timeout.String(), "-run", "^" + redisFailoverTest + "$", ".", "-args",
		"-faults.report=" + report, "-faults.redis-ops=" + strconv.Itoa(ops)}
	fmt.Printf("faults: (redisstore) go %v\n", args)
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(filepath.Dir(strings.TrimSpace(string(gomod))), "redisstore")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}
