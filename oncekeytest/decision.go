package oncekeytest

import (
	"context"
	"encoding/json"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// Decision is what the kit, acting as the person on call or the receipt lookup, does with an
// unknown outcome (Applied, NotApplied, Wait) or an approval request (Approve, Deny, Wait).
type Decision struct {
	kind    decisionKind
	result  json.RawMessage
	ref     string
	message string
}

type decisionKind int

const (
	decideWait decisionKind = iota
	decideApplied
	decideNotApplied
	decideApprove
	decideDeny
)

// Applied settles an unknown outcome as applied: the effect happened, result (JSON) is the
// tool's result a repeat replays, reference its effect reference ("" for none).
func Applied(result json.RawMessage, reference string) Decision {
	return Decision{kind: decideApplied, result: result, ref: reference}
}

// NotApplied settles an unknown outcome as not applied: nothing happened, and the workflow runs
// the call again.
func NotApplied() Decision { return Decision{kind: decideNotApplied} }

// Approve approves an approval request as it was asked.
func Approve() Decision { return Decision{kind: decideApprove} }

// Deny denies an approval request; message is what the model reads (at most
// oncekeystore.MaxModelMessageBytes of plain text, "" for none).
func Deny(message string) Decision { return Decision{kind: decideDeny, message: message} }

// Wait decides nothing: the reconciliation waits until its EscalationTimeout and the approval
// until its deadline, as when nobody answers.
func Wait() Decision { return Decision{kind: decideWait} }

// String names the decision: "applied", "not applied", "approve", "deny" or "wait".
func (d Decision) String() string {
	switch d.kind {
	case decideApplied:
		return "applied"
	case decideNotApplied:
		return "not applied"
	case decideApprove:
		return "approve"
	case decideDeny:
		return "deny"
	}
	return "wait"
}

func (d Decision) forUnknown() bool {
	return d.kind == decideWait || d.kind == decideApplied || d.kind == decideNotApplied
}

func (d Decision) forApproval() bool {
	return d.kind == decideWait || d.kind == decideApprove || d.kind == decideDeny
}

// Unknown is an operation whose outcome is unknown, as Config.Settle is given it.
type Unknown struct {
	// Record is the operation's record, status unknown.
	Record oncekeystore.Record
	// Fault is the fault the kit injected into the attempt that ended unknown (FailBeforeBody or
	// CrashMidBody), NoFault when the kit did not cause it: the tool's body returned an error, or
	// its attempt timed out on its own.
	Fault Fault
	// Seen is, for an unknown the kit caused, what it saw happen: NotApplied for FailBeforeBody
	// (the body never ran), Applied with the body's result for CrashMidBody (NotApplied when the
	// body returned an error). Wait otherwise.
	Seen Decision
}

// SettleSeen is Config.Settle's default: an unknown the kit caused is settled as the kit saw it
// (Unknown.Seen); any other fails the test, naming the tool, and is settled not applied so the
// run can end. Give Config.Settle your own receipt lookup when your tools can end unknown on
// their own (an Effectful tool whose body returns an error).
func SettleSeen(ctx context.Context, u Unknown) Decision {
	return u.Seen
}

// ApproveAll is Config.Approve's default: every approval request is approved as asked.
func ApproveAll(ctx context.Context, a oncekeystore.Approval) Decision { return Approve() }

// resolution is the reconcile.Resolution that carries d for the record r.
func (d Decision) resolution(r oncekeystore.Record) reconcile.Resolution {
	res := reconcile.Resolution{Epoch: r.Epoch, Tenant: r.Tenant, ResolvedBy: "oncekeytest", Note: "settled by the test kit"}
	switch d.kind {
	case decideApplied:
		res.Outcome, res.Result, res.EffectReference = reconcile.Applied, d.result, d.ref
	default:
		res.Outcome = reconcile.NotApplied
	}
	return res
}

// decision is the reconcile.Decision that carries d for the approval a.
func (d Decision) decision(a oncekeystore.Approval) reconcile.Decision {
	out := reconcile.Decision{Decision: reconcile.Approve, Tenant: a.Tenant, Episode: a.Episode, DecidedBy: "oncekeytest"}
	if d.kind == decideDeny {
		out.Decision, out.Reason, out.Message = reconcile.Deny, "denied by the test kit", d.message
	}
	return out
}
