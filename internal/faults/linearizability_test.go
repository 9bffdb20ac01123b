package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// Linearizability of pgstore. Eight goroutines issue claim (which acquires, takes over an
// expired Idempotent lease, marks an expired Effectful lease unknown, or observes), renew,
// complete, release, mark-unknown, resolve and get on a small key space for
// -faults.lin-duration, with 200ms leases that they often let run out. The histories are checked
// with porcupine against a sequential model of the Store contract.
//
// Time. Whether a lease has expired is judged by Postgres at now(), which is some instant inside
// the operation's [call, return] interval: the server starts the statement after the client
// sends it and answers before the client receives, and both run on this host's clock. The model
// therefore keeps each pending record's lease end as an interval [lo, hi] of database time (exact
// when an operation returned it; [call+lease, +inf) after an operation whose outcome is not
// known) and lets an operation see the lease expired only if lo <= its return time, and live
// only if hi > its call time; an operation that sets a lease must report a lease end within
// [call+lease, return+lease]. Both bounds carry a 1ms tolerance for clock granularity. So the
// model is nondeterministic exactly where the history cannot tell, and deterministic elsewhere.
//
// An operation that fails with anything but a typed answer (ErrLostClaim, ErrNotFound,
// StatusConflictError) may or may not have taken effect: it is recorded with an open-ended
// return and the model lets it take any of its possible effects, or none.

const (
	linLease = 200 * time.Millisecond
	linTol   = int64(1000) // µs
)

type linInput struct {
	Op     string // claim, renew, complete, release, unknown, resolve, get
	Key    string
	FP     string
	Effect oncekey.Effect
	Epoch  int64
	Status oncekeystore.Status // complete: applied/failed; resolve: applied/released/failed
	Lease  int64               // µs
	Call   int64               // µs, wall clock
}

type linOutput struct {
	Err          string // "", lost, notfound, conflict, ambiguous
	Acquired     bool
	TookOver     bool
	Mismatch     bool
	Expired      bool
	Status       oncekeystore.Status
	Epoch        int64
	FP           string
	LeaseUntil   int64 // µs; 0 when none
	LeaseExpired bool
	Ret          int64 // µs, wall clock; math.MaxInt64 for ambiguous
}

// linState is the model of one record (porcupine partitions the history by key).
type linState struct {
	Exists           bool
	Status           oncekeystore.Status
	Epoch            int64
	FP               string
	Effect           oncekey.Effect
	LeaseLo, LeaseHi int64 // µs bounds of lease_until while pending
}

// candidate is one way the model can take an operation: the state after it and the answer it
// gives. newLease marks a lease set by the operation (its value comes from the answer).
type candidate struct {
	next     linState
	want     linOutput
	newLease bool
	oldLease bool // the answer reports the existing lease_until
}

func (s linState) canExpire(ret int64) bool { return s.LeaseLo <= satAdd(ret, linTol) }
func (s linState) canLive(call int64) bool  { return s.LeaseHi > call-linTol }

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func recOut(s linState) linOutput {
	return linOutput{Status: s.Status, Epoch: s.Epoch, FP: s.FP}
}

