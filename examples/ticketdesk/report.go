package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/examples/ticketdesk/internal/desk"
	"github.com/oncekey/oncekey/examples/ticketdesk/internal/downstream"
)

// summaryLine is the report's last line, for programs:
// "oncekey: operations=N effects=N double_effects=N replays=N reconciled=N reproposals=N read_unknown=N read_in_flight=N tx_operations=N tx_effects=N tx_unknown=N outbox_deliveries=N | plain retries: double_effects=N".
// read_unknown and read_in_flight count the tool results the model read with those statuses;
// tx_operations, tx_effects and tx_unknown are the Transactional tool's (GrantCredit) operation
// keys, rows in the credit ledger and operations reported unknown; outbox_deliveries counts the
// relay's accepted deliveries of the credits' confirmation e-mails.
func summaryLine(r *desk.Report) string {
	o := r.Oncekey
	return fmt.Sprintf("oncekey: operations=%d effects=%d double_effects=%d replays=%d reconciled=%d reproposals=%d read_unknown=%d read_in_flight=%d tx_operations=%d tx_effects=%d tx_unknown=%d outbox_deliveries=%d | plain retries: double_effects=%d",
		o.Operations, o.Effects, o.DoubleEffects, o.Replays, o.Reconciled, o.Reproposals,
		o.Labels[oncekey.OutcomeUnknown], o.Labels[oncekey.OutcomeInFlight],
		o.CreditOperations, o.PerService[desk.ServiceLedger].Effects, o.CreditUnknown, o.OutboxDeliveries, r.Plain.DoubleEffects)
}

// printReport writes the human part of the report (everything but the summary line).
func printReport(w io.Writer, r *desk.Report) {
	o, p := r.Oncekey, r.Plain
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(label string, a, b any) { fmt.Fprintf(tw, "%s\t%v\t%v\n", label, a, b) }
	row("", "with oncekey", "plain retries")
	row("requests completed", fmt.Sprintf("%d/%d", o.Completed, o.Requests), fmt.Sprintf("%d/%d", p.Completed, p.Requests))
	row("model turns (chat completions)", o.ModelCalls, p.ModelCalls)
	row("tool calls proposed by the model", o.ToolCalls, p.ToolCalls)
	row("  proposed again, same arguments", o.Reproposals, p.Reproposals)
	row("    answered as replays", o.ReproposalsReplayed, "-")
	row("  same tool, other arguments", o.ChangedArguments, p.ChangedArguments)
	row("faults injected downstream", total(o.Faults), total(p.Faults))
	for _, f := range []downstream.Fault{downstream.FaultLostAfterCommit, downstream.FaultErrorBeforeCommit, downstream.FaultDelay} {
		row("  "+strings.ReplaceAll(f.String(), "_", " "), o.Faults[f], p.Faults[f])
	}
	row("worker killed mid-call", o.WorkerKills, p.WorkerKills)
	row("effects landed (downstream ledgers)", o.Effects, p.Effects)
	for _, s := range []string{downstream.ServiceTickets, downstream.ServiceEmail, downstream.ServicePayments, desk.ServiceLedger} {
		row("  "+s, o.PerService[s].Effects, p.PerService[s].Effects)
	}
	row("DOUBLE EFFECTS", o.DoubleEffects, p.DoubleEffects)
	row("GrantCredit (transactional): operations / ledger rows / unknown",
		fmt.Sprintf("%d / %d / %d", o.CreditOperations, o.PerService[desk.ServiceLedger].Effects, o.CreditUnknown),
		fmt.Sprintf("- / %d / -", p.PerService[desk.ServiceLedger].Effects))
	row("credit e-mails landed / outbox deliveries (attempts)",
		fmt.Sprintf("%d / %d (%d)", o.CreditMails, o.OutboxDeliveries, o.OutboxAttempts),
		fmt.Sprintf("%d / - (sent by the tool)", p.CreditMails))
	row("refunds issued / refused", fmt.Sprintf("%d / %d", o.RefundsIssued, o.RefundsRefused), fmt.Sprintf("%d / %d", p.RefundsIssued, p.RefundsRefused))
	row("operation keys claimed", o.Operations, "-")
	row("duplicates suppressed (replays)", o.Replays, "-")
	row("refused by Authorize (rejected)", o.Outcomes[oncekey.OutcomeRejected], "-")
	row("model read unknown (told the user, no repeat)", o.Labels[oncekey.OutcomeUnknown], "-")
	row("model read in_flight (waited, asked again)", o.Labels[oncekey.OutcomeInFlight], "-")
	row("outcomes unknown, sent to reconciliation (reports)", o.Outcomes[oncekey.OutcomeUnknown]+o.WorkerKills, "-")
	row("records settled by it: operator / receipt", fmt.Sprintf("%d / %d", o.ReconciledByOperator, o.ReconciledByReceipt), "-")
	row("e-mail service dedup hits", o.PerService[downstream.ServiceEmail].DedupHits, p.PerService[downstream.ServiceEmail].DedupHits)
	row("wall time", o.Duration.Round(100e6), p.Duration.Round(100e6))
	_ = tw.Flush()
	fmt.Fprintln(w)
	printApprovals(w, o.Approvals)
	for _, m := range []*desk.ModeReport{o, p} {
		if len(m.Doubled) > 0 {
			fmt.Fprintf(w, "landed twice with %s: %s\n", m.Mode, list(m.Doubled, 12))
		}
		for _, e := range m.WorkflowErrors {
			fmt.Fprintf(w, "workflow failed with %s: %s\n", m.Mode, e)
		}
	}
}

func total(m map[downstream.Fault]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func list(items []string, limit int) string {
	if len(items) <= limit {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:limit], ", ") + fmt.Sprintf(" and %d more", len(items)-limit)
}

// printApprovals writes what the approval scene did and what the model read of it.
func printApprovals(w io.Writer, a *desk.ApprovalScene) {
	if a == nil {
		return
	}
	fmt.Fprintf(w, "approvals (refunds over %d.%02d wait for a person): approved with edited arguments %d, denied with a message %d; refunds landed %d %v (cents)\n",
		desk.ApprovalThresholdCents/100, desk.ApprovalThresholdCents%100, a.Edited, a.Denied, a.RefundEffects, a.Refunded)
	for _, r := range a.Read {
		fmt.Fprintf(w, "  %s: the model read %s\n", r.RequestID, r.ForModel)
	}
	for _, e := range a.Errors {
		fmt.Fprintf(w, "  approval scene: %s\n", e)
	}
	fmt.Fprintln(w)
}
