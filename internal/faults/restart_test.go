package faults_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/dev/privatepg"
	"github.com/oncekey/oncekey/internal/faults"
	"github.com/oncekey/oncekey/internal/testing/testenv"
)

// Postgres is stopped in the middle of a run and started again. While it is down, claims fail
// closed (StoreUnavailable: the body does not run); afterwards the same worker processes carry on
// without a restart, unknown outcomes are settled by an operator from the ledger, and every
// operation has exactly one effect. The server is a private instance the test starts
// (testenv.PrivatePostgres), so no shared server is disturbed.
func TestPostgresRestart(t *testing.T) {
	e, pg := newRestartEnv(t, "postgres_restart")
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
	pg.Stop()
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
	require.NoError(t, pg.Start(e.ctx(time.Minute)))
	downFor := time.Since(down)
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

// newRestartEnv is newEnv on a private Postgres instance the scenario may stop and start
// (testenv.PrivatePostgres), so no shared server is disturbed. The scenario is skipped with
// -faults.pg-restart=false.
func newRestartEnv(t *testing.T, scenario string) (*env, *privatepg.Instance) {
	t.Helper()
	if !*flagPGRestart {
		newEnvSkip(t, scenario, "left out with -faults.pg-restart=false")
	}
	if testing.Short() {
		newEnvSkip(t, scenario, "needs Postgres and a Temporal dev server")
	}
	pg := testenv.PrivatePostgres(t)
	e := newEnvOn(t, scenario, pg.URL)
	t.Cleanup(func() {
		// Whatever happened, leave the server running (the audit and the schema drop need it).
		if !pg.Running() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := pg.Start(ctx); err != nil {
				t.Log(err)
			}
		}
	})
	return e, pg
}

// newEnvSkip records the scenario as skipped and skips the test.
func newEnvSkip(t *testing.T, scenario, why string) {
	t.Helper()
	t.Cleanup(func() { record(faults.Result{Scenario: scenario, Skipped: true, Note: why}) })
	t.Skip(why)
}
