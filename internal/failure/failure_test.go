package failure

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// TestTypesPinned pins the application error types. CHANGING ONE IS A BREAKING CHANGE
// (docs/compatibility.md): they are stored in records' failure documents, sent across Temporal,
// and users' workflows match them by name.
func TestTypesPinned(t *testing.T) {
	t.Parallel()
	want := map[Kind]string{
		Indeterminate:       "oncekey.IndeterminateOutcome",
		FingerprintMismatch: "oncekey.FingerprintMismatch",
		InFlight:            "oncekey.InFlight",
		Expired:             "oncekey.ExpiredOperation",
		StoreUnavailable:    "oncekey.StoreUnavailable",
		NotApplied:          "oncekey.NotApplied",
		Failed:              "oncekey.Failed",
		Unauthorized:        "oncekey.Unauthorized",
		ResultTooLarge:      "oncekey.ResultTooLarge",
		Config:              "oncekey.Config",
		Approval:            "oncekey.ApprovalRequired",
		ArgsMismatch:        "oncekey.ArgsMismatch",
		ApprovalPending:     "oncekey.ApprovalPending",
		Unsettled:           "oncekey.Unsettled",
		LostClaim:           "oncekey.LostClaim",
		TxMisuse:            "oncekey.TxMisuse",
		RepeatRefused:       "oncekey.RepeatRefused",
		AsyncCompletion:     "oncekey.AsyncCompletion",
		Invalid:             "oncekey.InvalidResolution",
		ForeignRecord:       "oncekey.ForeignRecord",
		NoWorkerRequest:     "oncekey.NoWorkerRequest",
		EscalationTimeout:   "oncekey.EscalationTimeout",
		Refused:             "oncekey.ResolutionRefused",
		NotWaiting:          "oncekey.NotWaitingForResolution",
		DecisionRefused:     "oncekey.DecisionRefused",
		NotPending:          "oncekey.ApprovalNotPending",
		SignatureRefused:    "oncekey.SignatureRefused",
		UnboundHeaders:      "oncekey.UnboundHeaders",
	}
	require.Len(t, Rows(), len(want))
	for _, r := range Rows() {
		require.Equal(t, want[r.Kind], r.Type, "kind %d", r.Kind)
		require.Equal(t, r, Get(r.Kind))
		require.Equal(t, r, OfType(r.Type))
	}
}

func TestOf(t *testing.T) {
	t.Parallel()
	wrapped := fmt.Errorf("activity failed: %w", temporal.NewApplicationError("m", TypeInFlight))
	r, appErr := Of(wrapped)
	require.Equal(t, InFlight, r.Kind)
	require.Equal(t, Retry, r.Class)
	require.NotNil(t, appErr)
	require.True(t, Is(wrapped, InFlight))
	require.False(t, Is(wrapped, None))

	r, appErr = Of(temporal.NewApplicationError("m", "tool.Refused"))
	require.Equal(t, Row{}, r, "a type not in the table is None's row")
	require.NotNil(t, appErr)

	r, appErr = Of(errors.New("plain"))
	require.Equal(t, Row{}, r)
	require.Nil(t, appErr)
	require.False(t, Is(nil, None))

	require.True(t, TypeIn(wrapped, []string{"x", TypeInFlight}))
	require.False(t, TypeIn(wrapped, []string{"x"}))
	require.False(t, TypeIn(errors.New("plain"), []string{""}))
	require.Equal(t, Row{}, Get(kinds))
}
