package decisiontext

import "testing"

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
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
}
