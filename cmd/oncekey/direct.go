package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/cmd/oncekey/internal/workflowrun"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// directBy is recorded as (or after the user in) resolved_by for a decision written by
// `resolve --direct`, so the record says it bypassed the reconciliation workflow.
const directBy = "oncekey-cli --direct"

// resolveDirect writes r for key straight to the store (reconcile.Record), for an unknown record
// no reconciliation workflow waits for. It refuses when the record cannot be resolved, and, unless
// --no-temporal-check, when a reconciliation workflow for the key is running or Temporal cannot
// say. It prints what it wrote, what it checked and what it could not check.
func (a *app) resolveDirect(ctx context.Context, f *resolveFlags, key string, r reconcile.Resolution) error {
	s, closeStore, err := a.store(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	gctx, cancel := context.WithTimeout(ctx, a.timeout)
	rec, err := s.Get(gctx, &oncekeystore.GetParams{Tenant: f.tenant, OperationKey: key})
	cancel()
	if errors.Is(err, oncekeystore.ErrNotFound) {
		return a.recordNotFound(key, f.tenant, f.tenantGiven)
	}
	if err != nil {
		return a.storeError(fmt.Sprintf("resolve --direct %s (tenant %s)", key, f.tenant), err)
	}
	if err := resolvable(rec); err != nil {
		return err
	}
	if rec.Epoch != r.Epoch {
		return fail(exitFailed, "resolve --direct %s: %v", key, &oncekeystore.StaleDecisionError{OperationKey: key, Epoch: r.Epoch, Current: rec.Epoch, Status: rec.Status})
	}

	checked := "not checked: whether a reconciliation workflow for the key is running (--no-temporal-check); if one waits, " +
		"it keeps waiting until `" + a.normalCommand(key, f) + "` releases it (it then hands over the decision stored here)"
	if !f.noTemporalCheck {
		if checked, err = a.noReconciliation(ctx, key, f); err != nil {
			return err
		}
		if !derivedIn(rec, a.ns()) {
			checked += fmt.Sprintf("\nnot confirmed: that namespace %s is the caller's (the record shows it for step keys only); "+
				"a reconciliation workflow runs in the caller's namespace, and one waiting in another namespace keeps waiting "+
				"until resolve without --direct, given that --namespace, releases it with the decision stored here", a.ns())
		}
	}

	wctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	rec, err = reconcile.Record(wctx, s, nil, f.tenant, key, r)
	var (
		inv      *reconcile.InvalidResolutionError
		conflict *oncekeystore.StatusConflictError
		stale    *oncekeystore.StaleDecisionError
	)
	switch {
	case err == nil:
	case errors.As(err, &inv):
		return fail(exitUsage, "resolve --direct %s: %v; nothing was written", key, oneLine(err))
	case errors.As(err, &conflict) && conflict.Status == oncekeystore.StatusExpired:
		return fail(exitFailed, "resolve --direct %s: the record is past its retention (a tombstone) and can no longer be resolved; nothing was written; `%s` shows it", key, a.showCommand(key, f.tenant))
	case errors.As(err, &stale):
		return fail(exitFailed, "resolve --direct %s: %v", key, stale)
	case errors.As(err, &conflict):
		return fail(exitFailed, "resolve --direct %s: the record became %s while this ran (settled another way); nothing was written; `%s` shows it", key, conflict.Status, a.showCommand(key, f.tenant))
	default:
		return a.storeError(fmt.Sprintf("resolve --direct %s (tenant %s)", key, f.tenant), err)
	}

	out := a.stdout
	fmt.Fprintf(out, "resolved %s directly in the store as %s (tenant %s, %s): %s\n",
		key, r.Outcome, printable(f.tenant), a.where, describe(r))
	fmt.Fprintf(out, "record: tool %s, workflow %s, step %s; status now %s\n",
		cell(rec.Tool), cell(rec.WorkflowID), cell(rec.StepID), cell(string(rec.Status)))
	fmt.Fprintln(out, checked)
	switch r.Outcome {
	case reconcile.Applied:
		if len(r.Result) > 0 {
			fmt.Fprintf(out, "not checked: the result's type. The normal path checks --result against %s's declared result type through the worker's registry; --direct cannot. "+
				"When the caller's workflow runs its step again it replays this result and must be able to decode it into that type. "+
				"It is stored as a plain JSON payload, not passed through a payload codec.\n", cell(rec.Tool))
		} else {
			fmt.Fprintf(out, "no --result: when the caller's workflow runs its step again it replays no result, that is the zero value of %s's result type.\n", cell(rec.Tool))
		}
		fmt.Fprintln(out, "next: this released no workflow; a run of the step (the same workflow ID and step ID) gets this decision and does not run the tool again.")
	case reconcile.NotApplied:
		fmt.Fprintln(out, "next: this released no workflow; the claim is released, and the next run of the step (the same workflow ID and step ID) runs the tool again.")
	case reconcile.Failed:
		fmt.Fprintln(out, "next: this released no workflow; the next run of the step (the same workflow ID and step ID) fails with oncekey.Failed, not retried.")
	}
	return nil
}

// resolvable refuses a record Store.Resolve would refuse, with what to do instead: only an
// unknown record, or a pending one whose lease has run out, can be resolved.
func resolvable(rec *oncekeystore.Record) error {
	switch {
	case rec.Status == oncekeystore.StatusUnknown:
		return nil
	case rec.Status == oncekeystore.StatusPending && rec.LeaseExpired:
		return nil
	case rec.Status == oncekeystore.StatusPending:
		return fail(exitFailed, "%s is pending: an attempt holds its claim until %s; nothing was written (its outcome is not unknown yet)",
			rec.OperationKey, rec.LeaseUntil.UTC().Format(time.RFC3339))
	case rec.Status == oncekeystore.StatusExpired:
		return fail(exitFailed, "%s is past its retention (a tombstone): its outcome can no longer be recorded; nothing was written", rec.OperationKey)
	}
	by := ""
	if rec.ResolvedBy != "" {
		by = " by " + printable(rec.ResolvedBy)
	}
	return fail(exitFailed, "%s is already %s%s: there is nothing to resolve; nothing was written", rec.OperationKey, printable(string(rec.Status)), by)
}

// noReconciliation checks with Temporal that no reconciliation workflow for key is running and
// returns the line saying what it checked. A running one, or Temporal not answering, is an error:
// nothing may be written then.
func (a *app) noReconciliation(ctx context.Context, key string, f *resolveFlags) (string, error) {
	const unchecked = "--direct checks with Temporal that no reconciliation workflow for the key is running before it writes, " +
		"so nothing was written; run it again once Temporal answers, or add --no-temporal-check if you know none is running"
	c, err := a.temporal(ctx)
	if err != nil {
		return "", fail(exitUnreachable, "%v; %s", err, unchecked)
	}
	defer c.Close()
	id := reconcile.WorkflowID(key)
	dctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	run, err := workflowrun.Describe(dctx, c, id)
	switch {
	case err != nil:
		return "", fail(exitUnreachable, "could not ask Temporal (namespace %s) about the reconciliation workflow %s: %v; %s", a.ns(), id, oneLine(err), unchecked)
	case run.Missing:
		return fmt.Sprintf("checked: no reconciliation workflow %s exists in namespace %s", id, a.ns()), nil
	case run.Closed == "":
		state := ""
		qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
		if st, err := reconcile.Status(qctx, c, key); err == nil {
			state = fmt.Sprintf(" (%s)", st.State)
		}
		qcancel()
		return "", fail(exitFailed, "the reconciliation workflow %s is running in namespace %s%s: resolve through it instead, without --direct: `%s`; nothing was written",
			id, a.ns(), state, a.normalCommand(key, f))
	}
	return fmt.Sprintf("checked: no reconciliation workflow for the key is running in namespace %s (%s ended: %s at %s)",
		a.ns(), id, run.Closed, run.ClosedAt.UTC().Format(time.RFC3339)), nil
}

// derivedIn reports whether rec's key is the step key of its workflow and step in namespace ns
// (an explicit step ID, or the default step "<run ID>/<activity ID>"): then a reconciliation
// workflow for it runs in ns. False for other key strategies, whose parts the record does not
// keep, and for another namespace.
func derivedIn(rec *oncekeystore.Record, ns string) bool {
	ops := []oncekey.Operation{{Namespace: ns, Tenant: rec.Tenant, WorkflowID: rec.WorkflowID, StepID: rec.StepID}}
	if run, act, ok := strings.Cut(rec.StepID, "/"); ok {
		ops = append(ops, oncekey.Operation{Namespace: ns, Tenant: rec.Tenant, WorkflowID: rec.WorkflowID, RunID: run, ActivityID: act})
	}
	for _, op := range ops {
		if k, err := oncekey.Key(oncekey.Policy{}, op); err == nil && k == rec.OperationKey {
			return true
		}
	}
	return false
}

// normalCommand returns the `oncekey resolve` command for key with f's decision, signalling the
// reconciliation workflow; directCommand the same with --direct, writing to the store.
func (a *app) normalCommand(key string, f *resolveFlags) string {
	return resolveCommand(a, key, f, false)
}

func (a *app) directCommand(key string, f *resolveFlags) string {
	return resolveCommand(a, key, f, true)
}

func resolveCommand(a *app, key string, f *resolveFlags, direct bool) string {
	c := a.withAddress(shell.Resolve(key).Flag("--tenant", f.tenant).Int("--epoch", f.epoch))
	if ns := a.ns(); ns != "default" {
		c.Flag("--namespace", ns)
	}
	if direct {
		a.db(c).Switch("--direct")
	}
	switch {
	case f.applied:
		c.Switch("--applied")
	case f.notApplied:
		c.Switch("--not-applied")
	default:
		c.Switch("--failed")
	}
	return c.FlagIf("--ref", f.ref).FlagIf("--result", f.result).FlagIf("--note", f.note).FlagIf("--by", f.by).String()
}
