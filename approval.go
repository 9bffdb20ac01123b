package oncekey

import (
	"fmt"
	"time"

	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
)

// DefaultApprovalTimeout is how long an approval request waits for a decision when
// ApprovalPolicy.Timeout is zero.
const DefaultApprovalTimeout = 24 * time.Hour

// ApprovalPolicy makes a person approve a call before its effect (Policy.Approval). The workflow
// waits durably for the decision on the call's operation key before it schedules the activity,
// and the worker checks the stored approval again right before the effect, beside
// Policy.Authorize. One approval per operation key: a repeat or a re-proposal of the call while
// the approval is pending waits on the same request, a repeat of an approved call does not ask
// again, a repeat of a denied call is denied again within Policy.Retention, and a request that
// timed out is asked anew by the next call.
//
// Required and Summary run in workflow code (and Required again on the worker): they must be
// deterministic functions of the Operation, with no I/O, no clock and no randomness. Read the
// arguments from Operation.ArgsJSON (the canonical JSON both sides see) rather than
// Operation.Args, whose Go values differ between the workflow and the worker, and leave
// ActivityID and FirstActivityID alone (only the worker has them). A call Required lets the
// workflow schedule without asking and the worker then finds needing approval fails closed:
// nothing runs, and the call fails with an *ApprovalRequiredError.
type ApprovalPolicy struct {
	// Required reports whether op needs approval. Nil means every call of the tool does.
	Required func(op Operation) bool

	// Summary says what the approver sees ("refund 120.00 EUR on order 42"): arguments are never
	// stored, so the summary is the one place that decides what an approver learns of them. At
	// most MaxApprovalSummaryBytes are kept. Nil means "<tool>, step <step> of workflow <id>"
	// ("<tool> in workflow <id>" for a call without a step ID).
	Summary func(op Operation) string

	// Timeout is how long a request waits for a decision, from when it was first asked, on the
	// store's clock. When it passes, the request is timed out, which denies the waiting call; the
	// next call of the operation asks again. Defaults to DefaultApprovalTimeout (24h).
	Timeout time.Duration

	// Escalation, if set, escalates a request nobody decided within Timeout instead of timing it
	// out then: it waits Escalation.Timeout more, for Escalation.To (see ApprovalEscalation). Nil:
	// the request is timed out (denied) at Timeout.
	Escalation *ApprovalEscalation

	// Signers is how many different people must approve a request before the call runs (2 for
	// "four eyes"): approvals signed by that many different keys of the worker's trust list
	// (okworker.Options.TrustList), made by as many different deciders (who decided: the same
	// key twice, or two keys naming the same decider, count once). Each approval before the last
	// is recorded with its signature as a partial approval (oncekeystore.Approval.Cosignatures)
	// and the request keeps waiting; the decision update answers it as recorded and waiting
	// ("1 of 2"). A denial, or a request for changes, by any trusted signer denies the request.
	// The worker re-verifies every stored signature, before the claim and under it, and runs the
	// call only while enough of them verify. Such a request cannot be approved with edited
	// arguments (the decision is refused: request changes instead) nor by a standing grant (a
	// grant covers nothing for it, and the call asks people). It needs signed decisions: a worker
	// without a trust list refuses to start with such a policy (okworker's *ConfigError, Field
	// TrustList), and a call that meets one all the same fails with ErrTypeConfig. Defaults to 0,
	// which like 1 means one decision; must not be negative.
	Signers int
}

// SignersNeedTrustListError: a policy asks for more than one signer (ApprovalPolicy.Signers) on
// a worker without a trust list, which could not tell its signers apart. The worker refuses to
// start (okworker's *ConfigError, Field TrustList, wrapping it); a call or a decision that meets
// it all the same fails with ErrTypeConfig, and nothing runs or is recorded.
type SignersNeedTrustListError struct {
	Tool    string
	Signers int
}

func (e *SignersNeedTrustListError) Error() string {
	return fmt.Sprintf("oncekey: the approval policy of %s asks for %d different signers (ApprovalPolicy.Signers), which needs signed decisions: "+
		"give every worker the trust list of the signers' keys (okworker.Options.TrustList, decisionsig.LoadTrustList), or drop Signers", e.Tool, e.Signers)
}

// RequiredSigners returns how many different trusted signers must approve a request of a: Signers,
// at least 1.
func (a *ApprovalPolicy) RequiredSigners() int { return max(a.Signers, 1) }

// ApprovalRequiredError: the call needs an approval it does not have (Policy.Approval): a
// person denied it, nobody decided in time, or the worker found no approved request for the
// operation key before the effect. Nothing ran. The interceptor fails the call with it as a
// non-retryable ErrTypeApproval error, labelled rejected.
type ApprovalRequiredError struct {
	Tenant, OperationKey, Tool string
	// Status is the approval's status (ApprovalDenied, ApprovalTimedOut, ApprovalPending), or ""
	// when there is no approval for the key.
	Status    oncekeystore.ApprovalStatus
	Episode   int64
	DecidedBy string
	Reason    string
	// EditedAs is, for status ApprovalReplaced, the operation key of the edit that ran instead.
	EditedAs string
}

func (e *ApprovalRequiredError) Error() string {
	switch e.Status {
	case oncekeystore.ApprovalReplaced:
		s := "oncekey: " + e.Tool + " was approved with edited arguments"
		if e.DecidedBy != "" {
			s += " by " + e.DecidedBy
		}
		return s + "; the call as proposed does not run: the edit runs as its own operation " + e.EditedAs +
			" (`" + shell.Show(e.EditedAs).Flag("--tenant", e.Tenant).String() + "`)"
	case oncekeystore.ApprovalDenied:
		s := "oncekey: " + e.Tool + " was denied approval"
		if e.DecidedBy != "" {
			s += " by " + e.DecidedBy
		}
		if e.Reason != "" {
			s += " (" + e.Reason + ")"
		}
		return s + "; nothing ran, and a repeat of the operation is denied again until its approval expires"
	case oncekeystore.ApprovalTimedOut:
		return "oncekey: nobody approved " + e.Tool + " in time; nothing ran: the next call of the operation asks again (`oncekey approvals` lists what waits)"
	case oncekeystore.ApprovalPending:
		return "oncekey: " + e.Tool + " is waiting for approval; nothing ran: decide with `oncekey approve` or `oncekey deny`"
	}
	return "oncekey: " + e.Tool + " needs an approval and none was given for its operation key; nothing ran. " +
		"The workflow scheduled the call without asking: either ApprovalPolicy.Required answered no in the workflow and yes on the worker " +
		"(make it read only what both see: ArgsJSON, Tenant, WorkflowID, StepID, Tool, not ActivityID), or the run called the tool " +
		"before its policy had Approval (it keeps its earlier behaviour): fix Required, or start a new run (or reset it to before the call), and it asks"
}
