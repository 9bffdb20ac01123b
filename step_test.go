package oncekey_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

// The default step of a re-run is its first attempt's: the key and Step() use FirstActivityID,
// and a FirstActivityID equal to ActivityID (or empty) leaves the key as it always was.
func TestDefaultStepUsesFirstActivityID(t *testing.T) {
	t.Parallel()
	op := baseOp()
	op.StepID = ""
	first := mustKey(t, oncekey.Policy{}, op)
	require.Equal(t, lengthPrefixed("default", "acme", "run-step", "support-42", op.RunID, "7"), first)
	require.Equal(t, op.RunID+"/7", op.Step())

	same := op
	same.FirstActivityID = op.ActivityID
	require.Equal(t, first, mustKey(t, oncekey.Policy{}, same))

	rerun := op
	rerun.ActivityID, rerun.FirstActivityID = "12", "7"
	require.Equal(t, first, mustKey(t, oncekey.Policy{}, rerun), "a re-run keeps the first attempt's key")
	require.Equal(t, op.RunID+"/7", rerun.Step())

	rerun.FirstActivityID = ""
	require.NotEqual(t, first, mustKey(t, oncekey.Policy{}, rerun), "without it, a new activity ID is a new key")

	explicit := baseOp()
	explicit.FirstActivityID = "3"
	require.Equal(t, mustKey(t, oncekey.Policy{}, baseOp()), mustKey(t, oncekey.Policy{}, explicit), "an explicit step ignores it")
	require.Equal(t, "create_ticket", explicit.Step())
}