// candidates lists every way op can go from s.
func candidates(s linState, in linInput, ret int64) []candidate {
	pendingAt := func(epoch int64) linState {
		n := s
		n.Exists, n.Status, n.Epoch = true, oncekeystore.StatusPending, epoch
		return n
	}
	var cs []candidate
	switch in.Op {
	case "claim":
		switch {
		case !s.Exists:
			n := pendingAt(1)
			n.FP, n.Effect = in.FP, in.Effect
			cs = append(cs, candidate{next: n, want: linOutput{Acquired: true, Status: oncekeystore.StatusPending, Epoch: 1, FP: in.FP}, newLease: true})
		case s.FP != in.FP:
			for _, c := range observe(s, in, ret) {
				c.want.Mismatch = true
				cs = append(cs, c)
			}
		case s.Status == oncekeystore.StatusReleased:
			n := pendingAt(s.Epoch + 1)
			n.Effect = in.Effect
			cs = append(cs, candidate{next: n, want: linOutput{Acquired: true, TookOver: true, Status: oncekeystore.StatusPending, Epoch: n.Epoch, FP: s.FP}, newLease: true})
		case s.Status == oncekeystore.StatusPending:
			if s.canExpire(ret) {
				if s.Effect == oncekey.Idempotent {
					n := pendingAt(s.Epoch + 1)
					n.Effect = in.Effect
					cs = append(cs, candidate{next: n, want: linOutput{Acquired: true, TookOver: true, Status: oncekeystore.StatusPending, Epoch: n.Epoch, FP: s.FP}, newLease: true})
				} else {
					n := s
					n.Status, n.LeaseLo, n.LeaseHi = oncekeystore.StatusUnknown, 0, 0
					cs = append(cs, candidate{next: n, want: recOut(n)})
				}
			}
			if s.canLive(in.Call) {
				cs = append(cs, candidate{next: s, want: recOut(s), oldLease: true})
			}
		default: // applied, failed, unknown: observed as they stand
			cs = append(cs, candidate{next: s, want: recOut(s)})
		}
	case "renew", "complete", "release", "unknown":
		switch {
		case !s.Exists:
			cs = append(cs, candidate{next: s, want: linOutput{Err: "notfound"}})
		case s.Status != oncekeystore.StatusPending || s.Epoch != in.Epoch:
			cs = append(cs, candidate{next: s, want: linOutput{Err: "lost"}})
		default:
			n := s
			switch in.Op {
			case "renew":
				cs = append(cs, candidate{next: n, want: recOut(n), newLease: true})
				return cs
			case "complete":
				n.Status = in.Status
			case "release":
				n.Status = oncekeystore.StatusReleased
			case "unknown":
				n.Status = oncekeystore.StatusUnknown
			}
			n.LeaseLo, n.LeaseHi = 0, 0
			cs = append(cs, candidate{next: n, want: recOut(n)})
		}
	case "resolve":
		switch {
		case !s.Exists:
			cs = append(cs, candidate{next: s, want: linOutput{Err: "notfound"}})
		case s.Epoch != in.Epoch:
			// A decision for another epoch is stale (the store says so before anything else).
			cs = append(cs, candidate{next: s, want: linOutput{Err: "stale"}})
		case s.Status == oncekeystore.StatusUnknown || (s.Status == oncekeystore.StatusPending && s.canExpire(ret)):
			n := s
			n.Status, n.LeaseLo, n.LeaseHi = in.Status, 0, 0
			cs = append(cs, candidate{next: n, want: recOut(n)})
			if s.Status == oncekeystore.StatusPending && s.canLive(in.Call) {
				cs = append(cs, candidate{next: s, want: linOutput{Err: "conflict"}})
			}
		default:
			cs = append(cs, candidate{next: s, want: linOutput{Err: "conflict"}})
		}
	case "get":
		if !s.Exists {
			cs = append(cs, candidate{next: s, want: linOutput{Err: "notfound"}})
		} else {
			cs = append(cs, observe(s, in, ret)...)
		}
	}
	return cs
}

// observe is reading s as it stands: a pending record's lease may be judged expired or live,
// within what the operation's interval allows.
func observe(s linState, in linInput, ret int64) []candidate {
	if s.Status != oncekeystore.StatusPending {
		return []candidate{{next: s, want: recOut(s)}}
	}
	var cs []candidate
	if s.canExpire(ret) {
		w := recOut(s)
		w.LeaseExpired = true
		cs = append(cs, candidate{next: s, want: w, oldLease: true})
	}
	if s.canLive(in.Call) {
		cs = append(cs, candidate{next: s, want: recOut(s), oldLease: true})
	}
	return cs
}

