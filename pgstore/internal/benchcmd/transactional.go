package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncekey/oncekey/internal/dev/benchdrive"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/pgstore/internal/benchsql"
)

// The transactional figure, transactional_c8 (transactional_pinned_c8 against the pinned
// instance): calls of a Transactional tool whose body makes one INSERT, per second, at 8
// clients: the claim (benchsql.TransactionalClaim: its commit does not wait for a WAL flush), then
// BEGIN, the body's INSERT, the completion and COMMIT in one transaction (two commits per call,
// one WAL flush waited for). It is printed twice, against two baselines measured in the
// same rounds:
//
//   - the Effectful variant of the same tool through the same store: the claim, the INSERT in a
//     transaction of its own, the completion (three commits per call);
//   - pgbench running the same statements (-M prepared). Ours also sets
//     idle_in_transaction_session_timeout in its BEGIN (the same round trip), which pgbench's
//     script leaves out.
//
// On standard error it also prints pgbench running the claim inside the transaction (one commit
// per call), the alternative docs/benchmarks.md weighs.

const txClients = 8

// txLedger is the table the body writes.
const txLedger = `CREATE TABLE IF NOT EXISTS bench_ledger (op_key text NOT NULL, amount bigint NOT NULL)`

func txParams(tenant, key string) *oncekeystore.ClaimParams {
	p := benchdrive.ClaimParams(tenant, key)
	p.Effect = oncekeystore.Transactional
	return p
}

func oursTransactional(ctx context.Context, s *pgstore.Store, clients int, d time.Duration) (float64, error) {
	res := []byte(benchdrive.Result)
	return benchdrive.Drive(ctx, clients, d, func(ctx context.Context, _ int) error {
		key := strconv.FormatUint(1+randUint64()%9000000000000000000, 10)
		c, err := s.Claim(ctx, txParams("tx", key))
		if err != nil {
			return err
		}
		if !c.Acquired {
			return fmt.Errorf("claim of new key %s not acquired", key)
		}
		stx, err := s.BeginTx(ctx, &oncekeystore.BeginTxParams{Tenant: "tx", OperationKey: key, Epoch: c.Record.Epoch, Lease: benchdrive.Lease, Tool: benchdrive.Tool})
		if err != nil {
			return err
		}
		defer func() { _ = stx.Rollback(ctx) }()
		tx, err := pgstore.Tx(stx.Context(ctx))
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO bench_ledger (op_key, amount) VALUES ($1, $2)`, key, 1); err != nil {
			return err
		}
		_, err = stx.Commit(ctx, &oncekeystore.CompleteParams{Tenant: "tx", OperationKey: key, Epoch: c.Record.Epoch,
			Status: oncekeystore.StatusApplied, Result: res, Failure: []byte{}, EffectReference: benchdrive.EffectRef})
		return err
	})
}

func oursEffectfulInsert(ctx context.Context, s *pgstore.Store, pool *pgxpool.Pool, clients int, d time.Duration) (float64, error) {
	res := []byte(benchdrive.Result)
	return benchdrive.Drive(ctx, clients, d, func(ctx context.Context, _ int) error {
		key := strconv.FormatUint(1+randUint64()%9000000000000000000, 10)
		c, err := s.Claim(ctx, benchdrive.ClaimParams("effectful", key))
		if err != nil {
			return err
		}
		if !c.Acquired {
			return fmt.Errorf("claim of new key %s not acquired", key)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO bench_ledger (op_key, amount) VALUES ($1, $2)`, key, 1); err != nil {
			return err
		}
		_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "effectful", OperationKey: key, Epoch: c.Record.Epoch,
			Status: oncekeystore.StatusApplied, Result: res, Failure: []byte{}, EffectReference: benchdrive.EffectRef})
		return err
	})
}

