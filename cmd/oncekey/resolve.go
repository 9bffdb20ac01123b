package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/decisiontext"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// resolveFlags are the flags of `oncekey resolve`.
type resolveFlags struct {
	deciderFlags
	applied, notApplied, faild bool
	ref, result, note          string
	direct, noTemporalCheck    bool
	// epoch is --epoch: the record's epoch the decision is for.
	epoch int64
}

// deciderFlags are the flags of a command that sends a decision: whose operation it is about
// (--tenant) and who decides (--by).
type deciderFlags struct {
	tenant, by string
	// signKey is --sign-key: the private key file to sign the decision with.
	signKey string
	// tenantGiven is false when --tenant was left out and tenant defaulted to the namespace.
	tenantGiven bool
}

// add defines --tenant and --by on cmd.
func (f *deciderFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.tenant, "tenant", "", "the operation's tenant (default: the namespace, the interceptor's default tenant)")
	cmd.Flags().StringVar(&f.by, "by", "", "who decided (default: $USER, else oncekey-cli when $USER is empty)")
	f.addSignKey(cmd)
}

// defaults sets the tenant to the namespace when --tenant was left out and returns who decides:
// --by, else $USER, else "".
func (f *deciderFlags) defaults(a *app) string {
	f.tenantGiven = f.tenant != ""
	if !f.tenantGiven {
		f.tenant = a.ns()
	}
	if f.by != "" {
		return f.by
	}
	return a.getenv("USER")
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
			if r, err = a.signResolution(ctx, &f, key, r); err != nil {
				return err
			}
			if f.direct {
				return a.resolveDirect(ctx, &f, key, r)
			}
			return a.withTemporal(ctx, func(ctx context.Context, c client.Client) error {
				rctx, cancel := context.WithTimeout(ctx, a.timeout)
				defer cancel()
				out, err := reconcile.ResolveOutput(rctx, c, f.tenant, key, r)
				id := reconcile.WorkflowID(key)
				if err := a.decisionError(ctx, c, sentDecision{
					p: decisiontext.Reconciliation, verb: "resolve", noun: decisiontext.Reconciliation.Decision, key: key,
					show: a.showCommand(key, f.tenant), status: "unknown", list: a.db(shell.ListUnknown()).String(),
					stored: func() error { return a.alreadySettled(ctx, key, f.tenant) },
					next: fmt.Sprintf("`%s` shows the record's status, and if it is still unknown `%s` writes the decision straight to the store",
						a.showCommand(key, f.tenant), a.directCommand(key, &f)),
					refused: func(_ error, reason string) error {
						return fail(exitFailed, "%s", decisiontext.Reconciliation.Refused(id, printable(oneLine(errors.New(reason)))))
					},
					noNamespace: a.noNamespace,
				}, err); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "resolved %s as %s (%s accepted it): %s\n", key, r.Outcome, id, describe(r))
				fmt.Fprintf(a.stdout, "the workflow answered: %s\n", decisiontext.ResolutionAnswer(out, printable))
				return nil
			})
		},
	}
	fl := cmd.Flags()
	f.add(cmd)
	fl.Int64Var(&f.epoch, "epoch", 0, "the record's epoch `N` the decision is for, as oncekey show KEY prints it (required)")
	fl.BoolVar(&f.applied, "applied", false, "the effect landed")
	fl.BoolVar(&f.notApplied, "not-applied", false, "the effect did not land: the tool may run again")
	fl.BoolVar(&f.faild, "failed", false, "a definite failure: the effect did not and will not land; the call fails")
	fl.StringVar(&f.ref, "ref", "", "effect reference downstream (ticket number, charge ID); with --applied")
	fl.StringVar(&f.result, "result", "", "the tool's result as JSON, or @FILE; with --applied (default: the zero value)")
	fl.StringVar(&f.note, "note", "", "why; stored with the record")
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
	s, closeStore, err := a.store(ctx)
	if err != nil {
		a.where = nil // the message that follows is about Temporal, not this database
		return nil
	}
	defer closeStore()
	gctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	rec, err := s.Get(gctx, &oncekeystore.GetParams{Tenant: tenant, OperationKey: key})
	if err != nil {
		a.where = nil
		return nil
	}
	switch rec.Status {
	case oncekeystore.StatusApplied, oncekeystore.StatusFailed, oncekeystore.StatusReleased:
	default:
		return nil
	}
	return fail(exitFailed, "%s is already %s, %s at %s: no reconciliation waits for it and there is nothing to resolve; `%s` shows the record",
		key, printable(string(rec.Status)), settledBy(rec), rec.UpdatedAt.UTC().Format(time.RFC3339), a.showCommand(key, tenant))
}

// settledBy says who settled rec: the person or receipt lookup that resolved it, else the
// tool's own run.
func settledBy(rec *oncekeystore.Record) string {
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
			"a decision names the episode it was made for, so that it is refused once the operation has moved on", shell.Show(key))
	}
	by := f.defaults(a)
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