// linStep is the model's step function.
func linStep(state, input, output any) []any {
	s, in, out := state.(linState), input.(linInput), output.(linOutput)
	cs := candidates(s, in, out.Ret)
	if out.Err == "ambiguous" {
		next := []any{s}
		for _, c := range cs {
			n := c.next
			if c.newLease {
				n.LeaseLo, n.LeaseHi = in.Call+in.Lease-linTol, math.MaxInt64
			}
			next = append(next, n)
		}
		return next
	}
	var next []any
	for _, c := range cs {
		w := c.want
		if w.Err != out.Err {
			continue
		}
		if w.Err != "" {
			next = append(next, c.next)
			continue
		}
		if w.Acquired != out.Acquired || w.TookOver != out.TookOver || w.Mismatch != out.Mismatch || out.Expired ||
			w.Status != out.Status || w.Epoch != out.Epoch || w.LeaseExpired != out.LeaseExpired {
			continue
		}
		if (in.Op == "claim" || in.Op == "get") && w.FP != out.FP {
			continue
		}
		n := c.next
		switch {
		case c.newLease:
			if out.LeaseUntil < in.Call+in.Lease-linTol || out.LeaseUntil > satAdd(out.Ret+in.Lease, linTol) {
				continue
			}
			n.LeaseLo, n.LeaseHi = out.LeaseUntil, out.LeaseUntil
		case c.oldLease:
			if out.LeaseUntil < s.LeaseLo || out.LeaseUntil > s.LeaseHi {
				continue
			}
			n.LeaseLo, n.LeaseHi = out.LeaseUntil, out.LeaseUntil
		}
		next = append(next, n)
	}
	return next
}

func linModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range history {
				k := op.Input.(linInput).Key
				if _, ok := byKey[k]; !ok {
					keys = append(keys, k)
				}
				byKey[k] = append(byKey[k], op)
			}
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, byKey[k])
			}
			return out
		},
		Init: func() []any { return []any{linState{}} },
		Step: linStep,
		DescribeOperation: func(input, output any) string {
			in, out := input.(linInput), output.(linOutput)
			arg := ""
			switch in.Op {
			case "claim":
				arg = fmt.Sprintf("%s,%s", in.FP, in.Effect)
			case "get":
			case "resolve":
				arg = fmt.Sprintf("e%d,%s", in.Epoch, in.Status)
			case "complete":
				arg = fmt.Sprintf("e%d,%s", in.Epoch, in.Status)
			default:
				arg = fmt.Sprintf("e%d", in.Epoch)
			}
			if out.Err != "" {
				return fmt.Sprintf("%s(%s) -> %s", in.Op, arg, out.Err)
			}
			flags := ""
			for _, f := range []struct {
				on   bool
				name string
			}{{out.Acquired, " acquired"}, {out.TookOver, " took-over"}, {out.Mismatch, " mismatch"}, {out.LeaseExpired, " lease-expired"}} {
				if f.on {
					flags += f.name
				}
			}
			return fmt.Sprintf("%s(%s) -> %s e%d%s", in.Op, arg, out.Status, out.Epoch, flags)
		},
		DescribeState: func(state any) string {
			s := state.(linState)
			if !s.Exists {
				return "absent"
			}
			if s.Status == oncekeystore.StatusPending {
				return fmt.Sprintf("pending e%d %s lease [%d, %d]", s.Epoch, s.FP, s.LeaseLo, s.LeaseHi)
			}
			return fmt.Sprintf("%s e%d %s", s.Status, s.Epoch, s.FP)
		},
	}
	return nm.ToModel()
}

// linRecorder runs store operations and records them.
type linRecorder struct {
	store *pgstore.Store
	mu    sync.Mutex
	ops   []porcupine.Operation
	amb   atomic.Int64
	count map[string]int
}

func nowMicro() int64 { return time.Now().UnixMicro() }

