package oncekey_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

// The default step of a re-run, as records show it, is its first attempt's: Step() uses
// FirstActivityID. Neither is part of the key of a call without a step ID.
func TestDefaultStepUsesFirstActivityID(t *testing.T) {
	t.Parallel()
	op := baseOp()
	op.StepID = ""
	first := mustKey(t, oncekey.Policy{}, op)
	require.Equal(t, op.RunID+"/7", op.Step())

	same := op
	same.FirstActivityID = op.ActivityID
	require.Equal(t, first, mustKey(t, oncekey.Policy{}, same))

	rerun := op
	rerun.ActivityID, rerun.FirstActivityID = "12", "7"
	require.Equal(t, first, mustKey(t, oncekey.Policy{}, rerun), "a re-run keeps the first attempt's key")
	require.Equal(t, op.RunID+"/7", rerun.Step())

	rerun.FirstActivityID = ""
	require.Equal(t, first, mustKey(t, oncekey.Policy{}, rerun), "a new activity ID is the same call")
	require.Equal(t, op.RunID+"/12", rerun.Step())

	explicit := baseOp()
	explicit.FirstActivityID = "3"
	require.Equal(t, mustKey(t, oncekey.Policy{}, baseOp()), mustKey(t, oncekey.Policy{}, explicit), "an explicit step ignores it")
	require.Equal(t, "create_ticket", explicit.Step())
}
