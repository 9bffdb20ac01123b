package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/mdtext"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/reconcile"
)

// resolutionProtocol is the reconciliation workflow's protocol on the decision kernel: its
// handlers, shown by the Temporal UI next to their names, and the words of its refusals.
var resolutionProtocol = protocol{
	noun: "resolution", goType: "reconcile.Resolution", verb: "resolve", workflow: "reconciliation", report: "status",
	settledAs:   "the operation was already settled as",
	refusedType: reconcile.ErrTypeRefused, notWaitingType: reconcile.ErrTypeNotWaiting,
	signalName: reconcile.SignalName,
	signalDescription: "Settle the unknown outcome of an operation: send one reconcile.Resolution as JSON, " +
		`{"outcome":"applied"|"not_applied"|"failed","effect_reference":…,"result":…,"note":…,"resolved_by":…}; ` +
		"a refusal shows in the oncekey.status query. The oncekey.resolve update answers at once instead.",
	queryName:        reconcile.QueryName,
	queryDescription: "Where this reconciliation stands: a reconcile.StatusReport (state, record status, since when it waits, the last refused resolution).",
	updateName:       reconcile.UpdateName,
	updateDescription: "Settle the unknown outcome of an operation: a reconcile.Resolution (outcome applied, not_applied or failed); " +
		"answers with the reconciliation's output.",
	ignoredLog: "oncekey: ignored an invalid resolution signal",
}

// setState moves the run to state: the status query, the workflow's current details in the
// Temporal UI and, with Input.SearchAttributes, its search attributes. Current details are not
// recorded in history; the search attribute upsert is a command, made only for inputs that ask
// for it, so histories recorded without the option replay unchanged.
func (r *reconciler) setState(ctx workflow.Context, state reconcile.State) {
	changed := r.status.State != state || !r.uiSet
	r.status.State = state
	r.uiSet = true
	workflow.SetCurrentDetails(ctx, r.details())
	if r.in.SearchAttributes && changed {
		if err := workflow.UpsertTypedSearchAttributes(ctx, decision.SearchAttributes(r.in, state, r.status.WaitingSince)...); err != nil {
			workflow.GetLogger(ctx).Warn("oncekey: could not set the reconciliation's search attributes", "tool", r.in.Tool, "key_prefix", prefix(r.in.OperationKey), "error", err)
		}
	}
}

