package oncekey

import (
	"context"
	"fmt"
	"time"
)

// Policy defaults. A zero field in Policy means the default.
const (
	DefaultRetention      = 7 * 24 * time.Hour
	DefaultTombstone      = 30 * 24 * time.Hour
	DefaultLease          = 30 * time.Second
	DefaultWaitInFlight   = 10 * time.Second
	DefaultMaxResultBytes = 1 << 20
)

// Policy declares how one tool (activity type) is protected. Register it with Registry.Set.
// Fields are alphabetical after Effect; a zero value means the documented default.
type Policy struct {
	// Effect is the tool's effect class. Required.
	Effect Effect

	// Additive says an Effectful or Idempotent tool only adds (a ticket, a message, a charge) and
	// never deletes or overwrites: its tool definition's MCP annotations say destructiveHint
	// false. Defaults to false: destructiveHint true, MCP's default. It changes nothing else.
	Additive bool

	// Approval, if set, makes a person approve the call before its effect: the workflow waits
	// durably for a decision on the operation key before the activity is scheduled (see
	// ApprovalPolicy). Denied or timed out, the call fails as rejected (ApprovalRequiredError),
	// non-retryable, and nothing runs. Only for Effectful and Idempotent tools; the worker's
	// Store must be an ApprovalStore.
	Approval *ApprovalPolicy

	// Authorize, if set, runs before an effect AND before a replay: a stored result is no way
	// around a revoked permission. A non-nil error rejects the call (label rejected, nothing run,
	// nothing stored). A panic in it (or in a Key function, or in an argument's MarshalJSON)
	// fails the call once with a non-retryable oncekey.Config error; nothing runs or is claimed.
	Authorize func(ctx context.Context, op Operation) error

	// Description says what the tool does, for a model: the start of its tool definition's
	// description (Registry.Definitions), which adds one sentence about repeats from Effect.
	Description string

	// Exclude names argument fields (dotted JSON paths into the activity's input) left out of the
	// fingerprint: request IDs, trace headers, timestamps the model regenerates. Checked against
	// the input type by Registry.Set.
	Exclude []string

	// Key derives the operation key. Defaults to StepKey().
	Key KeyStrategy

	// Lease is how long a claim is held without renewal, judged on the store's clock; the
	// interceptor renews it every Lease/3 while the body runs. Defaults to 30s.
	Lease time.Duration

	// MaxResultBytes is the largest encoded result stored; a larger one fails with
	// ResultTooLargeError (never truncated). Defaults to 1 MiB.
	MaxResultBytes int

	// Reconcile, if set, is run by the reconciliation workflow before it waits for a person: it
	// looks the operation up downstream (by operation key) and says what happened.
	Reconcile func(ctx context.Context, req ReconcileRequest) (Receipt, error)

	// RememberFailures stores definite failures (Failed, and non-retryable NotApplied errors) as
	// a failed record, so a repeat of the operation gets the same failure, flagged as a replay,
	// without running the body: for failures a repeat cannot change (a closed account, a refused
	// card). Defaults to false: the claim is given back and a repeat runs the tool again, which is
	// safe since the tool said nothing landed. Either way the failing call itself fails, not
	// retried (Failed is non-retryable). A failure decided by reconciliation is always stored.
	RememberFailures bool

	// RequireStepID makes scheduling this tool without WithStepID an error at schedule time.
	RequireStepID bool

	// Retention is how long a record (and its result) is kept, counted from when it settles
	// (applied, failed, released or resolved); a pending or unknown record is kept until it
	// settles, however old. Size it longer than the longest retry and late-delivery window.
	// Defaults to 7 days. Registry.Set refuses
	// one shorter than MinRetention(Lease) with a *PolicyError.
	Retention time.Duration

	// Tombstone is how long after retention a digest-only tombstone refuses late duplicates with
	// ExpiredOperationError. Defaults to 30 days.
	Tombstone time.Duration

	// Verify, if set, checks a result before it is stored as applied. A non-nil error (or a
	// panic) means the effect may have landed wrongly: for an Effectful tool the outcome is
	// unknown and reconciliation decides; for an Idempotent tool the claim is given back and the
	// call fails with a retryable oncekey.Unsettled error, so Temporal's retry runs it again.
	Verify func(ctx context.Context, op Operation, result any) error

	// Version is the tool contract version; it is part of the fingerprint. Change it when the
	// meaning of an argument or a default changes.
	Version string

	// WaitInFlight is how long a call waits for another live attempt of the same operation before
	// failing with InFlightError (retryable, label in_flight). Defaults to 10s; negative means do
	// not wait.
	WaitInFlight time.Duration
}

