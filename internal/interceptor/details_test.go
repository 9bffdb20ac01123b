package interceptor_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
)

func TestErrorDetails(t *testing.T) {
	want := oncekey.Details{Tenant: "acme", OperationKey: "ok1_ab", Tool: "CreateTicket", Outcome: oncekey.OutcomeFailed}
	made := temporal.NewNonRetryableApplicationError("refused", oncekey.ErrTypeConfig, nil, want)

	// Made in workflow code: the details are Go values.
	got, ok := oncekey.ErrorDetails(made)
	require.True(t, ok)
	require.Equal(t, want, got)

	// Crossed Temporal: the details are encoded.
	fc := temporal.GetDefaultFailureConverter()
	got, ok = oncekey.ErrorDetails(fc.FailureToError(fc.ErrorToFailure(made)))
	require.True(t, ok)
	require.Equal(t, want, got)

	// A pointer, as some callers pass it.
	got, ok = oncekey.ErrorDetails(temporal.NewApplicationError("x", "t", &want))
	require.True(t, ok)
	require.Equal(t, want, got)

	// Another type's details, or none: no Details, and no panic.
	_, ok = oncekey.ErrorDetails(temporal.NewApplicationError("x", "t", "a string detail"))
	require.False(t, ok)
	_, ok = oncekey.ErrorDetails(temporal.NewApplicationError("x", "t"))
	require.False(t, ok)
	_, ok = oncekey.ErrorDetails(temporal.NewApplicationError("x", "t", nil))
	require.False(t, ok, "a nil detail")
}
