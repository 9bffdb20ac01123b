package oncekey

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oncekey/oncekey/internal/failure"
	"github.com/oncekey/oncekey/internal/shell"
	"github.com/oncekey/oncekey/oncekeystore"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrNoKey: an operation key could not be derived (an empty part, a missing field). The body
	// did not run; nothing was claimed.
	ErrNoKey = errors.New("oncekey: no operation key")

	// ErrNotClaimed: SetEffectReference was called outside the body of a claimed tool (a
	// ReadOnly tool or one without a policy, workflow code, a context not derived from the
	// activity's) or after the body returned. Nothing was recorded.
	ErrNotClaimed = errors.New("oncekey: not inside the body of a claimed tool")
)

// Application error types carried across the activity/workflow boundary as
// temporal.ApplicationError types. Workflows and Label recognise oncekey failures by them. Their
// values ("oncekey.IndeterminateOutcome", "oncekey.FingerprintMismatch", …) are defined once, in
// oncekey's table of failures, and pinned by its tests: they are stored and sent, and changing one
// is a breaking change.
const (
	ErrTypeIndeterminate       = failure.TypeIndeterminate       // "oncekey.IndeterminateOutcome"
	ErrTypeFingerprintMismatch = failure.TypeFingerprintMismatch // "oncekey.FingerprintMismatch"
	ErrTypeInFlight            = failure.TypeInFlight            // "oncekey.InFlight"
	ErrTypeExpired             = failure.TypeExpired             // "oncekey.ExpiredOperation"
	ErrTypeStoreUnavailable    = failure.TypeStoreUnavailable    // "oncekey.StoreUnavailable"
	ErrTypeNotApplied          = failure.TypeNotApplied          // "oncekey.NotApplied"
	ErrTypeFailed              = failure.TypeFailed              // "oncekey.Failed"
	ErrTypeUnauthorized        = failure.TypeUnauthorized        // "oncekey.Unauthorized"
	ErrTypeResultTooLarge      = failure.TypeResultTooLarge      // "oncekey.ResultTooLarge"
	ErrTypeConfig              = failure.TypeConfig              // "oncekey.Config"
	// ErrTypeApproval: the call needs an approval it does not have (ApprovalRequiredError).
	ErrTypeApproval = failure.TypeApproval // "oncekey.ApprovalRequired"
	// ErrTypeArgsMismatch: the HeaderArgs document the workflow sent is not the document of the
	// input the tool's body receives (ArgsMismatchError); nothing was claimed or run.
	ErrTypeArgsMismatch = failure.TypeArgsMismatch // "oncekey.ArgsMismatch"
	// ErrTypeApprovalPending: the worker asked a person to approve the call (it wrote the request
	// to the store) and did not run it; the workflow side waits for the decision and schedules
	// the call again once approved (ApprovalRequiredError with Status ApprovalPending).
	ErrTypeApprovalPending = failure.TypeApprovalPending // "oncekey.ApprovalPending"
	// ErrTypeUnsettled (retryable): an Idempotent tool's body returned, but its outcome could not
	// be settled (Policy.Verify rejected the result or panicked, or the result did not encode).
	// The claim was given back, and Temporal's retry runs the tool again, which lands the same
	// state. Effectful tools never fail with it: their unsettled outcomes are unknown.
	ErrTypeUnsettled = failure.TypeUnsettled // "oncekey.Unsettled"
	// ErrTypeLostClaim (retryable): an Idempotent tool's attempt lost its claim while it ran
	// (its lease was taken over, or the record was resolved): the store refused its fenced write
	// (or lease renewal) because the record has a newer epoch. The store answered; the attempt
	// wrote nothing, and another attempt owns the operation now, so a retry observes that one
	// (waits for it, or replays its result). An Effectful tool's attempt in that case fails with
	// ErrTypeIndeterminate instead: its effect may have landed.
	ErrTypeLostClaim = failure.TypeLostClaim // "oncekey.LostClaim"
	// ErrTypeTxMisuse (non-retryable): a Transactional tool's body misused its transaction
	// (TxMisuseError); it was rolled back and the claim given back.
	ErrTypeTxMisuse = failure.TypeTxMisuse // "oncekey.TxMisuse"
	// ErrTypeRepeatRefused (non-retryable): a repeat of a settled operation of a tool whose policy
	// says OnHitFailFast (RepeatRefusedError). Nothing ran or was replayed; the record is
	// untouched.
	ErrTypeRepeatRefused = failure.TypeRepeatRefused // "oncekey.RepeatRefused"
	// ErrTypeAsyncCompletion (non-retryable): a tool that cannot hand its result off (a
	// Transactional one; see AsyncCompletionError) returned activity.ErrResultPending.
	ErrTypeAsyncCompletion = failure.TypeAsyncCompletion // "oncekey.AsyncCompletion"
	// ErrTypeSignatureRefused (non-retryable): a worker with a trust list
	// (okworker.Options.TrustList) refused a person's decision or resolution because of its
	// signature: unsigned, a signature that does not verify, a key the list does not trust for the
	// decision's tenant, tool and kind, or a statement made for another request; nothing was
	// recorded. Its message says what to sign it with. Before this type such refusals were
	// oncekey.InvalidResolution, which still refuses everything else oncekey's activities refuse,
	// and which a workflow of an earlier worker, not asking for this type, still gets. (A call whose
	// stored approval no longer has enough trusted signers is refused at the gate as
	// ErrTypeApproval instead: that is a call, not a decision.)
	ErrTypeSignatureRefused = failure.TypeSignatureRefused // "oncekey.SignatureRefused"
	// ErrTypeUnboundHeaders (non-retryable): the worker has okworker.Options.HeaderKeys, and the
	// call's tenant, step ID or first activity ID headers are not bound by a key it lists
	// (UnboundHeadersError); nothing was claimed or run.
	ErrTypeUnboundHeaders = failure.TypeUnboundHeaders // "oncekey.UnboundHeaders"
)

