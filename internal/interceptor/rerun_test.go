package interceptor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
)

// An Effectful call without an explicit step ID that the workflow side re-schedules (each run a
// new activity with a new activity ID) keeps the operation key of its first attempt: every re-run
// claims the same record, and the record's step is "<runID>/<activity ID of the first attempt>".
func TestSuiteRerunsWithoutStepIDKeepTheFirstKey(t *testing.T) {
	ds := newDownstream(faultNotApplied, faultNotApplied)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	var ids []string
	var runID string
	s.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "CreateTicket" {
			ids = append(ids, info.ActivityID)
			runID = info.WorkflowExecution.RunID
		}
	})
	out := s.run(t, workflowInput{Calls: []stepCall{{Tool: "CreateTicket", Req: req1}}})
	require.Empty(t, out[0].Err)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 3, bodies)
	require.Len(t, ids, 3)
	require.NotEqual(t, ids[0], ids[1], "each re-run is a new activity")
	require.Len(t, ds.keys, 3)
	require.Equal(t, ds.keys[0], ds.keys[1], "the first re-run kept the first attempt's key")
	require.Equal(t, ds.keys[0], ds.keys[2], "the second re-run kept the first attempt's key")
	recs := s.records(t)
	require.Len(t, recs, 1, "one logical call, one record")
	require.Equal(t, oncekeystore.StatusApplied, recs[0].Status)
	require.Equal(t, ds.keys[0], recs[0].OperationKey)
	require.Equal(t, runID+"/"+ids[0], recs[0].StepID)
	// The key is the call identity: workflow ID, tool and arguments, whatever the activity ID.
	want, err := oncekey.Key(oncekey.Policy{Effect: oncekey.Effectful}, oncekey.Operation{
		Namespace: testNamespace, Tenant: testNamespace, WorkflowID: recs[0].WorkflowID, RunID: runID,
		ActivityID: ids[0], Tool: "CreateTicket", Args: []any{req1},
	})
	require.NoError(t, err)
	require.Equal(t, want, recs[0].OperationKey)
}

// Two identical calls of one tool without step IDs in one workflow are one operation, re-runs or
// not: the second replays the first's result (the call identity is the tool and its material
// arguments). A call with other arguments is another operation.
func TestSuiteIdenticalCallsWithoutStepIDAreOneOperation(t *testing.T) {
	ds := newDownstream(faultNotApplied, faultNone, faultNotApplied, faultNone)
	s := setupSuite(t, ds, oncekey.Policy{Effect: oncekey.Effectful})
	other := req1
	other.Subject = "printer still on fire"
	out := s.run(t, workflowInput{Calls: []stepCall{{Tool: "CreateTicket", Req: req1}, {Tool: "CreateTicket", Req: req1},
		{Tool: "CreateTicket", Req: other}}})
	for i := range out {
		require.Empty(t, out[i].Err)
	}
	require.Equal(t, out[0].Ticket.ID, out[1].Ticket.ID, "the second call is a replay")
	require.NotEqual(t, out[0].Ticket.ID, out[2].Ticket.ID)
	effects, bodies := ds.counts()
	require.Equal(t, 2, effects)
	require.Equal(t, 4, bodies, "a not-applied attempt and a re-run for each of the two operations")
	require.Equal(t, ds.keys[0], ds.keys[1])
	require.Equal(t, ds.keys[2], ds.keys[3])
	require.NotEqual(t, ds.keys[0], ds.keys[2])
	require.Len(t, s.records(t), 2)
}
