// Package decisiontext is the one table of operator messages about a decision protocol
// (reconciliation, approval) that the CLI and the inbox both print, so their texts cannot drift:
// what became of a decision (Protocol.Outcome, from its client's error) and the words for each
// outcome and for the workflows' answers. Of oncekey it imports only reconcile (the workflow IDs,
// the outputs and the errors of its clients); the root package and reconcile must not import it.
package decisiontext

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/oncekey/oncekey/reconcile"
)

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
	// refusal returns the workflow's reason when err is its refusal of a decision.
	refusal func(err error) (reason string, ok bool)
	// invalid reports whether err says the decision is malformed.
	invalid func(err error) bool
	// noWorkflow is the client's error when no workflow waits.
	noWorkflow error
}

var (
	// Reconciliation is the protocol of an unknown outcome (reconcile.Resolve).
	Reconciliation = Protocol{Workflow: "reconciliation workflow", Decision: "resolution", Subject: "operation",
		Cannot: "release a workflow", WorkflowID: reconcile.WorkflowID,
		refusal:    refusal(func(e *reconcile.RefusedError) string { return e.Reason }),
		invalid:    is[*reconcile.InvalidResolutionError],
		noWorkflow: reconcile.ErrNoReconciliation}
	// Approval is the protocol of an approval request (reconcile.Decide).
	Approval = Protocol{Workflow: "approval workflow", Decision: "decision", Subject: "call",
		Cannot: "decide it", WorkflowID: reconcile.ApprovalWorkflowID,
		refusal:    refusal(func(e *reconcile.DecisionRefusedError) string { return e.Reason }),
		invalid:    is[*reconcile.InvalidDecisionError],
		noWorkflow: reconcile.ErrNoApproval}
)

// refusal returns a Protocol.refusal for the refusal error E, whose reason reason says.
func refusal[E error](reason func(E) string) func(error) (string, bool) {
	return func(err error) (string, bool) {
		var e E
		if errors.As(err, &e) {
			return reason(e), true
		}
		return "", false
	}
}

// is reports whether err is (or wraps) an E.
func is[E error](err error) bool {
	var e E
	return errors.As(err, &e)
}

// Outcome is what became of a decision sent to a protocol's workflow (reconcile.ResolveOutput,
// reconcile.Decide): the CLI and the inbox answer each from Protocol.Outcome.
type Outcome int

const (
	// Accepted: the workflow recorded the decision.
	Accepted Outcome = iota
	// Invalid: the decision is malformed; nothing was sent.
	Invalid
	// Refused: the workflow refused the decision (the reason comes with it); nothing was recorded.
	Refused
	// NoWorkflow: no workflow of the protocol waits for the key.
	NoWorkflow
	// Unconfirmed: the decision was delivered, and the workflow neither accepted nor refused it in
	// time (reconcile.ErrUnconfirmed).
	Unconfirmed
	// NoNamespace: Temporal has no such namespace.
	NoNamespace
	// Unreachable: anything else; the workflow may not have got the decision.
	Unreachable
)

// Outcome returns what became of a decision whose client returned err (nil: Accepted), and the
// workflow's reason for Refused.
func (p Protocol) Outcome(err error) (Outcome, string) {
	var nsMissing *serviceerror.NamespaceNotFound
	if reason, ok := p.refusal(err); ok {
		return Refused, reason
	}
	switch {
	case err == nil:
		return Accepted, ""
	case p.invalid(err):
		return Invalid, ""
	case errors.Is(err, reconcile.ErrUnconfirmed):
		return Unconfirmed, ""
	case errors.Is(err, p.noWorkflow):
		return NoWorkflow, ""
	case errors.As(err, &nsMissing):
		return NoNamespace, ""
	}
	return Unreachable, ""
}

// Title is the inbox's heading of the answer to a decision with outcome o (not Accepted, whose
// heading says what was recorded).
func (p Protocol) Title(o Outcome) string {
	switch o {
	case Invalid:
		return "Refused: the decision is not valid"
	case Refused:
		return "Refused by the " + p.Workflow
	case NoWorkflow:
		return "No " + p.Workflow + " waits for this " + p.Subject
	case Unconfirmed:
		return "Delivered, not yet confirmed"
	}
	return "Could not reach the " + p.Workflow
}

// SignatureTitle is the inbox's heading of the answer to a decision the workers refused because
// of its signature (errors.Is(err, decisionsig.ErrRefused) on the client's error); the reason
// that follows says what to sign it with.
const SignatureTitle = "Refused: the workers do not accept its signature"

// Refused says that workflow id refused a decision, and why: "the approval workflow ID refused
// the decision; nothing was recorded: REASON".
func (p Protocol) Refused(id, reason string) string {
	return "the " + p.Workflow + " " + id + " refused the " + p.Decision + "; nothing was recorded: " + reason
}

// UnconfirmedText says that a decision (noun: "resolution", "denial") delivered to workflow id
// was neither accepted nor refused within reconcile.ConfirmWait, and need, what it needs to land
// (workflowrun.Unconfirmed in cmd/oncekey).
func (p Protocol) UnconfirmedText(noun, id, need string) string {
	return "the " + noun + " was delivered to the " + p.Workflow + " " + id + ", but it did not accept or refuse it within " +
		reconcile.ConfirmWait.String() + ": " + need
}

// ResolutionAnswer says what the reconciliation workflow recorded: "outcome applied, resolved by
// ines, effect reference BK-1, result 12 bytes stored". q quotes each stored string for where it
// is printed (nil: as it is).
func ResolutionAnswer(out *reconcile.Output, q func(string) string) string {
	if out == nil {
		return "accepted"
	}
	q = orPlain(q)
	parts := []string{"outcome " + string(out.Outcome)}
	if out.ResolvedBy != "" {
		parts = append(parts, "resolved by "+q(out.ResolvedBy))
	}
	if out.EffectReference != "" {
		parts = append(parts, "effect reference "+q(out.EffectReference))
	}
	if len(out.Result) > 0 {
		parts = append(parts, fmt.Sprintf("result %d bytes stored", len(out.Result)))
	}
	if out.Failure != "" {
		parts = append(parts, "failure "+q(out.Failure))
	}
	return strings.Join(parts, ", ")
}

// ApprovalAnswer says what the approval workflow recorded: "approved, by ines, at
// 2026-01-02T15:04:05Z, reason: booked by phone", then the message for the model if there is one.
// q is as for ResolutionAnswer.
func ApprovalAnswer(out *reconcile.ApprovalOutput, q func(string) string) string {
	if out == nil {
		return "accepted"
	}
	if out.Waiting() {
		return out.SignersText()
	}
	q = orPlain(q)
	parts := []string{string(out.Status)}
	if out.DecidedBy != "" {
		parts = append(parts, "by "+q(out.DecidedBy))
	}
	if !out.DecidedAt.IsZero() {
		parts = append(parts, "at "+out.DecidedAt.UTC().Format(time.RFC3339))
	}
	if out.Reason != "" {
		parts = append(parts, "reason: "+q(out.Reason))
	}
	if out.Message != "" {
		parts = append(parts, "message for the model: "+q(out.Message))
	}
	return strings.Join(parts, ", ")
}

func orPlain(q func(string) string) func(string) string {
	if q == nil {
		return func(s string) string { return s }
	}
	return q
}

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
