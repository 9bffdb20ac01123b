package faults_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/faults"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// killCase is one point where a worker process is SIGKILLed. The child worker's tool (or its
// interceptor, or its store) calls the downstream's hook at that point; the downstream holds the
// call and tells the test, which kills the process while it is held there. No sleeps: the kill
// happens exactly at the point.
type killCase struct {
	scenario string
	// point is where the worker is held and killed; "" kills it while the reconciliation
	// workflow waits for a person (after a response lost after commit).
	point faults.Point
	// tool is the tool called; ToolCreate has no receipt lookup, so an unknown outcome waits for
	// a person, who decides with the CLI from the downstream's ledger.
	tool string
	// after is the record's status right after the kill.
	after oncekeystore.Status
	// person is true when a person must resolve the operation (with the CLI).
	person bool
	// bodies is how many tool bodies the downstream sees in all.
	bodies int
}

func TestKillAfterClaim(t *testing.T) {
	runKill(t, killCase{scenario: "kill_after_claim", point: faults.PointClaimed, tool: faults.ToolCreate,
		after: oncekeystore.StatusPending, person: true, bodies: 1})
}

func TestKillInBody(t *testing.T) {
	runKill(t, killCase{scenario: "kill_in_body", point: faults.PointBody, tool: faults.ToolCreate,
		after: oncekeystore.StatusPending, person: true, bodies: 2})
}

func TestKillAfterCommit(t *testing.T) {
	runKill(t, killCase{scenario: "kill_after_commit", point: faults.PointAfterCommit, tool: faults.ToolCreate,
		after: oncekeystore.StatusPending, person: true, bodies: 1})
}

func TestKillAfterComplete(t *testing.T) {
	runKill(t, killCase{scenario: "kill_after_complete", point: faults.PointCompleted, tool: faults.ToolCreate,
		after: oncekeystore.StatusApplied, bodies: 1})
}

func TestKillWhileReconciling(t *testing.T) {
	runKill(t, killCase{scenario: "kill_while_reconciling", tool: faults.ToolCreate,
		after: oncekeystore.StatusUnknown, person: true, bodies: 1})
}

// The fault table's "crash after the downstream committed, before the local record", for a tool
// with a receipt lookup: the reconciliation finds the receipt by operation key, no person needed.
func TestCrashAfterCommitReceipt(t *testing.T) {
	runKill(t, killCase{scenario: "crash_after_commit_receipt", point: faults.PointAfterCommit, tool: faults.ToolCreateReceipt,
		after: oncekeystore.StatusPending, bodies: 1})
}

func runKill(t *testing.T, kc killCase) {
	e := newEnv(t, kc.scenario)
	w1 := e.child("w1", true)
	req := faults.Request{RequestID: "k1", Customer: "acme", Subject: kc.scenario}
	var hold *faults.Hold
	if kc.point != "" {
		hold = e.ds.Arm(kc.point, req.RequestID)
	} else {
		e.ds.Plan(req.RequestID, faults.FaultDropAfterCommit)
	}
	run := e.startCalls("wf", faults.CallsInput{
		Calls:        []faults.Call{{Tool: kc.tool, StepID: "create", Request: req}},
		StartToClose: 8 * time.Second,
	})
	key := e.key("wf", "create")
	if hold != nil {
		hit := e.waitHit(hold)
		require.Equal(t, key, hit.Key)
		w1.kill()
	} else {
		e.waitReconciling(key)
		w1.kill()
		d, err := e.c.DescribeWorkflow(e.ctx(time.Minute), reconcile.WorkflowID(key), "")
		require.NoError(t, err)
		require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.RawResponse.GetWorkflowExecutionInfo().GetStatus(), "the reconciliation outlives its worker")
	}
	require.Equal(t, kc.after, e.get(key).Status, "right after the kill")
	effectsAtKill := len(e.ds.EffectsFor(key))

	e.child("w2", true) // a fresh process; work continues there
	if kc.person {
		e.waitReconciling(key)
		rec := e.get(key)
		require.Equal(t, oncekeystore.StatusUnknown, rec.Status, "unknown, with a reconciliation waiting")
		require.Len(t, e.ds.EffectsFor(key), effectsAtKill, "nothing ran while it waited")
		r := e.resolveCLI(key)
		e.note("killed at %s; record unknown, reconciliation waiting; resolved %s with the CLI from the ledger", pointName(kc.point), r.Outcome)
	}
	out := e.calls(run)
	landed, ok := e.ds.Lookup(key)
	require.True(t, ok)
	require.Equal(t, oncekey.OutcomeApplied, out[0].Label.Status)
	require.Equal(t, landed, out[0].Receipt, "the workflow got the effect that landed")
	require.Len(t, e.ds.EffectsFor(key), 1, "no second effect")
	require.Equal(t, 1, e.ds.Arrivals(key), "one request reached the downstream")
	require.Equal(t, kc.bodies, e.ds.Bodies(key), "tool bodies entered")
	rec := e.get(key)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	if !kc.person {
		if kc.tool == faults.ToolCreateReceipt {
			require.Equal(t, "receipt:"+kc.tool, rec.ResolvedBy)
			e.note("killed at %s; reconciliation found receipt %s by operation key", pointName(kc.point), landed.ID)
		} else {
			e.note("killed at %s; the record was applied, reconciliation settled it from the store", pointName(kc.point))
		}
	}
	e.check(1, 1)
}

func pointName(p faults.Point) string {
	if p == "" {
		return "reconciliation wait"
	}
	return string(p)
}