// transactionalFigure measures transactional_c8 (see above) for rounds rounds of duration,
// alternating the order of the sides, and prints its BENCH lines.
func transactionalFigure(ctx context.Context, pool *pgxpool.Pool, s *pgstore.Store, pgbench, url, schema, dir string, duration time.Duration, rounds int) error {
	if _, err := pool.Exec(ctx, txLedger); err != nil {
		return err
	}
	claimNames := []string{"tenant", "k", "tool", "version", "fp", "wf", "step", "effect", "lease", "retention", "tombstone", "tok", "ns"}
	completeNames := []string{"tenant", "k", "c_epoch", "status", "result", "c_failure", "ref"}
	head := "\\set k random(1, 9000000000000000000)\n\\set tok random(1, 9000000000000000000)\n"
	claim := pgbenchSQL(benchsql.TransactionalClaim("oncekey_operations"), claimNames) + "\n\\gset c_\n"
	claimInTx := pgbenchSQL(benchsql.Claim("oncekey_operations"), claimNames) + "\n\\gset c_\n"
	insert := "INSERT INTO bench_ledger (op_key, amount) VALUES (:k, 1);\n"
	complete := pgbenchSQL(benchsql.Complete("oncekey_operations"), completeNames) + ";\n"
	scripts := map[string]string{
		"tx":     head + claim + "BEGIN;\n" + insert + complete + "COMMIT;\n",
		"tx_one": head + "BEGIN;\n" + claimInTx + insert + complete + "COMMIT;\n",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name+".sql"), []byte(body), 0o600); err != nil {
			return err
		}
	}
	var ours, eff, pgb, one []float64
	measure := func(name string, f func() (float64, error), into *[]float64) func() error {
		return func() error {
			if err := settle(ctx, pool); err != nil {
				return err
			}
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(clientThreads(txClients)))
			v, err := f()
			if err != nil {
				return fmt.Errorf("transactional_c8 %s: %w", name, err)
			}
			*into = append(*into, v)
			return nil
		}
	}
	// pgbench's effect column is 4 (Transactional) like ours.
	bench := func(script string) func() (float64, error) {
		return func() (float64, error) {
			return runPgbenchEffect(ctx, pgbench, url, schema, filepath.Join(dir, script+".sql"), "pgbench_tx", txClients, duration, oncekeystore.Transactional)
		}
	}
	for r := range rounds {
		runs := []func() error{
			measure("ours", func() (float64, error) { return oursTransactional(ctx, s, txClients, duration) }, &ours),
			measure("effectful", func() (float64, error) { return oursEffectfulInsert(ctx, s, pool, txClients, duration) }, &eff),
			measure("pgbench", bench("tx"), &pgb),
			measure("pgbench one commit", bench("tx_one"), &one),
		}
		if r%2 == 1 {
			runs[0], runs[1], runs[2], runs[3] = runs[3], runs[2], runs[1], runs[0]
		}
		for _, run := range runs {
			if err := run(); err != nil {
				return err
			}
		}
		fmt.Fprintf(os.Stderr, "# transactional_c8 round %d: ours %.0f ops/s, effectful %.0f ops/s, pgbench %.0f ops/s, pgbench with the claim in the transaction %.0f ops/s\n",
			r+1, ours[r], eff[r], pgb[r], one[r])
	}
	o, e, p, c := benchdrive.Median(ours), benchdrive.Median(eff), benchdrive.Median(pgb), benchdrive.Median(one)
	fmt.Fprintf(os.Stderr, "# transactional_c8: pgbench with the claim in the transaction (one commit per call) %.1f ops/s, %.3f of pgbench with the claim committed first (medians of %d rounds)\n",
		c, c/p, rounds)
	name, suffix := "transactional_c8", "_shared_cores_informational"
	if pinned {
		name, suffix = pinnedName(name), "_server_pinned_apart"
	}
	fmt.Printf("BENCH name=%s unit=ops/s ours=%.1f baseline=%.1f speedup=%.3f baseline_is=effectful_same_insert_three_commits_c8%s\n", name, o, e, o/e, suffix)
	fmt.Printf("BENCH name=%s_vs_pgbench unit=ops/s ours=%.1f baseline=%.1f speedup=%.3f baseline_is=pgbench_same_sql_prepared_c8%s\n", name, o, p, o/p, suffix)
	return nil
}
