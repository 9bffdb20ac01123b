package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/faults"
)

// The soak: -faults.soak-ops operations (4 per workflow, half of them with a receipt lookup,
// each workflow proposing one of its calls a second time) over -faults.soak-workers worker
// processes, on a downstream that loses 10% of its answers after committing, refuses 5% before
// committing and delays every request by up to 100ms, while one worker process is SIGKILLed
// every -faults.soak-kill-every and a fresh one started. An operator settles every unknown
// outcome from the downstream's ledger, as a person would. At the end the downstream's effects
// equal the distinct operations, none is double, lost or stuck, and every workflow holds the
// result that landed.
func TestSoak(t *testing.T) {
	e := newEnv(t, "soak")
	const perWorkflow = 4
	ops, workers := *flagSoakOps, *flagSoakWorkers
	require.Positive(t, ops)
	require.Positive(t, workers)
	seed := uint64(time.Now().UnixNano())
	t.Logf("soak: %d operations, %d workers, kill every %s, fault seed %d", ops, workers, *flagSoakKill, seed)
	e.ds.SetRandom(faults.RandomFaults{DropAfterCommit: 0.10, RefuseBeforeCommit: 0.05, MaxDelay: 100 * time.Millisecond, Seed: seed})

	var (
		mu    sync.Mutex
		live  []*child
		spawn atomic.Int64
	)
	start := func() error {
		c, err := e.spawn(fmt.Sprintf("s%d", spawn.Add(1)), false)
		if err != nil {
			return err
		}
		mu.Lock()
		live = append(live, c)
		mu.Unlock()
		return nil
	}
	for range workers {
		require.NoError(t, start())
	}

	opCtx, stopOperator := context.WithCancel(context.Background())
	defer stopOperator()
	op := e.runOperator(opCtx)

	killCtx, stopKiller := context.WithCancel(context.Background())
	defer stopKiller()
	var kills atomic.Int64
	killer := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(seed, 1))
		tick := time.NewTicker(*flagSoakKill)
		defer tick.Stop()
		for {
			select {
			case <-killCtx.Done():
				killer <- nil
				return
			case <-tick.C:
			}
			mu.Lock()
			i := rng.IntN(len(live))
			victim := live[i]
			live = append(live[:i], live[i+1:]...)
			mu.Unlock()
			victim.kill()
			kills.Add(1)
			if err := start(); err != nil {
				killer <- err
				return
			}
		}
	}()

	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), *flagSoakBudget)
	defer cancel()
	nwf := (ops + perWorkflow - 1) / perWorkflow
	results := make([][]faults.CallResult, nwf)
	errs := make([]error, nwf)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for w := range nwf {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			errs[w] = ctx.Err()
			continue
		}
		in := faults.CallsInput{StartToClose: 10 * time.Second}
		for s := 0; s < perWorkflow && w*perWorkflow+s < ops; s++ {
			tool := faults.ToolCreate // unknown outcomes wait for the operator
			if s%2 == 1 {
				tool = faults.ToolCreateReceipt // unknown outcomes settled by the receipt lookup
			}
			in.Calls = append(in.Calls, faults.Call{Tool: tool, StepID: fmt.Sprintf("s%d", s),
				Request: faults.Request{RequestID: fmt.Sprintf("soak-%04d-s%d", w, s), Customer: "acme", Subject: "soak"}})
		}
		// The agent proposes one of its calls again: the same operation, which must replay.
		in.Calls = append(in.Calls, in.Calls[w%len(in.Calls)])
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var run client.WorkflowRun
			run, errs[w] = e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: e.wfID(fmt.Sprintf("soak-%04d", w)), TaskQueue: e.tq, WorkflowExecutionTimeout: 30 * time.Minute,
			}, faults.WorkflowCalls, in)
			if errs[w] != nil {
				return
			}
			e.mu.Lock()
			e.workflows = append(e.workflows, run.GetID())
			e.mu.Unlock()
			errs[w] = run.Get(ctx, &results[w])
		}()
	}
	wg.Wait()
	took := time.Since(began)
	stopKiller()
	require.NoError(t, <-killer)
	stopOperator()

	for w, err := range errs {
		require.NoError(t, err, "workflow soak-%04d (budget %s)", w, *flagSoakBudget)
	}
	done := 0
	for w, out := range results {
		require.NotEmpty(t, out, "soak-%04d", w)
		repeat := out[len(out)-1]
		out = out[:len(out)-1]
		require.Equal(t, out[w%len(out)].Receipt, repeat.Receipt, "soak-%04d: the repeated proposal replayed the first result", w)
		for _, r := range out {
			require.Equal(t, oncekey.OutcomeApplied, r.Label.Status, "soak-%04d: %+v", w, r.Label)
			landed, ok := e.ds.Lookup(r.Receipt.Key)
			require.True(t, ok, "soak-%04d: the result's effect is in the ledger", w)
			require.Equal(t, landed, r.Receipt, "soak-%04d: the workflow holds the effect that landed", w)
			done++
		}
	}
	require.Equal(t, ops, done)
	e.check(ops, ops)
	inj := e.ds.Injected()
	replays := e.ds.CountEvents(func(ev faults.WorkerEvent) bool { return ev.Outcome == string(oncekey.OutcomeReplayed) })
	receipts := 0
	for _, rec := range e.list(e.ctx(time.Minute), oncekey.StatusApplied) {
		if rec.ResolvedBy == "receipt:"+faults.ToolCreateReceipt {
			receipts++
		}
	}
	e.note("%d ops in %.0fs (%.1f ops/s) over %d processes; %d SIGKILLs; %d answers dropped after commit, %d refused before; settled by receipt lookup %d, by the operator %d applied + %d not applied; %d replays",
		ops, took.Seconds(), float64(ops)/took.Seconds(), workers, kills.Load(), inj[faults.FaultDropAfterCommit], inj[faults.FaultRefuseBeforeCommit],
		receipts, op.applied.Load(), op.notApplied.Load(), replays)
}
