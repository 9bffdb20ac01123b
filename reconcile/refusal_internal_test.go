package reconcile

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey/decisionsig"
)

// The update's refusal of a decision for its signature (one detail, oncekey.SignatureRefused)
// is read as such: DecisionRefusedError.Signature and RefusedError.Signature, and errors.Is
// decisionsig.ErrRefused; any other refusal is neither.
func TestRefusalForTheSignature(t *testing.T) {
	t.Parallel()
	refusalOf := func(err error) *refusal {
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr))
		return refusalOf(appErr)
	}
	sig := refusalOf(temporal.NewNonRetryableApplicationError("refused: decision refused (unsigned)", ErrTypeDecisionRefused, nil, "oncekey.SignatureRefused"))
	require.Equal(t, refusal{reason: "refused: decision refused (unsigned)", signature: true}, *sig)
	other := refusalOf(temporal.NewNonRetryableApplicationError("another tenant", ErrTypeDecisionRefused, nil))
	require.Equal(t, refusal{reason: "another tenant"}, *other)
	odd := refusalOf(temporal.NewNonRetryableApplicationError("x", ErrTypeDecisionRefused, nil, 42))
	require.False(t, odd.signature, "a detail of another shape is no signature refusal")

	var err error = &DecisionRefusedError{Key: "ok1_a", Reason: sig.reason, Signature: sig.signature}
	require.ErrorIs(t, err, decisionsig.ErrRefused)
	var dre *DecisionRefusedError
	require.True(t, errors.As(err, &dre))
	require.False(t, errors.Is(&DecisionRefusedError{Key: "ok1_a", Reason: other.reason}, decisionsig.ErrRefused))
	require.ErrorIs(t, &RefusedError{Key: "ok1_r", Signature: true}, decisionsig.ErrRefused)
	require.False(t, errors.Is(&RefusedError{Key: "ok1_r"}, decisionsig.ErrRefused))
}
