// Command payments shows a downstream that deduplicates on its own: a fake payment provider
// that honours the Idempotency-Key header, fed with oncekey.OperationKey. The provider commits
// the first charge and then loses the response (502). Because the charge tool sends the
// operation key, it is declared Idempotent: Temporal retries it, the provider recognises the
// key and returns its stored response, and no reconciliation is needed. The agent then proposes
// the same charge again, and oncekey answers from the stored result without calling the provider.
//
// It starts a Temporal dev server unless TEMPORAL_ADDRESS is set, and uses Postgres from
// DATABASE_URL or the libpq variables in a schema of its own, dropped at exit. The last line of
// its output is
//
//	payments: charges=N provider_requests=N provider_replays=N oncekey_replays=N reconciliations=N
//
// Exit codes: 0 one charge landed and nothing needed reconciliation; 1 otherwise; 2 the
// environment is not usable.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/examples/internal/exampleenv"
)

func main() { os.Exit(run(os.Stdout, os.Stderr)) }

func run(stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env, err := exampleenv.Open(ctx, "payments", exampleenv.Options{}, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer env.Close()
	pg, tc := env.PG, env.Temporal
	provider, err := StartProvider(1)
	if err != nil {
		fmt.Fprintf(stderr, "payments: %v\n", err)
		return 2
	}
	defer provider.Close()
	fmt.Fprintf(stdout, "provider: %s (commits the first charge, then loses its response with a 502)\n\n", provider.URL)

	rep, err := Run(ctx, Config{Client: tc.Client, Pool: pg.Pool, Provider: provider})
	if err != nil {
		fmt.Fprintf(stderr, "payments: %v\n", err)
		return 1
	}
	printReport(stdout, rep)
	if problems := check(rep); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stderr, "payments: %s\n", p)
		}
		return 1
	}
	return 0
}

// check lists what went wrong: anything but one charge, a reconciliation, an unknown record, or
// two different results for one operation.
func check(rep *Report) []string {
	var out []string
	if rep.Provider.Charges != 1 {
		out = append(out, fmt.Sprintf("the provider charged %d time(s), want 1", rep.Provider.Charges))
	}
	if rep.ReconciliationStarted {
		out = append(out, "a reconciliation workflow was started")
	}
	if rep.UnknownRecords != 0 {
		out = append(out, fmt.Sprintf("%d record(s) are unknown", rep.UnknownRecords))
	}
	for _, k := range rep.Provider.RequestKeys {
		if k != rep.OperationKey {
			out = append(out, fmt.Sprintf("the provider got Idempotency-Key %q, not the operation key", k))
		}
	}
	if rep.Result.First.ID != rep.Result.Again.ID {
		out = append(out, fmt.Sprintf("the repeat got charge %s, the first call %s", rep.Result.Again.ID, rep.Result.First.ID))
	}
	return out
}

func printReport(w io.Writer, rep *Report) {
	p := rep.Provider
	fmt.Fprintf(w, "workflow %s, operation key %s\n", rep.WorkflowID, rep.OperationKey)
	sent := 0
	for _, k := range p.RequestKeys {
		if k == rep.OperationKey {
			sent++
		}
	}
	fmt.Fprintf(w, "  the charge tool ran %d time(s); %d of the provider's requests carried that key as Idempotency-Key\n", rep.ToolRuns, sent)
	fmt.Fprintf(w, "  the provider got %d request(s): it charged %d time(s), lost %d response(s) after committing, and answered %d repeat(s) from its stored response\n",
		p.Requests, p.Charges, p.LostResponses, p.Replays)
	fmt.Fprintf(w, "  the tool's result: charge %s (provider_replayed=%t)\n", rep.Result.First.ID, rep.Result.First.ProviderReplayed)
	fmt.Fprintf(w, "  the agent proposed the charge again: charge %s, from oncekey's stored result (%d replay(s), provider not called)\n",
		rep.Result.Again.ID, rep.Outcomes[oncekey.OutcomeReplayed])
	reconciliations := 0
	if rep.ReconciliationStarted {
		reconciliations = 1
	}
	fmt.Fprintf(w, "  record: %s; unknown records: %d; reconciliation workflows: %d\n\n", rep.Record.Status, rep.UnknownRecords, reconciliations)
	fmt.Fprintf(w, "payments: charges=%d provider_requests=%d provider_replays=%d oncekey_replays=%d reconciliations=%d\n",
		p.Charges, p.Requests, p.Replays, rep.Outcomes[oncekey.OutcomeReplayed], reconciliations)
}