// IndeterminateOutcomeError: the effect may or may not have landed (an Effectful body failed,
// panicked or timed out after it may have reached the downstream, or its result could not be
// recorded). The record is unknown; reconciliation decides. Never retried blindly.
//
// Its message ends with the `oncekey resolve` command that settles the operation, with
// --namespace when Namespace is set and not "default", --tenant when Tenant differs from the
// namespace (the CLI's default tenant) and --schema when Schema is set; with --direct when
// Unowned.
type IndeterminateOutcomeError struct {
	// Namespace is the Temporal namespace of the workflow that made the call; "" when unknown.
	Namespace    string
	Tenant       string
	OperationKey string
	Tool         string
	// Schema is the Postgres schema of the store's table when the store names one (pgstore's
	// Options.Schema); "" when the store looks in its connection's search_path.
	Schema string
	// Unowned: no reconciliation workflow waits for the key any more (it ended without a
	// decision), so the command given writes the decision to the store (`resolve --direct`).
	Unowned bool
	// Epoch is the record's epoch the outcome is unknown at, which a decision must name; 0 when
	// not known here (the command then says `--epoch <epoch>`, which `oncekey show` prints).
	Epoch int64
	Cause error
}

func (e *IndeterminateOutcomeError) Error() string {
	how := "resolve it with"
	if e.Unowned {
		how = "write the decision to the store with"
	}
	return fmt.Sprintf("oncekey: outcome of %s (key %s) is unknown: %v; once you know what the downstream did, %s %s",
		e.Tool, e.OperationKey, e.Cause, how, resolveCommand(e.Namespace, e.Tenant, e.Schema, e.OperationKey, e.Epoch, e.Unowned))
}
func (e *IndeterminateOutcomeError) Unwrap() error { return e.Cause }

