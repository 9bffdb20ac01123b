package decisiontext

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// TestMessages pins the texts the CLI and the inbox print from the table, as they were when each
// built its own.
func TestMessages(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Approval.Unreachable("dial tcp: refused"), "Could not ask the approval workflow where it stands: dial tcp: refused. Check that Temporal is reachable and that a worker runs the approval workflow, then reload."},
		{Reconciliation.Missing("Next."), "No reconciliation workflow exists for this operation (it never started, or Temporal no longer keeps its history), so nothing here can release a workflow. Next."},
		{Approval.Missing("Next."), "No approval workflow exists for this call (it never started, or Temporal no longer keeps its history), so nothing here can decide it. Next."},
		{Approval.Closed("oncekey-approval-k", "was terminated", "Next."), "The approval workflow oncekey-approval-k was terminated without a decision: it no longer waits, and nothing here can decide it. Next."},
		{Reconciliation.NotWaiting("k", "default"), "no reconciliation workflow is waiting for k in namespace default"},
		{Approval.WorkflowID("k"), "oncekey-approval-k"},
		{Reconciliation.WorkflowID("k"), "oncekey-reconcile-k"},
		{Approval.Refused("oncekey-approval-k", "another tenant"), "the approval workflow oncekey-approval-k refused the decision; nothing was recorded: another tenant"},
		{Reconciliation.UnconfirmedText("resolution", "oncekey-reconcile-k", "a worker must run"), "the resolution was delivered to the reconciliation workflow oncekey-reconcile-k, but it did not accept or refuse it within 10s: a worker must run"},
		{Reconciliation.Title(NoWorkflow), "No reconciliation workflow waits for this operation"},
		{Approval.Title(Unreachable), "Could not reach the approval workflow"},
		{ResolutionAnswer(&reconcile.Output{Outcome: reconcile.Applied, ResolvedBy: "ines", EffectReference: "BK-1", Result: []byte("xy")}, strconv.Quote),
			`outcome applied, resolved by "ines", effect reference "BK-1", result 2 bytes stored`},
		{ResolutionAnswer(&reconcile.Output{Outcome: reconcile.Failed, Failure: "gone"}, nil), "outcome failed, failure gone"},
		{ApprovalAnswer(&reconcile.ApprovalOutput{Status: oncekeystore.ApprovalDenied, DecidedBy: "ines", DecidedAt: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC), Reason: "too much"}, nil),
			"denied, by ines, at 2026-01-02T15:04:05Z, reason: too much"},
		{ApprovalAnswer(nil, nil), "accepted"},
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
}

// Outcome classifies each protocol's client errors, and only its own.
func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		p      Protocol
		err    error
		want   Outcome
		reason string
	}{
		{Reconciliation, nil, Accepted, ""},
		{Reconciliation, fmt.Errorf("x: %w", &reconcile.InvalidResolutionError{Field: "Epoch"}), Invalid, ""},
		{Reconciliation, &reconcile.RefusedError{Reason: "wrong tenant"}, Refused, "wrong tenant"},
		{Reconciliation, reconcile.ErrNoReconciliation, NoWorkflow, ""},
		{Reconciliation, reconcile.ErrNoApproval, Unreachable, ""},
		{Reconciliation, fmt.Errorf("x: %w", reconcile.ErrUnconfirmed), Unconfirmed, ""},
		{Approval, &reconcile.InvalidDecisionError{Field: "Reason"}, Invalid, ""},
		{Approval, &reconcile.DecisionRefusedError{Reason: "decided"}, Refused, "decided"},
		{Approval, &reconcile.RefusedError{Reason: "x"}, Unreachable, ""},
		{Approval, reconcile.ErrNoApproval, NoWorkflow, ""},
		{Approval, serviceerror.NewNamespaceNotFound("prod"), NoNamespace, ""},
		{Approval, errors.New("dial tcp: refused"), Unreachable, ""},
	} {
		got, reason := c.p.Outcome(c.err)
		if got != c.want || reason != c.reason {
			t.Errorf("%s %v: got %v %q, want %v %q", c.p.Workflow, c.err, got, reason, c.want, c.reason)
		}
	}
}
