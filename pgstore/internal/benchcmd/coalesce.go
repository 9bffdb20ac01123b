package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncekey/oncekey/internal/dev/benchdrive"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// latencyFigures name the figures of the clients' latency with and without coalescing, by
// their number of clients: latencyFigures[1] prints claim_complete_coalesced_c1_p50 and _p99
// (claim_complete_coalesced_pinned_c1_… when pinned), latencyFigures[8] the same with c8.
var latencyFigures = map[int]string{1: "claim_complete_coalesced_c1_latency", 8: "claim_complete_coalesced_c8_latency"}

// coalescedLatency measures clients' claim and complete of new keys, pair by pair, on the
// store with pgstore.Options.Coalesce (ours) and on the same store without it (the baseline),
// alternating for rounds rounds of d each, and prints the medians over the rounds of each
// side's p50 and p99 over all clients' pairs. One client never finds a statement in flight, so
// with one this is the price of the coalescing path itself for a call alone; with 8, whether a
// call that waits for a statement in flight ends later than it would alone.
func coalescedLatency(ctx context.Context, pool *pgxpool.Pool, plain, coalesced *pgstore.Store, clients int, d time.Duration, rounds int) error {
	latencyFigure := latencyFigures[clients]
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(clientThreads(clients)))
	type side struct {
		s        *pgstore.Store
		p50, p99 []float64
	}
	ours, base := &side{s: coalesced}, &side{s: plain}
	for r := range rounds {
		sides := []*side{ours, base}
		if r%2 == 1 {
			sides[0], sides[1] = base, ours
		}
		for _, sd := range sides {
			if err := settle(ctx, pool); err != nil {
				return err
			}
			lat, err := clientsLatencies(ctx, sd.s, clients, d)
			if err != nil {
				return fmt.Errorf("%s: %w", latencyFigure, err)
			}
			sd.p50 = append(sd.p50, float64(quantile(lat, 50)))
			sd.p99 = append(sd.p99, float64(quantile(lat, 99)))
		}
		fmt.Fprintf(os.Stderr, "# %s round %d: p50 coalesced %s, alone %s; p99 coalesced %s, alone %s\n", latencyFigure, r+1,
			time.Duration(ours.p50[r]), time.Duration(base.p50[r]), time.Duration(ours.p99[r]), time.Duration(base.p99[r]))
	}
	for _, q := range []struct {
		name       string
		ours, base []float64
	}{{"p50", ours.p50, base.p50}, {"p99", ours.p99, base.p99}} {
		c := "c" + strconv.Itoa(clients) + "_"
		name := "claim_complete_coalesced_" + c + q.name
		baselineIs := "same_store_without_coalescing_" + c[:len(c)-1]
		if pinned {
			name, baselineIs = "claim_complete_coalesced_pinned_"+c+q.name, baselineIs+"_server_pinned_apart"
		} else {
			baselineIs += "_shared_cores_informational"
		}
		o, b := benchdrive.Median(q.ours), benchdrive.Median(q.base)
		fmt.Printf("BENCH name=%s unit=ns/op ours=%.0f baseline=%.0f speedup=%.3f baseline_is=%s\n", name, o, b, b/o, baselineIs)
	}
	return nil
}

// clientsLatencies runs pairLatencies on clients goroutines at once and returns all their
// pairs' latencies.
func clientsLatencies(ctx context.Context, s *pgstore.Store, clients int, d time.Duration) ([]time.Duration, error) {
	type got struct {
		lat []time.Duration
		err error
	}
	ch := make(chan got, clients)
	for range clients {
		go func() {
			lat, err := pairLatencies(ctx, s, d)
			ch <- got{lat, err}
		}()
	}
	var all []time.Duration
	var first error
	for range clients {
		g := <-ch
		all = append(all, g.lat...)
		if first == nil {
			first = g.err
		}
	}
	return all, first
}

// pairLatencies claims and completes new keys one pair after another for d and returns each
// pair's latency.
func pairLatencies(ctx context.Context, s *pgstore.Store, d time.Duration) ([]time.Duration, error) {
	res := []byte(benchdrive.Result)
	var out []time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); {
		key := strconv.FormatUint(1+randUint64()%9000000000000000000, 10)
		t0 := time.Now()
		c, err := s.Claim(ctx, benchdrive.ClaimParams("ours", key))
		if err != nil {
			return nil, err
		}
		if !c.Acquired {
			return nil, fmt.Errorf("claim of new key %s not acquired", key)
		}
		if _, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "ours", OperationKey: key, Epoch: c.Record.Epoch,
			Status: oncekeystore.StatusApplied, Result: res, Failure: []byte{}, EffectReference: benchdrive.EffectRef}); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}