// details is the workflow's current details (Temporal markdown): what is unknown, since when,
// what is needed. Values from the workflow, the reason (a tool's error text) and a refused
// resolution's reason go through mdtext.Text: they show as themselves, never as Markdown.
func (r *reconciler) details() string {
	in, st := r.in, r.status
	what := fmt.Sprintf("%s (tenant %s, operation key %s)", mdtext.Call(in.Tool, in.StepID, in.WorkflowID), mdtext.Text(in.Tenant), in.OperationKey)
	var b strings.Builder
	switch st.State {
	case reconcile.StateInspecting:
		fmt.Fprintf(&b, "**Reading the record** of %s.", what)
	case reconcile.StateWaitingForClaim:
		fmt.Fprintf(&b, "**Waiting for a late claim** of %s, until %s; no record yet.", what, stamp(in.ClaimDeadline))
	case reconcile.StateWaitingForLease:
		fmt.Fprintf(&b, "**Waiting for the attempt that holds the claim** of %s: its lease has not run out yet.", what)
	case reconcile.StateReceiptLookup:
		fmt.Fprintf(&b, "**Outcome unknown**: %s. Asking the tool's receipt lookup.", what)
	case reconcile.StateWaiting:
		fmt.Fprintf(&b, "**Outcome unknown, waiting for a person** since %s: %s.", stamp(st.WaitingSince), what)
		if in.Reason != "" {
			fmt.Fprintf(&b, "\n\nWhy: %s", mdtext.Text(in.Reason))
		}
		fmt.Fprintf(&b, "\n\nNeeded: check downstream whether it landed, then `%s` "+
			"(or `--not-applied`, `--failed`), or send the %s update.",
			shell.Resolve(in.OperationKey).Flag("--tenant", in.Tenant).Switch("--applied").Placeholder("--ref", "<receipt>"), reconcile.UpdateName)
		if in.EscalationTimeout > 0 {
			fmt.Fprintf(&b, " Escalates %s after the wait began.", in.EscalationTimeout)
		}
		if st.LastInvalidSignal != "" {
			fmt.Fprintf(&b, "\n\nLast refused resolution: %s", mdtext.Text(st.LastInvalidSignal))
		}
	case reconcile.StateResolved:
		fmt.Fprintf(&b, "**Settled: %s** — %s.", st.Outcome, what)
	default:
		fmt.Fprintf(&b, "%s: %s.", st.State, what)
	}
	return b.String()
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// approvalProtocol is the approval workflow's protocol on the decision kernel.
var approvalProtocol = protocol{
	noun: "decision", goType: "reconcile.Decision", verb: "decide", workflow: "approval workflow", report: "approval",
	settledAs:   "the approval is already",
	refusedType: reconcile.ErrTypeDecisionRefused, notWaitingType: reconcile.ErrTypeNotPending,
	signalName: reconcile.DecideSignalName,
	signalDescription: "Approve or deny the call: send one reconcile.Decision as JSON, " +
		`{"decision":"approve"|"deny","tenant":…,"episode":…,"decided_by":…,"reason":…,"request_id":…} (a denial needs a reason); ` +
		"a refusal shows in the oncekey.approval query. The oncekey.decide update answers at once instead.",
	queryName:        reconcile.ApprovalQueryName,
	queryDescription: "Where this approval stands: a reconcile.ApprovalReport (state, status, episode, deadline, who decided, the last refused decision).",
	updateName:       reconcile.DecideUpdateName,
	updateDescription: "Approve or deny the call: a reconcile.Decision (decision approve or deny, tenant, episode, reason); " +
		"answers with the approval's output.",
	ignoredLog: "oncekey: ignored an invalid approval decision signal",
}

// setState moves the approval run to state: the query, the workflow's current details in the
// Temporal UI (not recorded in history) and, with ApprovalInput.SearchAttributes, its search
// attributes. The upsert is a command, made only for inputs that ask for it and only when the
// status it sets changes, so histories recorded without the option replay unchanged.
func (a *approver) setState(ctx workflow.Context, state reconcile.ApprovalState) {
	a.report.State = state
	workflow.SetCurrentDetails(ctx, a.details())
	if !a.in.SearchAttributes {
		return
	}
	if state == reconcile.ApprovalStateWaiting && a.waitingSince.IsZero() {
		a.waitingSince = a.report.RequestedAt
	}
	status := a.searchStatus()
	if status == a.upserted {
		return
	}
	a.upserted = status
	if err := workflow.UpsertTypedSearchAttributes(ctx, decision.ApprovalSearchAttributes(a.in, status, a.waitingSince)...); err != nil {
		workflow.GetLogger(ctx).Warn("oncekey: could not set the approval's search attributes", "tool", a.in.Tool, "key_prefix", prefix(a.in.OperationKey), "error", err)
	}
}

// searchStatus is the run's SearchAttributeStatus value (a reconcile.SearchStatus… value).
func (a *approver) searchStatus() string {
	switch {
	case a.report.State == reconcile.ApprovalStateRequesting:
		return decision.SearchStatusRequestingApproval
	case a.report.State == reconcile.ApprovalStateWaiting:
		return reconcile.SearchStatusWaitingForApproval
	case a.otherArguments:
		return reconcile.SearchStatusOtherArguments
	}
	return string(a.report.Status)
}

// details is the approval workflow's current details (Temporal markdown): what waits for whom,
// until when, and how to decide. Values from the workflow, the summary, who decided and a refused
// decision's reason go through mdtext.Text: they show as themselves, never as Markdown.
func (a *approver) details() string {
	in, r := a.in, a.report
	what := fmt.Sprintf("%s (tenant %s, operation key %s)", mdtext.Call(in.Tool, in.StepID, in.WorkflowID), mdtext.Text(in.Tenant), in.OperationKey)
	var b strings.Builder
	switch r.State {
	case reconcile.ApprovalStateRequesting:
		fmt.Fprintf(&b, "**Asking for approval** of %s.", what)
	case reconcile.ApprovalStateWaiting:
		fmt.Fprintf(&b, "**Waiting for approval** since %s, until %s (episode %d): %s.\n\nThe approver sees: %s", stamp(r.RequestedAt), stamp(r.Deadline), r.Episode, what, mdtext.Text(r.Summary))
		fmt.Fprintf(&b, "\n\nNeeded: `%s` or `%s`, or send the %s update.",
			shell.Decide("approve", in.OperationKey, in.Tenant),
			shell.Decide("deny", in.OperationKey, in.Tenant).Placeholder("--reason", "<why>"), reconcile.DecideUpdateName)
		if r.LastInvalidSignal != "" {
			fmt.Fprintf(&b, "\n\nLast refused decision: %s", mdtext.Text(r.LastInvalidSignal))
		}
		if e := r.Escalated; e != nil {
			fmt.Fprintf(&b, "\n\n**Escalated** to %s at %s: %s.", mdtext.Text(e.To), stamp(e.At), mdtext.Text(e.Reason))
		}
	case reconcile.ApprovalStateDecided:
		if a.created {
			fmt.Fprintf(&b, "**Decided: %s** by %s at %s — %s.", r.Status, mdtext.Text(r.DecidedBy), stamp(r.DecidedAt), what)
		} else {
			// A repeat of the call found the decision recorded: nobody was asked.
			fmt.Fprintf(&b, "**Already decided: %s** by %s at %s (episode %d) — %s. Nobody was asked again: this run read the recorded decision for a repeat of the call.",
				r.Status, mdtext.Text(r.DecidedBy), stamp(r.DecidedAt), r.Episode, what)
		}
	default:
		fmt.Fprintf(&b, "%s: %s.", r.State, what)
	}
	return b.String()
}
