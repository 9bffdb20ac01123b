package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/faults"
	"github.com/oncekey/oncekey/oncekeystore"
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
	st := e.soak(soakConfig{ops: *flagSoakOps, strict: true})
	e.note("%s", st)
}

// soakConfig is one soak run.
type soakConfig struct {
	// ops is the number of operations, 4 per workflow.
	ops int
	// fault, when set, runs once, after half the operations have an effect, while the soak
	// goes on; it returns what it did, for the note.
	fault func() string
	// strict requires what the promise gives: every workflow completes with the effect that
	// landed, and nothing is double, lost or stuck. A soak that is not strict (a configuration
	// outside the promise) counts what breaks instead, in the result.
	strict bool
}

// soakStats is what a soak did, for the scenario's note.
type soakStats struct {
	ops, workers, kills, dropped, refused, receipts, replays int
	applied, notApplied                                      int64
	took                                                     time.Duration
	fault                                                    string
	// broken counts workflows that did not end with the effect that landed (strict: 0).
	broken int
}

func (s soakStats) String() string {
	out := fmt.Sprintf("%d ops in %.0fs (%.1f ops/s) over %d processes; %d SIGKILLs; %d answers dropped after commit, %d refused before; settled by receipt lookup %d, by the operator %d applied + %d not applied; %d replays",
		s.ops, s.took.Seconds(), float64(s.ops)/s.took.Seconds(), s.workers, s.kills, s.dropped, s.refused,
		s.receipts, s.applied, s.notApplied, s.replays)
	if s.fault != "" {
		out += "; " + s.fault
	}
	if s.broken > 0 {
		out += fmt.Sprintf("; %d workflows did not end with the effect that landed", s.broken)
	}
	return out
}

// soak runs cfg on e (see TestSoak) and audits it: strict, it requires the result the promise
// gives; otherwise it records what it measured in e's result.
func (e *env) soak(cfg soakConfig) soakStats {
	t := e.t
	const perWorkflow = 4
	ops, workers := cfg.ops, *flagSoakWorkers
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
			// A supervisor starts a fresh worker, again until it comes up: during a failover
			// it cannot reach its store at start-up and exits.
			err := start()
			for deadline := time.Now().Add(2 * time.Minute); err != nil && time.Now().Before(deadline) && killCtx.Err() == nil; {
				time.Sleep(time.Second)
				err = start()
			}
			if err != nil && killCtx.Err() == nil {
				killer <- err
				return
			}
		}
	}()

	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), *flagSoakBudget)
	defer cancel()
	faulted := make(chan string, 1)
	faultCtx, stopFault := context.WithCancel(ctx)
	defer stopFault()
	if cfg.fault != nil {
		go func() {
			for faultCtx.Err() == nil && len(e.ds.Effects()) < ops/2 {
				time.Sleep(50 * time.Millisecond)
			}
			if faultCtx.Err() != nil {
				faulted <- ""
				return
			}
			faulted <- cfg.fault()
		}()
	} else {
		faulted <- ""
	}
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
				Request: faults.Request{RequestID: fmt.Sprintf("soak-%05d-s%d", w, s), Customer: "acme", Subject: "soak"}})
		}
		// The agent proposes one of its calls again: the same operation, which must replay.
		in.Calls = append(in.Calls, in.Calls[w%len(in.Calls)])
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[w] = e.runWorkflow(ctx, fmt.Sprintf("soak-%05d", w), in, &results[w])
		}()
	}
	wg.Wait()
	st := soakStats{ops: ops, workers: workers, took: time.Since(began)}
	stopFault() // a fault under way finishes; one not begun never will
	st.fault = <-faulted
	if cfg.fault != nil {
		require.NotEmpty(t, st.fault, "the fault never ran: the soak ended before half its operations had an effect")
	}
	stopKiller()
	require.NoError(t, <-killer)
	stopOperator()

	done := 0
	for w, out := range results {
		if cfg.strict {
			require.NoError(t, errs[w], "workflow soak-%05d (budget %s)", w, *flagSoakBudget)
			require.NotEmpty(t, out, "soak-%05d", w)
		} else if errs[w] != nil || len(out) == 0 {
			t.Logf("soak-%05d: %v", w, errs[w])
			st.broken++
			continue
		}
		repeat := out[len(out)-1]
		out = out[:len(out)-1]
		ok := out[w%len(out)].Receipt == repeat.Receipt
		if cfg.strict {
			require.True(t, ok, "soak-%05d: the repeated proposal replayed the first result", w)
		}
		for _, r := range out {
			landed, found := e.ds.Lookup(r.Receipt.Key)
			ok = ok && r.Label.Status == oncekey.OutcomeApplied && found && landed == r.Receipt
			if cfg.strict {
				require.Equal(t, oncekey.OutcomeApplied, r.Label.Status, "soak-%05d: %+v", w, r.Label)
				require.True(t, found, "soak-%05d: the result's effect is in the ledger", w)
				require.Equal(t, landed, r.Receipt, "soak-%05d: the workflow holds the effect that landed", w)
			}
			done++
		}
		if !ok {
			st.broken++
		}
	}
	if cfg.strict {
		require.Equal(t, ops, done)
		e.check(ops, ops)
	} else {
		a := e.audit(e.ctx(auditTimeout(ops)))
		e.fill(a)
		e.res.Operations, e.audited = ops, true
		for _, p := range a.problems {
			t.Log("measured: " + p)
		}
	}
	inj := e.ds.Injected()
	st.dropped, st.refused = inj[faults.FaultDropAfterCommit], inj[faults.FaultRefuseBeforeCommit]
	st.kills = int(kills.Load())
	st.replays = e.ds.CountEvents(func(ev faults.WorkerEvent) bool { return ev.Outcome == string(oncekey.OutcomeReplayed) })
	for _, rec := range e.list(e.ctx(time.Minute), oncekeystore.StatusApplied) {
		if rec.ResolvedBy == "receipt:"+faults.ToolCreateReceipt {
			st.receipts++
		}
	}
	st.applied, st.notApplied = op.applied.Load(), op.notApplied.Load()
	return st
}

// runWorkflow starts the Calls workflow id with in and waits for its result in out. An error
// reaching Temporal (a server restarting, say) is retried until ctx ends: a start that did
// happen is found by its workflow ID (a duplicate start is refused), and the wait resumes. Only the workflow's own failure, or
// ctx's end, is returned.
func (e *env) runWorkflow(ctx context.Context, id string, in faults.CallsInput, out *[]faults.CallResult) error {
	wfID := e.wfID(id)
	started := false
	for {
		var run client.WorkflowRun
		var err error
		if !started {
			run, err = e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: wfID, TaskQueue: e.tq, WorkflowExecutionTimeout: 30 * time.Minute,
				WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			}, faults.WorkflowCalls, in)
			var already *serviceerror.WorkflowExecutionAlreadyStarted
			if errors.As(err, &already) { // an earlier attempt started it; its answer was lost
				run, err = e.c.GetWorkflow(ctx, wfID, ""), nil
			}
			if err == nil {
				started = true
				e.mu.Lock()
				e.workflows = append(e.workflows, wfID)
				e.mu.Unlock()
			}
		} else {
			run = e.c.GetWorkflow(ctx, wfID, "")
		}
		if err == nil {
			err = run.Get(ctx, out)
			var wfErr *temporal.WorkflowExecutionError
			if err == nil || errors.As(err, &wfErr) {
				return err
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (last: %v)", id, ctx.Err(), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
