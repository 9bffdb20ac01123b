package oncekey

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/oncekey/oncekey/internal/shell"
)

// ResultSealer seals the results oncekey keeps at rest (Record.Result) to the record they
// belong to, so that a result copied or moved to another row, tenant or operation key does not
// open there. A payload codec cannot do this: it encodes payloads without knowing which record
// will hold them. Install one with okworker.Options.ResultSealer (the plugin passes it to
// oncekey's activities) on every worker of the deployment; examples/encryption has one on
// AES-256-GCM whose additional data is the tenant and the operation key.
//
// Implementations must be safe for concurrent use and deterministic in what they accept: Open
// must refuse (return an error) whatever Seal did not produce for the same tenant and operation
// key, under a key it holds.
type ResultSealer interface {
	// Seal returns plaintext (a stored result: proto-marshalled Temporal payloads, already
	// encoded by the data converter and its codec) sealed for the record (tenant, operationKey).
	// An error leaves the result unstored: for an Effectful tool the outcome is then unknown.
	Seal(ctx context.Context, tenant, operationKey string, plaintext []byte) ([]byte, error)
	// Open returns the plaintext that Seal sealed for (tenant, operationKey), or an error when
	// sealed was sealed for another record, under a key the sealer does not hold, or altered.
	Open(ctx context.Context, tenant, operationKey string, sealed []byte) ([]byte, error)
}

// SealedResultPrefix starts every stored result that a ResultSealer sealed; the sealer's output
// follows it. It lets a worker without a sealer say what to configure instead of failing to
// decode, and a worker with one refuse a result written around it. It is part of the stored
// format: changing it is a breaking change (pinned by a test).
const SealedResultPrefix = "oksealed1:"

// Errors of a stored result that does not open. Test with errors.Is; they come wrapped in a
// *ResultSealError.
var (
	// ErrNoResultSealer: the stored result is sealed and the worker has no ResultSealer.
	ErrNoResultSealer = errors.New("oncekey: the stored result is sealed and this worker has no ResultSealer")
	// ErrResultNotSealed: the worker has a ResultSealer and the stored result is not sealed (it
	// was written around the sealer).
	ErrResultNotSealed = errors.New("oncekey: the stored result is not sealed")
)

// ResultSealError: a result could not be sealed for the store (Op "seal"), or a stored result
// could not be opened (Op "open"): it is sealed and the worker has no sealer (Err is
// ErrNoResultSealer), it is plain and the worker has a sealer (ErrResultNotSealed), or the
// sealer refused it (the sealer's error: sealed for another record or tenant, under another key,
// or altered). Nothing was replayed; the interceptor fails the call non-retryably with
// application error type ErrTypeConfig.
type ResultSealError struct {
	Op           string
	Tenant       string
	OperationKey string
	Err          error
}

func (e *ResultSealError) Error() string {
	rec := fmt.Sprintf("the stored result of key %s (tenant %s)", e.OperationKey, shell.Word(e.Tenant))
	switch {
	case e.Op == "seal":
		return fmt.Sprintf("oncekey: the result of key %s (tenant %s) could not be sealed: %v", e.OperationKey, shell.Word(e.Tenant), e.Err)
	case errors.Is(e.Err, ErrNoResultSealer):
		return "oncekey: " + rec + " is sealed (okworker.Options.ResultSealer) and this worker has no ResultSealer; " +
			"give every worker of the deployment the ResultSealer that sealed it, with its keys"
	case errors.Is(e.Err, ErrResultNotSealed):
		return "oncekey: " + rec + " is not sealed, and this worker's ResultSealer refuses plain results: it was written around the sealer " +
			"(a worker without okworker.Options.ResultSealer, a direct write to the store, or a record from before sealing was turned on); " +
			"give every worker the same ResultSealer, and resolve through the reconciliation workflow rather than `oncekey resolve --direct --result`"
	}
	return fmt.Sprintf("oncekey: %s does not open with this worker's ResultSealer (%v): it was sealed for another record or tenant "+
		"(moved or copied between rows), under a key this sealer does not hold, or altered; nothing was replayed", rec, e.Err)
}

func (e *ResultSealError) Unwrap() error { return e.Err }

// IsSealedResult reports whether stored starts with SealedResultPrefix.
func IsSealedResult(stored []byte) bool {
	return bytes.HasPrefix(stored, []byte(SealedResultPrefix))
}

// SealResult returns result as it is stored: sealed by s for (tenant, operationKey) behind
// SealedResultPrefix, or result itself when s is nil or result is empty (no result). A sealer's
// error is returned as a *ResultSealError with Op "seal".
func SealResult(ctx context.Context, s ResultSealer, tenant, operationKey string, result []byte) ([]byte, error) {
	if s == nil || len(result) == 0 {
		return result, nil
	}
	sealed, err := s.Seal(ctx, tenant, operationKey, result)
	if err != nil {
		return nil, &ResultSealError{Op: "seal", Tenant: tenant, OperationKey: operationKey, Err: err}
	}
	return append([]byte(SealedResultPrefix), sealed...), nil
}

// OpenResult returns the result stored for (tenant, operationKey) as SealResult wrote it: opened
// by s when it is sealed, itself when s is nil and it is plain, and nil for an empty one. A
// sealed result without s, a plain result with s, and a sealed one s refuses are a
// *ResultSealError with Op "open" (errors.Is ErrNoResultSealer, ErrResultNotSealed, or the
// sealer's error).
func OpenResult(ctx context.Context, s ResultSealer, tenant, operationKey string, stored []byte) ([]byte, error) {
	if len(stored) == 0 {
		return stored, nil
	}
	fail := func(err error) ([]byte, error) {
		return nil, &ResultSealError{Op: "open", Tenant: tenant, OperationKey: operationKey, Err: err}
	}
	sealed := IsSealedResult(stored)
	switch {
	case s == nil && sealed:
		return fail(ErrNoResultSealer)
	case s == nil:
		return stored, nil
	case !sealed:
		return fail(ErrResultNotSealed)
	}
	plain, err := s.Open(ctx, tenant, operationKey, stored[len(SealedResultPrefix):])
	if err != nil {
		return fail(err)
	}
	if len(plain) == 0 {
		return fail(errors.New("the sealer opened it to nothing"))
	}
	return plain, nil
}