// do runs one operation to its end (the run's deadline does not cut it off) and records it.
func (r *linRecorder) do(client int, in linInput) linOutput {
	const tenant = "lin"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in.Call = nowMicro()
	callNs := time.Now().UnixNano()
	var (
		rec *oncekeystore.Record
		cr  *oncekeystore.ClaimResult
		err error
	)
	switch in.Op {
	case "claim":
		cr, err = r.store.Claim(ctx, &oncekeystore.ClaimParams{Tenant: tenant, OperationKey: in.Key, Tool: "lin", Fingerprint: in.FP,
			Effect: in.Effect, Lease: time.Duration(in.Lease) * time.Microsecond, Retention: time.Hour, Tombstone: time.Hour})
		if cr != nil {
			rec = cr.Record
		}
	case "renew":
		rec, err = r.store.Renew(ctx, &oncekeystore.RenewParams{Tenant: tenant, OperationKey: in.Key, Epoch: in.Epoch, Lease: time.Duration(in.Lease) * time.Microsecond})
	case "complete":
		rec, err = r.store.Complete(ctx, &oncekeystore.CompleteParams{Tenant: tenant, OperationKey: in.Key, Epoch: in.Epoch, Status: in.Status, Result: []byte("r")})
	case "release":
		rec, err = r.store.Release(ctx, &oncekeystore.ReleaseParams{Tenant: tenant, OperationKey: in.Key, Epoch: in.Epoch})
	case "unknown":
		rec, err = r.store.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: tenant, OperationKey: in.Key, Epoch: in.Epoch})
	case "resolve":
		rec, err = r.store.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: tenant, OperationKey: in.Key, Epoch: in.Epoch, Status: in.Status, ResolvedBy: "lin"})
	case "get":
		rec, err = r.store.Get(ctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: in.Key})
	}
	retNs := time.Now().UnixNano()
	out := linOutput{Ret: nowMicro()}
	var conflict *oncekeystore.StatusConflictError
	switch {
	case err == nil:
		out.Status, out.Epoch, out.FP, out.LeaseExpired = rec.Status, rec.Epoch, rec.Fingerprint, rec.LeaseExpired
		if !rec.LeaseUntil.IsZero() {
			out.LeaseUntil = rec.LeaseUntil.UnixMicro()
		}
		if cr != nil {
			out.Acquired, out.TookOver, out.Mismatch, out.Expired = cr.Acquired, cr.TookOver, cr.FingerprintMismatch, cr.Expired
		}
	case errors.Is(err, oncekeystore.ErrLostClaim):
		out.Err = "lost"
	case errors.Is(err, oncekeystore.ErrNotFound):
		out.Err = "notfound"
	case errors.As(err, &conflict):
		out.Err = "conflict"
	case errors.As(err, new(*oncekeystore.StaleDecisionError)):
		out.Err = "stale"
	default:
		out.Err = "ambiguous"
		out.Ret = math.MaxInt64
		retNs = math.MaxInt64
		r.amb.Add(1)
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: callNs, Output: out, Return: retNs})
	r.count[in.Op]++
	if out.TookOver {
		r.count["takeover"]++
	}
	if in.Op == "claim" && out.Err == "" && !out.Acquired && out.Status == oncekeystore.StatusUnknown && out.Epoch > 0 {
		r.count["claim->unknown"]++
	}
	r.mu.Unlock()
	return out
}

// linSlot is one place in the key space; its key changes generation when its record settles
// for good (applied or failed), so the run keeps exercising claims.
type linSlot struct {
	id     int
	effect oncekey.Effect
	gen    atomic.Int64
}

func (s *linSlot) key(gen int64) string { return fmt.Sprintf("ok1_lin_%d_%d", s.id, gen) }

func (s *linSlot) settled(gen int64, st oncekeystore.Status) {
	if st == oncekeystore.StatusApplied || st == oncekeystore.StatusFailed {
		s.gen.CompareAndSwap(gen, gen+1)
	}
}