// withDefaults returns p with zero fields set to their defaults.
func (p Policy) withDefaults() Policy {
	if p.Key == nil {
		p.Key = StepKey()
	}
	if p.Lease <= 0 {
		p.Lease = DefaultLease
	}
	if p.MaxResultBytes <= 0 {
		p.MaxResultBytes = DefaultMaxResultBytes
	}
	if p.Retention <= 0 {
		p.Retention = DefaultRetention
	}
	if p.Tombstone <= 0 {
		p.Tombstone = DefaultTombstone
	}
	if p.WaitInFlight == 0 {
		p.WaitInFlight = DefaultWaitInFlight
	} else if p.WaitInFlight < 0 {
		p.WaitInFlight = 0
	}
	return p
}

func (p Policy) validate(tool string) error {
	if p.Effect < ReadOnly || p.Effect > Transactional {
		return &PolicyError{Tool: tool, Field: "Effect", Reason: "must be ReadOnly, Idempotent, Effectful or Transactional"}
	}
	if p.Lease < 0 || p.Retention < 0 || p.Tombstone < 0 || p.MaxResultBytes < 0 {
		return &PolicyError{Tool: tool, Field: "Lease/Retention/Tombstone/MaxResultBytes", Reason: "must not be negative"}
	}
	if p.Lease > 0 && p.Lease < 100*time.Millisecond {
		return &PolicyError{Tool: tool, Field: "Lease", Reason: fmt.Sprintf("%s is shorter than 100ms", p.Lease)}
	}
	if p.Approval != nil {
		if !p.Effect.Claimed() {
			return &PolicyError{Tool: tool, Field: "Approval", Reason: "a ReadOnly tool claims nothing, so nothing can wait for its approval: make it Idempotent or Effectful, or drop Approval"}
		}
		if p.Approval.Timeout < 0 {
			return &PolicyError{Tool: tool, Field: "Approval.Timeout", Reason: "must not be negative (0 means DefaultApprovalTimeout, 24h)"}
		}
		if e := p.Approval.Escalation; e != nil && (e.Timeout <= 0 || blank(e.To)) {
			return &PolicyError{Tool: tool, Field: "Approval.Escalation", Reason: "needs To (who the request is escalated to) and a positive Timeout (how much longer it waits)"}
		}
	}
	d := p.withDefaults()
	if min := MinRetention(d.Lease); d.Effect.Claimed() && d.Retention < min {
		return &PolicyError{Tool: tool, Field: "Retention", Reason: fmt.Sprintf(
			"%s is shorter than the lease (%s) plus its renewal interval (%s): a live claim could outlive its record; give a Retention of at least %s (or a shorter Lease)",
			d.Retention, d.Lease, d.Lease/3, min)}
	}
	return nil
}

// MinRetention is the shortest Retention Registry.Set accepts with a Lease of lease (after
// defaults): the lease plus its renewal interval (lease/3), the longest a claim stays live after
// its last renewal was due. With a shorter Retention a record could reach the end of its
// retention while a live claim still holds it, and a late write of that claim would find a
// tombstone.
func MinRetention(lease time.Duration) time.Duration { return lease + lease/3 }

// ReconcileRequest is what a Policy.Reconcile hook gets: the identity of the operation, never its
// arguments (arguments are not stored).
type ReconcileRequest struct {
	Tenant       string
	OperationKey string
	Tool         string
	WorkflowID   string
	StepID       string
}

// ReceiptOutcome is what a downstream receipt lookup found.
type ReceiptOutcome int

const (
	// ReceiptNotFound: the lookup cannot tell; a person decides.
	ReceiptNotFound ReceiptOutcome = iota
	// ReceiptApplied: the downstream has the effect; Receipt.Result is its result.
	ReceiptApplied
	// ReceiptNotApplied: the downstream proves the effect did not land; the tool may run again.
	ReceiptNotApplied
	// ReceiptFailed: the downstream proves a definite failure.
	ReceiptFailed
)

// Receipt is the answer of a Policy.Reconcile hook.
type Receipt struct {
	Outcome         ReceiptOutcome
	EffectReference string
	// Result is the activity result to hand back when Outcome is ReceiptApplied; it must encode
	// to the activity's declared result type.
	Result any
	Note   string
}