// resolveCommand returns the `oncekey resolve` commands that settle the operation key of tenant
// in namespace, for messages: "`oncekey resolve KEY … --applied --ref <receipt> --result
// '<result JSON>'` (it landed), or the same with `--not-applied` (it did not) or `--failed`". It
// adds --namespace when namespace is neither "" nor "default", --tenant when tenant is set and
// differs from the namespace, which is the CLI's default tenant, --schema when schema is set, and
// --direct when direct; --epoch is the epoch, or the placeholder <epoch> when it is 0.
func resolveCommand(namespace, tenant, schema, key string, epoch int64, direct bool) string {
	cmd := shell.Resolve(key)
	if direct {
		cmd.Switch("--direct")
	}
	cmd.FlagIf("--schema", schema)
	ns := namespace
	if ns == "" {
		ns = "default"
	}
	if ns != "default" {
		cmd.Flag("--namespace", ns)
	}
	if tenant != "" && tenant != ns {
		cmd.Flag("--tenant", tenant)
	}
	if epoch > 0 {
		cmd.Int("--epoch", epoch)
	} else {
		cmd.Placeholder("--epoch", "<epoch>")
	}
	cmd.Switch("--applied").Placeholder("--ref", "<receipt>").Placeholder("--result", "'<result JSON>'")
	return "`" + cmd.String() + "` (it landed), or the same with `--not-applied` (it did not) or `--failed`"
}

// FingerprintMismatchError: the operation key was used before with different arguments (or tool
// or version, or under another fingerprint secret). Nothing ran, nothing was replayed, the record
// is untouched. Its message prints no digest digits (a fingerprint of guessable arguments reveals
// them); Stored and Got hold the fingerprints for Go code.
type FingerprintMismatchError struct {
	OperationKey string
	Tool         string
	Stored, Got  string
}

func (e *FingerprintMismatchError) Error() string {
	if keyed(e.Stored) != keyed(e.Got) {
		made := map[bool]string{true: "with a fingerprint secret", false: "without a fingerprint secret"}
		return fmt.Sprintf("oncekey: key %s was used for %s, and its record's fingerprint was made %s while this worker's is made %s; nothing ran. "+
			"Every worker must have the same okworker.Options.FingerprintSecret (changing it turns repeats of earlier records into mismatches)",
			e.OperationKey, e.Tool, made[keyed(e.Stored)], made[keyed(e.Got)])
	}
	return fmt.Sprintf("oncekey: key %s was used for %s with different arguments; nothing ran. "+
		"For a new operation use a new step ID; if the difference is noise the model regenerates (a trace ID, a timestamp), "+
		"exclude that field with Policy.Exclude; if the tool's contract changed, bump Policy.Version and list the old "+
		"version in Policy.Previous, so that records made before the change are still answered", e.OperationKey, e.Tool)
}

func keyed(fp string) bool { return strings.HasPrefix(fp, KeyedFingerprintPrefix) }

// RepeatRefusedError: a call of a tool whose policy says OnHitFailFast found its operation
// already settled (Status applied or failed): the call is a repeat, which for this tool is a bug.
// Nothing ran, nothing was replayed, the record is untouched. It crosses Temporal as a
// non-retryable application error of type ErrTypeRepeatRefused.
type RepeatRefusedError struct {
	OperationKey string
	Tool         string
	Status       oncekeystore.Status
}

func (e *RepeatRefusedError) Error() string {
	return fmt.Sprintf("oncekey: %s (key %s) is a repeat of an operation that is already %s, and its policy refuses repeats (OnHitFailFast); "+
		"nothing ran and the record is untouched. Find what scheduled the call twice; `%s` shows the first",
		e.Tool, e.OperationKey, e.Status, shell.Show(e.OperationKey))
}

// InFlightError: another attempt of the same operation holds a live claim. Retry later with the
// same key (after RetryAfter); nothing ran.
type InFlightError struct {
	OperationKey string
	Tool         string
	// RetryAfter is how long to wait before asking again: what the tool's body usually takes on
	// the worker that answered (a running mean of its applied calls), else a third of the
	// policy's Lease; never past the time the holder's lease has left; at least 1 s and at most
	// the Lease or 1 minute, whichever is less. It is the error's NextRetryDelay and the model's
	// retry_after_seconds.
	RetryAfter time.Duration
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("oncekey: %s (key %s) is in flight in another attempt; retry after %s", e.Tool, e.OperationKey, e.RetryAfter)
}