func linWorker(ctx context.Context, r *linRecorder, client int, slots []*linSlot, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(client)))
	lease := linLease.Microseconds()
	pause := func(max time.Duration) {
		if max <= 0 {
			return
		}
		// Pacing of the workload (how long an owner works, how late a stale writer is): not a
		// wait for anything.
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(rng.Int64N(int64(max)))):
		}
	}
	fenced := []string{"renew", "complete", "release", "unknown"}
	for ctx.Err() == nil {
		s := slots[rng.IntN(len(slots))]
		gen := s.gen.Load()
		key := s.key(gen)
		fp := "fp-a"
		if rng.IntN(20) == 0 {
			fp = "fp-b"
		}
		if rng.IntN(5) == 0 {
			out := r.do(client, linInput{Op: "get", Key: key})
			s.settled(gen, out.Status)
		}
		out := r.do(client, linInput{Op: "claim", Key: key, FP: fp, Effect: s.effect, Lease: lease})
		s.settled(gen, out.Status)
		switch {
		case out.Err != "":
		case out.Acquired:
			epoch := out.Epoch
			for range rng.IntN(3) {
				pause(150 * time.Millisecond)
				r.do(client, linInput{Op: "renew", Key: key, Epoch: epoch, Lease: lease})
			}
			if rng.IntN(4) == 0 {
				pause(400 * time.Millisecond) // often long enough for the lease to run out
			}
			var in linInput
			switch x := rng.IntN(100); {
			case x < 35:
				in = linInput{Op: "complete", Key: key, Epoch: epoch, Status: oncekeystore.StatusApplied}
			case x < 45:
				in = linInput{Op: "complete", Key: key, Epoch: epoch, Status: oncekeystore.StatusFailed}
			case x < 70:
				in = linInput{Op: "release", Key: key, Epoch: epoch}
			case x < 85:
				in = linInput{Op: "unknown", Key: key, Epoch: epoch}
			default:
				continue // abandoned: the lease runs out, the next claim takes over or marks unknown
			}
			res := r.do(client, in)
			s.settled(gen, res.Status)
		case out.Status == oncekeystore.StatusUnknown || out.Status == oncekeystore.StatusPending:
			if rng.IntN(2) == 0 {
				st := oncekeystore.StatusReleased
				if rng.IntN(5) == 0 {
					st = oncekeystore.StatusApplied
				}
				res := r.do(client, linInput{Op: "resolve", Key: key, Epoch: out.Epoch, Status: st})
				s.settled(gen, res.Status)
			}
		}
		if out.Err == "" && rng.IntN(5) == 0 && out.Epoch > 0 {
			// A stale (or current) owner's fenced write with an epoch seen on this key.
			op := fenced[rng.IntN(len(fenced))]
			in := linInput{Op: op, Key: key, Epoch: 1 + rng.Int64N(out.Epoch), Lease: lease, Status: oncekeystore.StatusApplied}
			res := r.do(client, in)
			s.settled(gen, res.Status)
		}
		pause(3 * time.Millisecond)
	}
}

func TestLinearizability(t *testing.T) {
	testLinearizability(t, "linearizability", 8, 4, false)
}

// TestLinearizabilityCoalesced checks the same with pgstore.Options.Coalesce, with 16 goroutines
// on 6 key slots so that claims and completions of the same and of different keys go together
// in multi-row statements (counted through the pool's tracer: the run fails if none did).
func TestLinearizabilityCoalesced(t *testing.T) {
	testLinearizability(t, "linearizability_coalesced", 16, 6, true)
}

// multiRowTracer counts the coalesced statements (their parameters are arrays unnested).
type multiRowTracer struct{ n atomic.Int64 }

func (m *multiRowTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "unnest(") {
		m.n.Add(1)
	}
	return ctx
}

func (m *multiRowTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func testLinearizability(t *testing.T, scenario string, clients, nslots int, coalesce bool) {
	e := newEnv(t, scenario)
	e.audited = true // store records only; no effects, no workflows
	cfg, err := pgxpool.ParseConfig(e.dbURL)
	require.NoError(t, err)
	cfg.MaxConns = int32(clients + 2)
	var multi multiRowTracer
	if coalesce {
		cfg.ConnConfig.Tracer = &multi
	}
	opts := &pgstore.Options{Coalesce: coalesce}
	pgstore.ConfigurePool(cfg, opts)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	r := &linRecorder{store: pgstore.New(pool, opts), count: map[string]int{}}
	var slots []*linSlot
	for i := range nslots {
		effect := oncekey.Idempotent
		if i%2 == 1 {
			effect = oncekey.Effectful
		}
		slots = append(slots, &linSlot{id: i, effect: effect})
	}
	seed := uint64(time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), *flagLinDuration)
	defer cancel()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			linWorker(ctx, r, c, slots, seed)
		}()
	}
	wg.Wait()
	require.NotEmpty(t, r.ops)
	t.Logf("seed %d: %d operations %v, %d ambiguous", seed, len(r.ops), r.count, r.amb.Load())
	require.Positive(t, r.count["takeover"], "no takeover happened: leases never expired")
	require.Positive(t, r.count["claim->unknown"], "no Effectful claim found an expired lease")
	if coalesce {
		t.Logf("%d multi-row statements", multi.n.Load())
		require.Positive(t, multi.n.Load(), "no calls went together in a multi-row statement")
	}

	began := time.Now()
	res, info := porcupine.CheckOperationsVerbose(linModel(), r.ops, 10*time.Minute)
	checked := time.Since(began)
	if res != porcupine.Ok {
		dir := *flagOut
		if dir == "" {
			dir, err = os.MkdirTemp("", "oncekey-faults-")
			require.NoError(t, err)
		}
		require.NoError(t, os.MkdirAll(dir, 0o755))
		html := filepath.Join(dir, "linearizability.html")
		if verr := porcupine.VisualizePath(linModel(), info, html); verr != nil {
			t.Logf("visualize: %v", verr)
		}
		if b, jerr := json.Marshal(r.ops); jerr == nil {
			_ = os.WriteFile(filepath.Join(dir, "linearizability-history.json"), b, 0o644)
		}
		t.Fatalf("pgstore history is %s (seed %d, %d operations); visualization: %s", res, seed, len(r.ops), html)
	}
	// The same history with one acquisition's epoch falsified must fail the check.
	bad := append([]porcupine.Operation(nil), r.ops...)
	for i, op := range bad {
		if out := op.Output.(linOutput); out.Acquired {
			out.Epoch += 7
			bad[i].Output = out
			break
		}
	}
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(linModel(), bad, 10*time.Minute), "a falsified history passed the check")
	e.res.Operations = len(r.ops)
	e.note("%d store operations by %d goroutines on %d key slots (%d claims, %d takeovers, %d expired Effectful claims marked unknown, %d ambiguous, %d multi-row statements): linearizable, checked in %.1fs",
		len(r.ops), clients, nslots, r.count["claim"], r.count["takeover"], r.count["claim->unknown"], r.amb.Load(), multi.n.Load(), checked.Seconds())
}

