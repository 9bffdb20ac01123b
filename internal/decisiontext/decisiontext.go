// Package decisiontext is the one table of operator messages about a decision protocol
// (reconciliation, approval) that the CLI and the inbox both print, so their texts cannot drift.
// It imports only reconcile (for the workflow IDs); the root package and reconcile must not
// import it.
package decisiontext

import "github.com/oncekey/oncekey/reconcile"

// Protocol is the words of one decision protocol, and the messages built from them.
type Protocol struct {
	// Workflow names the protocol's workflow: "reconciliation workflow".
	Workflow string
	// Decision names what a person sends: "resolution".
	Decision string
	// Subject is what one workflow is for: "operation".
	Subject string
	// Cannot is what nothing can do once the workflow no longer waits: "release a workflow".
	Cannot string
	// WorkflowID is the workflow ID of an operation key.
	WorkflowID func(key string) string
}

var (
	// Reconciliation is the protocol of an unknown outcome (reconcile.Resolve).
	Reconciliation = Protocol{Workflow: "reconciliation workflow", Decision: "resolution", Subject: "operation",
		Cannot: "release a workflow", WorkflowID: reconcile.WorkflowID}
	// Approval is the protocol of an approval request (reconcile.Decide).
	Approval = Protocol{Workflow: "approval workflow", Decision: "decision", Subject: "call",
		Cannot: "decide it", WorkflowID: reconcile.ApprovalWorkflowID}
)

// Unreachable is the message of a workflow that could not be asked where it stands; err is the
// error on one line.
func (p Protocol) Unreachable(err string) string {
	return "Could not ask the " + p.Workflow + " where it stands: " + err +
		". Check that Temporal is reachable and that a worker runs the " + p.Workflow + ", then reload."
}

// Missing is the message of a workflow that does not exist, followed by next (what still works).
func (p Protocol) Missing(next string) string {
	return "No " + p.Workflow + " exists for this " + p.Subject +
		" (it never started, or Temporal no longer keeps its history), so nothing here can " + p.Cannot + ". " + next
}

// Closed is the message of workflow id that closed without a decision (closed says how and
// when: "was terminated 5m ago"), followed by next.
func (p Protocol) Closed(id, closed, next string) string {
	return "The " + p.Workflow + " " + id + " " + closed + " without a decision: it no longer waits, and nothing here can " +
		p.Cannot + ". " + next
}

// NotStarted is why a decision may find no workflow, after NotWaiting.
const NotStarted = "it was never started, has already finished, or runs in another namespace (--namespace)"

// NotWaiting starts the CLI's message of a decision that found no workflow: "no approval
// workflow is waiting for KEY in namespace NS".
func (p Protocol) NotWaiting(key, namespace string) string {
	return "no " + p.Workflow + " is waiting for " + key + " in namespace " + namespace
}