// ExpiredOperationError: the key is past its retention window; only a tombstone remains. A new
// effect needs a new operation key: it is never re-run silently.
type ExpiredOperationError struct {
	OperationKey string
	Tool         string
	ExpiredAt    time.Time
}

func (e *ExpiredOperationError) Error() string {
	return fmt.Sprintf("oncekey: key %s for %s expired at %s; a new effect needs a new step ID", e.OperationKey, e.Tool, e.ExpiredAt.UTC().Format(time.RFC3339))
}

// AsyncCompletionError: the body of a tool that cannot hand its result off returned
// activity.ErrResultPending, handing its result to whoever completes the activity later
// (client.CompleteActivity): a Transactional tool (its writes commit with the record and cannot
// wait outside the transaction), or an Effectful one on a store that is not an
// oncekeystore.HandOffStore, in a standalone activity or in a Nexus handler. The hand-off is
// refused, the activity fails with ErrTypeAsyncCompletion (non-retryable), and a later
// CompleteActivity finds no activity to complete. An Effectful tool's record keeps the refusal as
// its definite failure (the body ran up to the hand-off, so a repeat gives the refusal again
// rather than run it twice); a Transactional tool's transaction is rolled back and its claim
// given back. The message says what to register instead: the waiting part as Idempotent or
// ReadOnly, with the effect that must happen once in a tool that returns. (An Effectful tool on
// a HandOffStore may hand off: docs/policies-and-keys.md, "Asynchronous completion".)
type AsyncCompletionError struct {
	OperationKey string
	Tool         string
	Effect       Effect
}

func (e *AsyncCompletionError) Error() string {
	return fmt.Sprintf("oncekey: %s (key %s) is %s and returned activity.ErrResultPending: a result completed from outside the worker "+
		"(client.CompleteActivity) cannot be recorded, so the hand-off was refused and nothing will complete it. Register the part that "+
		"waits for the completion as Idempotent or ReadOnly, and keep the effect that must happen once in an Effectful tool that returns its result",
		e.Tool, e.OperationKey, e.Effect)
}

// InvalidEffectReferenceError: SetEffectReference was given a reference longer than
// MaxEffectReferenceBytes, not valid UTF-8, or containing a NUL byte. Nothing was recorded.
type InvalidEffectReferenceError struct {
	Len    int // length of the refused reference, in bytes
	Reason string
}

func (e *InvalidEffectReferenceError) Error() string {
	return fmt.Sprintf("oncekey: effect reference %s", e.Reason)
}

// PolicyError: a policy or its registration is invalid. Field names the bad field.
type PolicyError struct {
	Tool   string
	Field  string
	Reason string
}

func (e *PolicyError) Error() string {
	if e.Tool == "" {
		return fmt.Sprintf("oncekey: policy %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("oncekey: policy for %s: %s: %s", e.Tool, e.Field, e.Reason)
}

type notAppliedError struct{ err error }

func (e *notAppliedError) Error() string { return e.err.Error() }
func (e *notAppliedError) Unwrap() error { return e.err }

type failedError struct{ err error }

func (e *failedError) Error() string { return e.err.Error() }
func (e *failedError) Unwrap() error { return e.err }

// NotApplied wraps err to assert that no effect happened: the downstream refused before
// committing. The claim is released and the operation may run again. Returns nil for nil.
func NotApplied(err error) error {
	if err == nil {
		return nil
	}
	return &notAppliedError{err: err}
}

// Failed wraps err to assert a definite failure: the effect did not and will not land. The record
// becomes failed and the failure is not retried. Returns nil for nil.
func Failed(err error) error {
	if err == nil {
		return nil
	}
	return &failedError{err: err}
}

// IsNotApplied reports whether err (or an error it wraps) was marked with NotApplied.
func IsNotApplied(err error) bool {
	var e *notAppliedError
	return errors.As(err, &e)
}

// IsFailed reports whether err (or an error it wraps) was marked with Failed.
func IsFailed(err error) bool {
	var e *failedError
	return errors.As(err, &e)
}