// The model rejects what the store must never do, and accepts a legal history: the check can
// fail.
func TestLinearizabilityModelRejects(t *testing.T) {
	const L = 200_000 // µs
	op := func(client int, call, ret int64, in linInput, out linOutput) porcupine.Operation {
		in.Call, out.Ret = call, ret
		if in.Lease == 0 {
			in.Lease = L
		}
		in.Key = "k"
		return porcupine.Operation{ClientId: client, Input: in, Call: call * 1000, Output: out, Return: ret * 1000}
	}
	claim := linInput{Op: "claim", FP: "a", Effect: oncekey.Idempotent}
	acquired := func(epoch, at int64) linOutput {
		return linOutput{Acquired: true, TookOver: epoch > 1, Status: oncekeystore.StatusPending, Epoch: epoch, FP: "a", LeaseUntil: at + L}
	}
	cases := []struct {
		name  string
		legal bool
		ops   []porcupine.Operation
	}{
		{"takeover after expiry", true, []porcupine.Operation{
			op(0, 1000, 1100, claim, acquired(1, 1050)),
			op(1, 300000, 300100, claim, acquired(2, 300050)),
			op(0, 400000, 400100, linInput{Op: "complete", Epoch: 1, Status: oncekeystore.StatusApplied}, linOutput{Err: "lost"}),
		}},
		{"two owners at epoch 1", false, []porcupine.Operation{
			op(0, 1000, 1100, claim, acquired(1, 1050)),
			op(1, 2000, 2100, claim, acquired(1, 2050)),
		}},
		{"takeover of a live lease", false, []porcupine.Operation{
			op(0, 1000, 1100, claim, acquired(1, 1050)),
			op(1, 50000, 50100, claim, acquired(2, 50050)),
		}},
		{"stale epoch completes after a takeover", false, []porcupine.Operation{
			op(0, 1000, 1100, claim, acquired(1, 1050)),
			op(1, 300000, 300100, claim, acquired(2, 300050)),
			op(0, 400000, 400100, linInput{Op: "complete", Epoch: 1, Status: oncekeystore.StatusApplied}, linOutput{Status: oncekeystore.StatusApplied, Epoch: 1}),
		}},
		{"lease reported expired too early", false, []porcupine.Operation{
			op(0, 1000, 1100, claim, acquired(1, 1050)),
			op(1, 20000, 20100, linInput{Op: "get"}, linOutput{Status: oncekeystore.StatusPending, Epoch: 1, FP: "a", LeaseUntil: 1050 + L, LeaseExpired: true}),
		}},
	}
	for _, c := range cases {
		got := porcupine.CheckOperations(linModel(), c.ops)
		require.Equal(t, c.legal, got, c.name)
	}
}
