package oncekey

import (
	"context"
	"encoding/json"
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
	// non-retryable, and nothing runs. For the claimed classes (Effectful, Idempotent and
	// Transactional; not ReadOnly, nor KeyOnly); the worker's Store must be an ApprovalStore.
	Approval *ApprovalPolicy

	// Authorize, if set, runs before an effect AND before a replay: a stored result is no way
	// around a revoked permission. A non-nil error rejects the call (label rejected, nothing run,
	// nothing stored). A panic in it (or in a Key function, or in an argument's MarshalJSON)
	// fails the call once with a non-retryable oncekey.Config error; nothing runs or is claimed.
	Authorize func(ctx context.Context, op Operation) error

	// Description says what the tool does, for a model: the start of its tool definition's
	// description (Registry.Definitions), which adds one sentence about repeats from Effect.
	Description string

	// DisableHTTPProof stops an Effectful tool's failures from being classified by what
	// IdempotencyKeyTransport proved about the requests its body sent in the attempt. Defaults to
	// false: when the body returns an error (not marked NotApplied or Failed) and every request
	// of a method that is not safe it sent through the transport never left, or was refused with
	// 400, 401, 403, 404 or 422 (not retryable) or 429 (retryable, after Retry-After), the call
	// ends as if the body had returned NotApplied of that error, instead of unknown. Set it for a
	// tool whose body has effects the transport does not see (a database write, another client)
	// before or beside its requests. A Route's Fallback (the policy of a tool nobody classified)
	// never uses the proof, whatever this field says. Other effect classes give their claim back
	// on any error and ignore it.
	DisableHTTPProof bool

	// Exclude names argument fields (dotted JSON paths into the activity's input) left out of the
	// fingerprint: request IDs, trace headers, timestamps the model regenerates. Checked against
	// the input type by Registry.Set.
	Exclude []string

	// Key derives the operation key. Defaults to StepKey().
	Key KeyStrategy

	// KeyOnly makes an Idempotent tool keyed but not claimed: the worker derives the operation key
	// (oncekey.OperationKey(ctx) returns it in the body, for the downstream's idempotency key) and
	// runs Authorize, but claims nothing, stores nothing and replays nothing; Temporal's retries
	// are unchanged. For a tool whose downstream deduplicates on the key by itself. Only for
	// Idempotent tools, and not with Approval, OnHit, Previous, RememberFailures or Verify
	// (Registry.Set refuses those with a *PolicyError). Defaults to false.
	KeyOnly bool

	// Lease is how long a claim is held without renewal, judged on the store's clock; the
	// interceptor renews it every Lease/3 while the body runs. Defaults to 30s.
	Lease time.Duration

	// MaxResultBytes is the largest encoded result stored; a larger one fails with
	// ResultTooLargeError (never truncated). Defaults to 1 MiB.
	MaxResultBytes int

	// OnHit says what a call does when its claim finds its operation's record applied or failed
	// (a repeat of a settled operation). Defaults to OnHitReplay: the stored result or the
	// remembered failure is given again without running the tool.
	OnHit OnHit

	// Previous lists older versions of the tool's contract this policy still answers for, newest
	// first: before it claims, a call looks for a record of each (its key and fingerprint as that
	// version derived them) and, when one exists, is that older operation (a replay of an applied
	// record, a wait for a pending one; the key passed downstream is the older one). Each costs a
	// store read per call until the records of that version are past retention; then drop it. See
	// "Changing a tool safely" in docs/policies-and-keys.md. Defaults to none: a record made under
	// another Version is refused as a fingerprint mismatch.
	Previous []PreviousVersion

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

// OnHit is what a call does when its claim finds its operation's record settled (Policy.OnHit).
type OnHit int

const (
	// OnHitReplay gives the stored result (or the remembered failure) again without running the
	// tool: the default.
	OnHitReplay OnHit = iota
	// OnHitFailFast refuses a repeat: a call that finds its operation applied or failed fails with
	// a non-retryable oncekey.RepeatRefused error (*RepeatRefusedError), nothing runs, nothing is
	// replayed and the record is untouched. For tools where any repeat is a bug worth stopping
	// on. The call's own follow-ups are not repeats: a Temporal retry of the same activity
	// (attempt > 1) and a re-run the workflow side schedules (after a proven not-applied outcome
	// or a reconciliation) replay as usual. It is a bug detector, not a permission: whoever can
	// write to the namespace can mark a call as a re-run, which then gets the stored result.
	OnHitFailFast
)

// String returns "replay" or "fail_fast".
func (h OnHit) String() string {
	switch h {
	case OnHitReplay:
		return "replay"
	case OnHitFailFast:
		return "fail_fast"
	}
	return fmt.Sprintf("OnHit(%d)", int(h))
}

// PreviousVersion is an older version of a tool's contract that a policy still answers for
// (Policy.Previous).
type PreviousVersion struct {
	// Args maps a call's arguments document (canonical JSON, as this version's input type gives
	// it; the part at Route.Args for a routed tool) to the document the older version's input type
	// gave for the same call, e.g. a field renamed back to its older JSON name. The key and
	// fingerprint of the older version are derived from what it returns, with this policy's
	// Exclude and Key. It must be deterministic and must not block. nil means the document is
	// unchanged (only Version changed). An error from it skips this version for the call.
	Args func(args json.RawMessage) (json.RawMessage, error)
	// Version is the older Policy.Version ("" for a tool that had none).
	Version string
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
		if p.Approval.Signers < 0 {
			return &PolicyError{Tool: tool, Field: "Approval.Signers", Reason: "must not be negative (0 or 1 means one decision, 2 four eyes)"}
		}
		if p.Approval.Timeout < 0 {
			return &PolicyError{Tool: tool, Field: "Approval.Timeout", Reason: "must not be negative (0 means DefaultApprovalTimeout, 24h)"}
		}
		if e := p.Approval.Escalation; e != nil && (e.Timeout <= 0 || blank(e.To)) {
			return &PolicyError{Tool: tool, Field: "Approval.Escalation", Reason: "needs To (who the request is escalated to) and a positive Timeout (how much longer it waits)"}
		}
	}
	if p.OnHit < OnHitReplay || p.OnHit > OnHitFailFast {
		return &PolicyError{Tool: tool, Field: "OnHit", Reason: "must be OnHitReplay or OnHitFailFast"}
	}
	if p.OnHit != OnHitReplay && !p.Effect.Claimed() {
		return &PolicyError{Tool: tool, Field: "OnHit", Reason: "a ReadOnly tool claims nothing, so no repeat of it is found: drop OnHit"}
	}
	if p.KeyOnly {
		switch {
		case p.Effect != Idempotent:
			return &PolicyError{Tool: tool, Field: "KeyOnly", Reason: fmt.Sprintf(
				"is for Idempotent tools whose downstream deduplicates on the key; a %s tool needs its claim", p.Effect)}
		case p.Approval != nil, p.OnHit != OnHitReplay, len(p.Previous) > 0, p.RememberFailures, p.Verify != nil:
			return &PolicyError{Tool: tool, Field: "KeyOnly", Reason: "a key-only tool has no record, so Approval, OnHit, Previous, " +
				"RememberFailures and Verify cannot apply: drop them, or drop KeyOnly"}
		}
	}
	for i, v := range p.Previous {
		if v.Version == p.Version && v.Args == nil {
			return &PolicyError{Tool: tool, Field: fmt.Sprintf("Previous[%d]", i), Reason: fmt.Sprintf(
				"version %q is the current Version and maps nothing: give it an Args mapping or drop it", v.Version)}
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
