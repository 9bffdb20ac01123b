package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/decisiontext"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/pgstore"
	"github.com/oncekey/oncekey/reconcile"
)

func newMigrateCmd(a *app) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade oncekey's tables (idempotent; safe to run from several places at once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			pool, err := a.pool(ctx)
			if err != nil {
				return err
			}
			defer pool.Close()
			if dryRun {
				return migrateDryRun(cmd, a, pool)
			}
			if err := pgstore.MigrateSchema(ctx, pool, a.schema); err != nil {
				return a.storeError("migrate", err)
			}
			fmt.Fprintf(a.stdout, "migrations applied in %s; the schema is up to date\n", a.pg)
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the migrations that would be applied, apply nothing")
	return cmd
}

// resolveFlags are the flags of `oncekey resolve`.
type resolveFlags struct {
	tenant                     string
	applied, notApplied, faild bool
	ref, result, note, by      string
	direct, noTemporalCheck    bool
	// epoch is --epoch: the record's epoch the decision is for.
	epoch int64
	// tenantGiven is false when --tenant was left out and tenant defaulted to the namespace.
	tenantGiven bool
}

func newResolveCmd(a *app) *cobra.Command {
	var f resolveFlags
	cmd := &cobra.Command{
		Use:   "resolve KEY --epoch N (--applied [--ref R] [--result JSON] | --not-applied | --failed) [--direct]",
		Short: "Tell the reconciliation workflow of an unknown operation what happened",
		Long: "resolve sends the reconciliation workflow waiting on KEY a decision as the oncekey.resolve Workflow Update (the signal\n" +
			"of that name where an update cannot be used) and waits (up to 10s in all, the signal included) until the workflow accepts or\n" +
			"refuses it, then prints the workflow's answer; a refusal (wrong tenant, a result that does not fit the tool's result\n" +
			"type) exits 1, delivered but not confirmed in time exits 6 (it lands once a worker runs the workflow). Every workflow blocked on the key\n" +
			"continues: --applied hands back the result given with --result (JSON of the tool's result type; @FILE reads a file),\n" +
			"--not-applied lets the tool run again, --failed fails the call for good.\n\n" +
			"--epoch is required: the record's epoch, as `oncekey show KEY` and `oncekey list` print it, which names the unknown\n" +
			"episode the decision is about. Once the operation has moved on (the decision was recorded, the tool ran again and\n" +
			"its outcome is unknown once more, at a higher epoch), the same command is refused instead of deciding the new episode\n" +
			"unseen: a retry, or a second person deciding, cannot make the tool run twice.\n\n" +
			"--direct is for an unknown record that no reconciliation workflow waits for (it failed, timed out, was terminated or\n" +
			"never started; the normal form then exits 3): it writes the decision straight to the store, after checking with\n" +
			"Temporal that no reconciliation workflow for the key is running (it refuses if one is: resolve through it instead).\n" +
			"Nothing is released by it: the caller's workflow gets the decision when it runs the step again. A --result is not\n" +
			"checked against the tool's result type, so that run must be able to decode it. --no-temporal-check skips the check,\n" +
			"for when Temporal cannot be reached and you know no reconciliation workflow is running.\n\n" +
			"Find waiting operations with `oncekey list --status unknown`.",
		Example: "  oncekey resolve ok1_3f2a… --tenant acme --epoch 1 --applied --ref TCK-0042 --result '{\"id\":\"TCK-0042\"}' --note 'found in the ticket system'\n" +
			"  oncekey resolve ok1_3f2a… --tenant acme --epoch 2 --not-applied --note 'no charge at the provider'\n" +
			"  oncekey resolve ok1_3f2a… --tenant acme --epoch 1 --direct --applied --ref TCK-0042 --note 'reconciliation timed out; found in the ticket system'",
		Args: a.keyArgs("oncekey resolve KEY --tenant T --epoch N --applied|--not-applied|--failed", "list", "--status", "unknown"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, key, err := f.resolution(a, args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if f.direct {
				return a.resolveDirect(ctx, &f, key, r)
			}
			c, err := a.temporal(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			rctx, cancel := contextWithTimeout(ctx, a.timeout)
			defer cancel()
			out, err := reconcile.ResolveOutput(rctx, c, f.tenant, key, r)
			var (
				inv     *reconcile.InvalidResolutionError
				refused *reconcile.RefusedError
			)
			switch {
			case err == nil:
			case errors.As(err, &inv):
				return fail(exitUsage, "%v", err)
			case errors.As(err, &refused):
				return fail(exitFailed, "the reconciliation workflow %s refused the resolution; nothing was recorded by it: %s", reconcile.WorkflowID(key), oneLine(errors.New(refused.Reason)))
			case errors.Is(err, reconcile.ErrUnconfirmed):
				return a.unconfirmed(ctx, c, decisiontext.Reconciliation.Decision, decisiontext.Reconciliation.Workflow, reconcile.WorkflowID(key), a.showCommand(key, f.tenant), "unknown")
			case errors.Is(err, reconcile.ErrNoReconciliation):
				if shape := keyShape(key); shape != "" {
					return fail(exitNotFound, "%s: %s; copy the whole key from `%s`", decisiontext.Reconciliation.NotWaiting(key, a.ns()), shape, a.db(shell.Cmd("oncekey", "list").Flag("--status", "unknown")))
				}
				if err := a.alreadySettled(ctx, key, f.tenant); err != nil {
					return err
				}
				return fail(exitNotFound, "%s: %s; `%s` shows the record's status, and if it is still unknown `%s` writes the decision straight to the store", decisiontext.Reconciliation.NotWaiting(key, a.ns()), decisiontext.NotStarted, a.showCommand(key, f.tenant), a.directCommand(key, &f))
			case namespaceMissing(err):
				return a.noNamespace(err)
			default:
				return fail(exitUnreachable, "resolve %s: %v", key, oneLine(err))
			}
			fmt.Fprintf(a.stdout, "resolved %s as %s (%s accepted it): %s\n", key, r.Outcome, reconcile.WorkflowID(key), describe(r))
			fmt.Fprintf(a.stdout, "the workflow answered: %s\n", answer(out))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.tenant, "tenant", "", "the operation's tenant (default: the namespace, the interceptor's default tenant)")
	fl.Int64Var(&f.epoch, "epoch", 0, "the record's epoch `N` the decision is for, as oncekey show KEY prints it (required)")
	fl.BoolVar(&f.applied, "applied", false, "the effect landed")
	fl.BoolVar(&f.notApplied, "not-applied", false, "the effect did not land: the tool may run again")
	fl.BoolVar(&f.faild, "failed", false, "a definite failure: the effect did not and will not land; the call fails")
	fl.StringVar(&f.ref, "ref", "", "effect reference downstream (ticket number, charge ID); with --applied")
	fl.StringVar(&f.result, "result", "", "the tool's result as JSON, or @FILE; with --applied (default: the zero value)")
	fl.StringVar(&f.note, "note", "", "why; stored with the record")
	fl.StringVar(&f.by, "by", "", "who decided (default: $USER, else oncekey-cli when $USER is empty)")
	fl.BoolVar(&f.direct, "direct", false, "write the decision straight to the store: only when no reconciliation workflow for the key is running")
	fl.BoolVar(&f.noTemporalCheck, "no-temporal-check", false, "with --direct: do not check with Temporal that no reconciliation workflow is running")
	return cmd
}

// alreadySettled looks key up in the store, for a resolve that found no reconciliation workflow
// waiting: a record that is already settled (applied, failed, released) is the answer, with who
// settled it and when (exit 1: there is nothing to resolve). It returns nil when the record is
// not settled or cannot be read (no store configured, not found): the caller then says nothing
// waits.
func (a *app) alreadySettled(ctx context.Context, key, tenant string) error {
	s, pool, err := a.store(ctx)
	if err != nil {
		a.pg = nil // the message that follows is about Temporal, not this database
		return nil
	}
	defer pool.Close()
	gctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	rec, err := s.Get(gctx, &oncekey.GetParams{Tenant: tenant, OperationKey: key})
	if err != nil {
		a.pg = nil
		return nil
	}
	switch rec.Status {
	case oncekey.StatusApplied, oncekey.StatusFailed, oncekey.StatusReleased:
	default:
		return nil
	}
	return fail(exitFailed, "%s is already %s, %s at %s: no reconciliation waits for it and there is nothing to resolve; `%s` shows the record",
		key, printable(string(rec.Status)), settledBy(rec), rec.UpdatedAt.UTC().Format(time.RFC3339), a.showCommand(key, tenant))
}

// settledBy says who settled rec: the person or receipt lookup that resolved it, else the
// tool's own run.
func settledBy(rec *oncekey.Record) string {
	if rec.ResolvedBy != "" {
		return "resolved by " + printable(rec.ResolvedBy)
	}
	return fmt.Sprintf("by the tool's own run (workflow %s, step %s)", printable(rec.WorkflowID), printable(rec.StepID))
}

// resolution checks the flags and builds the Resolution.
func (f *resolveFlags) resolution(a *app, keyArg string) (reconcile.Resolution, string, error) {
	key := strings.TrimSpace(keyArg)
	if !strings.HasPrefix(key, oncekey.KeyPrefix) {
		return reconcile.Resolution{}, "", fail(exitUsage, "%q is not an operation key (they start with %q)", key, oncekey.KeyPrefix)
	}
	n := 0
	for _, b := range []bool{f.applied, f.notApplied, f.faild} {
		if b {
			n++
		}
	}
	if n != 1 {
		return reconcile.Resolution{}, "", fail(exitUsage, "give exactly one of --applied, --not-applied, --failed")
	}
	if !f.applied && (f.ref != "" || f.result != "") {
		return reconcile.Resolution{}, "", fail(exitUsage, "--ref and --result go with --applied only")
	}
	if f.noTemporalCheck && !f.direct {
		return reconcile.Resolution{}, "", fail(exitUsage, "--no-temporal-check goes with --direct only")
	}
	if f.epoch < 1 {
		return reconcile.Resolution{}, "", fail(exitUsage, "give --epoch: the record's epoch the decision is for, as `%s` prints it; "+
			"a decision names the episode it was made for, so that it is refused once the operation has moved on", shell.Cmd("oncekey", "show").Arg(key))
	}
	f.tenantGiven = f.tenant != ""
	if !f.tenantGiven {
		f.tenant = a.ns()
	}
	by := f.by
	if by == "" {
		by = a.getenv("USER")
	}
	switch {
	case f.direct && by != "":
		by += " (" + directBy + ")"
	case f.direct:
		by = directBy
	case by == "":
		by = "oncekey-cli"
	}
	r := reconcile.Resolution{Epoch: f.epoch, EffectReference: f.ref, Note: f.note, ResolvedBy: by}
	switch {
	case f.applied:
		r.Outcome = reconcile.Applied
	case f.notApplied:
		r.Outcome = reconcile.NotApplied
	default:
		r.Outcome = reconcile.Failed
	}
	if f.result != "" {
		raw := []byte(f.result)
		if path, ok := strings.CutPrefix(f.result, "@"); ok {
			var err error
			if path == "-" {
				raw, err = io.ReadAll(a.stdin)
			} else {
				raw, err = os.ReadFile(path)
			}
			if err != nil {
				return reconcile.Resolution{}, "", fail(exitUsage, "--result %s: %v", f.result, err)
			}
		}
		if !json.Valid(raw) {
			return reconcile.Resolution{}, "", fail(exitUsage, "--result is not valid JSON (quote strings: --result '\"done\"')")
		}
		r.Result = raw
	}
	if err := r.Validate(); err != nil {
		return reconcile.Resolution{}, "", fail(exitUsage, "%v", err)
	}
	return r, key, nil
}

// answer describes the reconciliation workflow's output.
func answer(out *reconcile.Output) string {
	if out == nil {
		return "nothing"
	}
	parts := []string{"outcome " + string(out.Outcome)}
	if out.ResolvedBy != "" {
		parts = append(parts, "resolved by "+printable(out.ResolvedBy))
	}
	if out.EffectReference != "" {
		parts = append(parts, "ref "+printable(out.EffectReference))
	}
	if len(out.Result) > 0 {
		parts = append(parts, fmt.Sprintf("result %d bytes stored", len(out.Result)))
	}
	if out.Failure != "" {
		parts = append(parts, "failure "+printable(out.Failure))
	}
	return strings.Join(parts, ", ")
}

// printUnsettled says how many unknown or pending records past their retention purge left (or
// would leave), and how old the oldest is.
func (a *app) printUnsettled(n int64, oldest time.Time, verb string) {
	if n == 0 {
		return
	}
	fmt.Fprintf(a.stdout, "%s %d unknown or pending record(s) past their retention, the oldest created %s: an unsettled record is kept until it is settled; find them with `%s` and resolve them\n",
		verb, n, age(oldest), a.db(shell.Cmd("oncekey", "list").Flag("--status", "unknown")))
}

func describe(r reconcile.Resolution) string {
	parts := []string{"by " + printable(r.ResolvedBy)}
	if r.EffectReference != "" {
		parts = append(parts, "ref "+printable(r.EffectReference))
	}
	if len(r.Result) > 0 {
		parts = append(parts, fmt.Sprintf("result %d bytes of JSON", len(r.Result)))
	}
	if r.Note != "" {
		parts = append(parts, fmt.Sprintf("note %q", r.Note))
	}
	return strings.Join(parts, ", ")
}

func newPurgeCmd(a *app) *cobra.Command {
	var (
		batch  int
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Turn records past retention into tombstones and delete tombstones past their window",
		Long: "purge works in batches so claims are never blocked for long. Run it on a schedule (hourly is plenty).\n" +
			"A tombstone keeps only digests and refuses late duplicates until its window ends; then the key is free.\n" +
			"Unknown and pending records are never purged, however old (their retention counts from when they settle); purge says how\n" +
			"many it left and how old the oldest is. Decided approvals past their retention are deleted too; pending ones never.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if batch < 1 {
				return fail(exitUsage, "--batch-size must be at least 1")
			}
			ctx := cmd.Context()
			s, pool, err := a.store(ctx)
			if err != nil {
				return err
			}
			defer pool.Close()
			if dryRun {
				pv, err := s.PurgePreview(ctx)
				if err != nil {
					return a.storeError("purge --dry-run", err)
				}
				now, tomb, del := pv.Now, pv.Tombstones, pv.Deletes
				fmt.Fprintf(a.stdout, "dry run (database time %s): would tombstone %d record(s) and delete %d tombstone(s)%s\n", now.UTC().Format(time.RFC3339), tomb, del,
					approvalsPurged(pv.ApprovalDeletes, "would delete"))
				a.printUnsettled(pv.Unsettled, pv.OldestUnsettled, "would leave")
				return nil
			}
			tty := isTerminal(a.stdout)
			res, err := s.Purge(ctx, &oncekey.PurgeParams{BatchSize: batch, Progress: func(p oncekey.PurgeResult) {
				if tty {
					fmt.Fprintf(a.stdout, "\r%s batch %d: %d tombstoned, %d deleted", spinner(p.Batches), p.Batches, p.Tombstoned, p.Deleted)
				}
			}})
			if tty {
				fmt.Fprint(a.stdout, "\r\033[K")
			}
			if err != nil {
				return a.storeError("purge", err)
			}
			fmt.Fprintf(a.stdout, "purged in %d batch(es): %d record(s) tombstoned, %d tombstone(s) deleted%s\n", res.Batches, res.Tombstoned, res.Deleted,
				approvalsPurged(res.ApprovalsDeleted, "deleted"))
			a.printUnsettled(res.Unsettled, res.OldestUnsettled, "left")
			return nil
		},
	}
	cmd.Flags().IntVar(&batch, "batch-size", 200, "rows per statement")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would be purged, change nothing")
	return cmd
}

// approvalsPurged is purge's words for the decided approvals past their retention it deleted
// (or would delete), "" when there were none.
func approvalsPurged(n int64, verb string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %s %d decided approval(s) past their retention", verb, n)
}

func spinner(i int) string { return string(`|/-\`[i%4]) }

// isTerminal reports whether w is a character device (a terminal), for progress output.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func newForgetCmd(a *app) *cobra.Command {
	var (
		tenant       string
		yes          bool
		allowMissing bool
	)
	cmd := &cobra.Command{
		Use:   "forget --tenant T --yes [--allow-missing]",
		Short: "Delete every record of one tenant (for erasure requests); late duplicates are then no longer refused",
		Long: "forget deletes every record of the tenant, tombstones included, and its approvals; it cannot be undone.\n\n" +
			"A tenant with no records is an error (exit 3), so a mistyped tenant does not pass for an erasure done;\n" +
			"--allow-missing makes it succeed (exit 0), for scripts that erase a tenant that may already be gone.",
		Example: "  oncekey forget --tenant acme            # counts the records, deletes nothing\n" +
			"  oncekey forget --tenant acme --yes\n" +
			"  oncekey forget --tenant acme --yes --allow-missing   # idempotent: exit 0 when acme has no records",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(tenant) == "" {
				return fail(exitUsage, "--tenant is required")
			}
			ctx := cmd.Context()
			s, pool, err := a.store(ctx)
			if err != nil {
				return err
			}
			defer pool.Close()
			none := func() error {
				if allowMissing {
					fmt.Fprintf(a.stdout, "tenant %s has no records in %s: nothing to delete (--allow-missing)\n", strconv.Quote(tenant), a.pg)
					return nil
				}
				return fail(exitNotFound, "tenant %s has no records in %s: nothing to delete; `%s` lists the tenants that have (add --allow-missing where no records is fine)",
					strconv.Quote(tenant), a.pg, a.db(shell.Cmd("oncekey", "stats")).Switch("--json"))
			}
			if !yes {
				rows, err := s.Stats(ctx, tenant)
				if err != nil {
					return a.storeError("forget", err)
				}
				var n int64
				for _, r := range rows {
					n += r.Count
				}
				aps, _, err := listApprovals(ctx, s, oncekey.ListApprovalsParams{Tenant: tenant}, math.MaxInt)
				if err != nil {
					return a.storeError("forget", err)
				}
				if n == 0 && len(aps) == 0 {
					return none()
				}
				return fail(exitUsage, "refusing without --yes: this deletes all %d record(s)%s of tenant %s, tombstones included, and cannot be undone",
					n, andApprovals(int64(len(aps))), strconv.Quote(tenant))
			}
			res, err := s.Forget(ctx, &oncekey.ForgetParams{Tenant: tenant})
			if err != nil {
				return a.storeError("forget", err)
			}
			if res.Deleted == 0 && res.ApprovalsDeleted == 0 {
				return none()
			}
			fmt.Fprintf(a.stdout, "deleted %d record(s)%s of tenant %s in %s\n", res.Deleted, andApprovals(res.ApprovalsDeleted), strconv.Quote(tenant), a.pg)
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant to erase (required)")
	cmd.Flags().BoolVar(&yes, "yes", false, "really delete")
	cmd.Flags().BoolVar(&allowMissing, "allow-missing", false, "succeed (exit 0) when the tenant has no records")
	return cmd
}

// andApprovals is forget's words for a tenant's n approvals, "" when it has none.
func andApprovals(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d approval(s)", n)
}

func contextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// migrateDryRun prints the migrations Migrate would apply.
func migrateDryRun(cmd *cobra.Command, a *app, pool *pgxpool.Pool) error {
	pending, err := pgstore.PendingMigrations(cmd.Context(), pool, a.schema)
	if err != nil {
		return a.storeError("migrate --dry-run", err)
	}
	if len(pending) == 0 {
		fmt.Fprintf(a.stdout, "dry run: %s is up to date; nothing to apply\n", a.pg)
		return nil
	}
	fmt.Fprintf(a.stdout, "dry run: would apply %d migration(s) in %s:\n", len(pending), a.pg)
	for _, m := range pending {
		fmt.Fprintln(a.stdout, "  "+m)
	}
	return nil
}
