package interceptor_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/interceptor"
)

func TestErrorDetails(t *testing.T) {
	want := interceptor.Details{Tenant: "acme", OperationKey: "ok1_ab", Tool: "CreateTicket", Outcome: oncekey.OutcomeFailed}
	made := temporal.NewNonRetryableApplicationError("refused", oncekey.ErrTypeConfig, nil, want)

	// Made in workflow code: the details are Go values.
	got, ok := interceptor.ErrorDetails(made)
	require.True(t, ok)
	require.Equal(t, want, got)

	// Crossed Temporal: the details are encoded.
	fc := temporal.GetDefaultFailureConverter()
	got, ok = interceptor.ErrorDetails(fc.FailureToError(fc.ErrorToFailure(made)))
	require.True(t, ok)
	require.Equal(t, want, got)

	// A pointer, as some callers pass it.
	got, ok = interceptor.ErrorDetails(temporal.NewApplicationError("x", "t", &want))
	require.True(t, ok)
	require.Equal(t, want, got)

	// Another type's details, or none: no Details, and no panic.
	_, ok = interceptor.ErrorDetails(temporal.NewApplicationError("x", "t", "a string detail"))
	require.False(t, ok)
	_, ok = interceptor.ErrorDetails(temporal.NewApplicationError("x", "t"))
	require.False(t, ok)
	_, ok = interceptor.ErrorDetails(temporal.NewApplicationError("x", "t", nil))
	require.False(t, ok, "a nil detail")
}
