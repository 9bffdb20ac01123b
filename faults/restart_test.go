package faults_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/faults"
)

// pgCtl runs pg_ctlcluster on the local cluster ("start", "stop").
func pgCtl(action string) error {
	versions, _ := filepath.Glob("/etc/postgresql/*")
	if len(versions) != 1 {
		return fmt.Errorf("want one cluster under /etc/postgresql, found %v", versions)
	}
	out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", filepath.Base(versions[0]), "main", action).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctlcluster %s: %v: %s", action, err, out)
	}
	return nil
}

func pgUp() bool { return exec.Command("pg_isready", "-h", "127.0.0.1", "-q").Run() == nil }

// Postgres is stopped in the middle of a run and started again. While it is down, claims fail
// closed (StoreUnavailable: the body does not run); afterwards the same worker processes carry on
// without a restart, unknown outcomes are settled by an operator from the ledger, and every
// operation has exactly one effect.
func TestPostgresRestart(t *testing.T) {
	if !*flagPGRestart && os.Getenv("ONCEKEY_TEST_PG_RESTART") != "1" {
		newEnvSkip(t, "postgres_restart", "restarts Postgres: run with -faults.pg-restart or ONCEKEY_TEST_PG_RESTART=1 (make faults and make test's serial step do)")
	}
	if _, err := exec.LookPath("pg_ctlcluster"); err != nil {
		newEnvSkip(t, "postgres_restart", "pg_ctlcluster not found: the server is not a local Debian cluster")
	}
	e := newEnv(t, "postgres_restart")
	t.Cleanup(func() {
		// Whatever happened, leave the server running (the audit and the schema drop need it).
		if !pgUp() {
			if err := pgCtl("start"); err != nil {
				t.Log(err)
			}
		}
	})
	w1, w2 := e.child("p1", false), e.child("p2", false)
	opCtx, stopOperator := context.WithCancel(context.Background())
	defer stopOperator()
	op := e.runOperator(opCtx)

	const perWave, calls = 10, 2
	var (
		mu   sync.Mutex
		runs []client.WorkflowRun
	)
	requestID := func(w, i, s int) string { return fmt.Sprintf("wave%d-%02d-s%d", w, i, s) }
	wave := func(w int) {
		for i := range perWave {
			id := fmt.Sprintf("wave%d-%02d", w, i)
			in := faults.CallsInput{StartToClose: 10 * time.Second}
			for s := range calls {
				in.Calls = append(in.Calls, faults.Call{Tool: faults.ToolCreate, StepID: fmt.Sprintf("s%d", s),
					Request: faults.Request{RequestID: requestID(w, i, s), Customer: "acme", Subject: id}})
			}
			run := e.startCalls(id, in)
			mu.Lock()
			runs = append(runs, run)
			mu.Unlock()
		}
	}
	wave(0)
	require.Eventually(t, func() bool { return len(e.ds.Effects()) >= perWave/2 }, 3*time.Minute, 50*time.Millisecond, "no work before the stop")
	require.NoError(t, pgCtl("stop"))
	down := time.Now()
	wave(1) // proposed while the store is down
	require.Eventually(t, func() bool { return e.ds.CountEvents(isStoreUnavailable) >= 3 }, time.Minute, 50*time.Millisecond,
		"no claim failed closed while the store was down")
	unavailable := e.ds.CountEvents(isStoreUnavailable)
	// Fail closed: nothing proposed while the store is down reached the downstream.
	for i := range perWave {
		for s := range calls {
			require.Zero(t, e.ds.RequestArrivals(requestID(1, i, s)), "a tool ran without a claim")
		}
	}
	require.NoError(t, pgCtl("start"))
	downFor := time.Since(down)
	require.Eventually(t, pgUp, time.Minute, 100*time.Millisecond)
	wave(2)

	for _, run := range runs {
		for _, r := range e.calls(run) {
			require.Equal(t, oncekey.OutcomeApplied, r.Label.Status, "%s: %+v", run.GetID(), r.Label)
			landed, ok := e.ds.Lookup(r.Receipt.Key)
			require.True(t, ok)
			require.Equal(t, landed, r.Receipt)
		}
	}
	require.True(t, w1.alive() && w2.alive(), "the worker processes were never restarted")
	stopOperator()
	ops := 3 * perWave * calls
	e.check(ops, ops)
	e.note("down %.1fs: %d claims failed closed (StoreUnavailable); same 2 processes finished %d operations; operator settled %d applied, %d not applied",
		downFor.Seconds(), unavailable, ops, op.applied.Load(), op.notApplied.Load())
}

// newEnvSkip records the scenario as skipped and skips the test.
func newEnvSkip(t *testing.T, scenario, why string) {
	t.Helper()
	t.Cleanup(func() { record(faults.Result{Scenario: scenario, Skipped: true, Note: why}) })
	t.Skip(why)
}
