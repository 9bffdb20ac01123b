package faults_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/faults"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// The rows of the release checklist and the fault table, each against the dev server, Postgres
// and the fake downstream, whose ledger is the only count of effects trusted.

var ticket = faults.Request{RequestID: "r1", Customer: "acme", Subject: "printer on fire"}

// Same key and fingerprint twice: one effect, then the stored result is replayed; the downstream
// sees one request.
func TestSameKeyTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "same_key_twice")
	e.inProcess("w1", false)
	call := faults.Call{Tool: faults.ToolCreate, StepID: "create", Request: ticket}
	out := e.calls(e.startCalls("wf", faults.CallsInput{Calls: []faults.Call{call, call}}))
	key := e.key("wf", "create")
	require.Equal(t, oncekey.OutcomeApplied, out[0].Label.Status)
	require.Equal(t, oncekey.OutcomeApplied, out[1].Label.Status, "the workflow receives the value again")
	require.Equal(t, out[0].Receipt, out[1].Receipt, "the replay is the original result")
	require.Equal(t, key, out[0].Receipt.Key)
	require.Len(t, e.ds.EffectsFor(key), 1)
	require.Equal(t, 1, e.ds.Arrivals(key), "one request reached the downstream")
	e.waitEvents(1, "replayed", outcome(faults.ToolCreate, oncekey.OutcomeReplayed))
	require.Equal(t, 1, e.ds.CountEvents(outcome(faults.ToolCreate, oncekey.OutcomeApplied)))
	require.Equal(t, oncekeystore.StatusApplied, e.get(key).Status)
	e.check(1, 1)
	e.note("one effect %s, one downstream request, second call replayed", out[0].Receipt.ID)
}

// The downstream commits and the answer is lost. Effectful with a receipt lookup: the
// reconciliation finds the receipt by operation key and hands back the original result, with no
// second request. Idempotent on a downstream that deduplicates by key: the retry sends the same
// key and gets the same ticket.
func TestLostResponseAfterCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "lost_response_after_commit")
	e.inProcess("w1", false)
	e.ds.Plan("r-effectful", faults.FaultDropAfterCommit)
	e.ds.Plan("r-idempotent", faults.FaultDropAfterCommit)
	runA := e.startCalls("effectful", faults.CallsInput{Calls: []faults.Call{{Tool: faults.ToolCreateReceipt, StepID: "create",
		Request: faults.Request{RequestID: "r-effectful", Customer: "acme", Subject: "lost"}}}})
	runB := e.startCalls("idempotent", faults.CallsInput{Calls: []faults.Call{{Tool: faults.ToolUpsert, StepID: "create",
		Request: faults.Request{RequestID: "r-idempotent", Customer: "acme", Subject: "lost"}}}})
	a, b := e.calls(runA), e.calls(runB)
	keyA, keyB := e.key("effectful", "create"), e.key("idempotent", "create")

	landed, ok := e.ds.Lookup(keyA)
	require.True(t, ok)
	require.Equal(t, oncekey.OutcomeApplied, a[0].Label.Status)
	require.Equal(t, landed, a[0].Receipt, "the workflow got the receipt the downstream committed")
	require.Equal(t, 1, e.ds.Arrivals(keyA), "no blind second call")
	rec := e.get(keyA)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, "receipt:"+faults.ToolCreateReceipt, rec.ResolvedBy)
	require.Equal(t, landed.ID, rec.EffectReference)

	landedB, ok := e.ds.Lookup(keyB)
	require.True(t, ok)
	require.Equal(t, landedB, b[0].Receipt)
	require.Equal(t, 2, e.ds.Arrivals(keyB), "the Idempotent retry reached the downstream with the same key")
	e.check(2, 2)
	e.note("effectful: settled by receipt %s, 1 request; idempotent: 2 requests, 1 effect", landed.ID)
}

// Two workers claim one key at once: the first owns the claim while it is held inside the
// downstream; the second, in another worker, answers in_flight until the first finishes, then
// replays.
func TestTwoWorkersClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "two_workers_claim")
	qa, qb := e.tq+"-a", e.tq+"-b"
	e.inProcess("wa", false, e.tq, qa)
	e.inProcess("wb", false, qb)
	req := faults.Request{RequestID: "shared-1", Customer: "acme", Subject: "one ticket"}
	hold := e.ds.Arm(faults.PointBeforeCommit, req.RequestID)
	runA := e.startCalls("a", faults.CallsInput{Calls: []faults.Call{{Tool: faults.ToolCreateShared, Request: req, TaskQueue: qa}}})
	hit := e.waitHit(hold)
	runB := e.startCalls("b", faults.CallsInput{Calls: []faults.Call{{Tool: faults.ToolCreateShared, Request: req, TaskQueue: qb}}})
	inFlightB := func(ev faults.WorkerEvent) bool {
		return ev.Worker == "wb" && ev.Outcome == string(oncekey.OutcomeInFlight)
	}
	e.waitEvents(1, "in_flight from the second worker", inFlightB)
	rec := e.get(hit.Key)
	require.Equal(t, oncekeystore.StatusPending, rec.Status, "the first worker owns the claim")
	require.Empty(t, e.ds.EffectsFor(hit.Key))
	hold.Release()
	a, b := e.calls(runA), e.calls(runB)
	require.Equal(t, a[0].Receipt, b[0].Receipt)
	require.Len(t, e.ds.EffectsFor(hit.Key), 1)
	require.Equal(t, 1, e.ds.Arrivals(hit.Key))
	e.waitEvents(1, "replayed from the second worker", func(ev faults.WorkerEvent) bool {
		return ev.Worker == "wb" && ev.Outcome == string(oncekey.OutcomeReplayed)
	})
	require.Equal(t, 1, e.ds.CountEvents(func(ev faults.WorkerEvent) bool {
		return ev.Worker == "wa" && ev.Outcome == string(oncekey.OutcomeApplied)
	}))
	require.Equal(t, rec.Epoch, e.get(hit.Key).Epoch, "nobody took the claim over")
	e.check(1, 1)
	e.note("worker wa applied %s; worker wb saw in_flight %d times, then replayed", a[0].Receipt.ID, e.ds.CountEvents(inFlightB))
}

// The same key with changed material arguments is rejected: no effect, no replay, and the
// stored fingerprint is the first call's.
func TestChangedArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "changed_arguments")
	e.inProcess("w1", false)
	first := faults.Request{RequestID: "r1", Customer: "acme", Subject: "refund order 42", AmountCents: 1000}
	changed := first
	changed.AmountCents = 100000
	out := e.calls(e.startCalls("wf", faults.CallsInput{Calls: []faults.Call{
		{Tool: faults.ToolCreate, StepID: "create", Request: first},
		{Tool: faults.ToolCreate, StepID: "create", Request: changed},
	}}))
	key := e.key("wf", "create")
	require.Equal(t, oncekey.OutcomeApplied, out[0].Label.Status)
	require.Equal(t, oncekey.OutcomeConflict, out[1].Label.Status, "%+v", out[1].Label)
	require.False(t, out[1].Label.SafeToRepeat)
	require.Contains(t, out[1].Error, "different arguments")
	require.Empty(t, out[1].Receipt.ID, "nothing was replayed")
	fp := func(r faults.Request) string {
		s, err := oncekey.Fingerprint(oncekey.Policy{}, oncekey.Operation{Tool: faults.ToolCreate, Args: []any{r}})
		require.NoError(t, err)
		return s
	}
	rec := e.get(key)
	require.Equal(t, fp(first), rec.Fingerprint, "the stored fingerprint is the first call's")
	require.NotEqual(t, fp(changed), rec.Fingerprint)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, 1, e.ds.Arrivals(key))
	e.check(2, 1)
	e.note("stored fingerprint %.12s, incoming %.12s: rejected, 1 effect", rec.Fingerprint, fp(changed))
}

// The same arguments under a new operation key are a new operation: two effects, two records.
// That is the design (a deliberate "send again" is a new step), not a duplicate.
func TestNewKeySameArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "new_key_same_arguments")
	e.inProcess("w1", false)
	out := e.calls(e.startCalls("wf", faults.CallsInput{Calls: []faults.Call{
		{Tool: faults.ToolCreate, StepID: "create", Request: ticket},
		{Tool: faults.ToolCreate, StepID: "create_again", Request: ticket},
	}}))
	k1, k2 := e.key("wf", "create"), e.key("wf", "create_again")
	require.NotEqual(t, k1, k2)
	require.Equal(t, oncekey.OutcomeApplied, out[0].Label.Status)
	require.Equal(t, oncekey.OutcomeApplied, out[1].Label.Status)
	require.NotEqual(t, out[0].Receipt.ID, out[1].Receipt.ID, "two tickets")
	require.Len(t, e.ds.EffectsFor(k1), 1)
	require.Len(t, e.ds.EffectsFor(k2), 1)
	r1, r2 := e.get(k1), e.get(k2)
	require.Equal(t, r1.Fingerprint, r2.Fingerprint, "the same arguments")
	require.Equal(t, oncekeystore.StatusApplied, r1.Status)
	require.Equal(t, oncekeystore.StatusApplied, r2.Status)
	e.check(2, 2)
	e.note("two keys, same fingerprint %.12s: two effects %s and %s, by design", r1.Fingerprint, out[0].Receipt.ID, out[1].Receipt.ID)
}

// Authorization revoked between attempts. After an applied refund, a repeat under the same key
// is rejected (not replayed). For a refund whose first attempt the downstream refused before
// committing, the retry is rejected before any effect.
func TestAuthorizationRevoked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "authorization_revoked")
	e.inProcess("w1", false)
	applied := faults.Request{RequestID: "refund-1", Customer: "c1", Subject: "refund", AmountCents: 500}
	runA := e.startCalls("applied", faults.CallsInput{Calls: []faults.Call{
		{Tool: faults.ToolRefund, StepID: "refund", Request: applied},
		{Tool: faults.ToolRefund, StepID: "refund", Request: applied, WaitSignal: true},
	}})
	keyA := e.key("applied", "refund")
	require.Eventually(t, func() bool { return len(e.ds.EffectsFor(keyA)) == 1 }, 3*time.Minute, 50*time.Millisecond)
	require.Eventually(t, func() bool { return e.get(keyA).Status == oncekeystore.StatusApplied }, 3*time.Minute, 50*time.Millisecond)
	e.ds.Revoke("c1")
	e.signal("applied")
	a := e.calls(runA)
	require.Equal(t, oncekey.OutcomeApplied, a[0].Label.Status)
	require.Equal(t, oncekey.OutcomeRejected, a[1].Label.Status, "%+v", a[1].Label)
	require.Contains(t, a[1].Error, "(type: "+oncekey.ErrTypeUnauthorized+",")
	require.Empty(t, a[1].Receipt.ID, "a stored result is no way around a revoked permission")

	refused := faults.Request{RequestID: "refund-2", Customer: "c2", Subject: "refund", AmountCents: 700}
	e.ds.Plan(refused.RequestID, faults.FaultRefuseBeforeCommit)
	hold := e.ds.Arm(faults.PointBeforeCommit, refused.RequestID)
	runB := e.startCalls("refused", faults.CallsInput{Calls: []faults.Call{{Tool: faults.ToolRefund, StepID: "refund", Request: refused}}})
	e.waitHit(hold)
	e.ds.Revoke("c2") // between the first attempt (about to be refused) and its retry
	hold.Release()
	b := e.calls(runB)
	keyB := e.key("refused", "refund")
	require.Equal(t, oncekey.OutcomeRejected, b[0].Label.Status, "%+v", b[0].Label)
	require.Empty(t, e.ds.EffectsFor(keyB))
	require.Equal(t, 1, e.ds.Arrivals(keyB), "the retry never reached the downstream")
	require.Equal(t, oncekeystore.StatusReleased, e.get(keyB).Status)
	e.check(2, 1)
	e.note("repeat after revocation rejected without replay; retry after a refused attempt rejected before the downstream")
}

// A key arriving after retention meets a tombstone: expired, no effect, no replay.
func TestKeyAfterRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "key_after_retention")
	e.inProcess("w1", false)
	call := faults.Call{Tool: faults.ToolCreateShortRetention, StepID: "create", Request: ticket}
	late := call
	late.WaitSignal = true
	run := e.startCalls("wf", faults.CallsInput{Calls: []faults.Call{call, late}})
	key := e.key("wf", "create")
	require.Eventually(t, func() bool {
		rec, err := e.store.Get(e.ctx(time.Minute), &oncekeystore.GetParams{Tenant: "default", OperationKey: key})
		return err == nil && rec.Status == oncekeystore.StatusApplied
	}, 3*time.Minute, 50*time.Millisecond)
	// Retention is under 3s on the database clock: purge until the record is a tombstone.
	require.Eventually(t, func() bool {
		_, err := e.store.Purge(e.ctx(time.Minute), &oncekeystore.PurgeParams{})
		return err == nil && e.get(key).Status == oncekeystore.StatusExpired
	}, time.Minute, 200*time.Millisecond)
	tomb := e.get(key)
	require.Nil(t, tomb.Result, "a tombstone keeps digests only")
	e.signal("wf")
	out := e.calls(run)
	require.Equal(t, oncekey.OutcomeApplied, out[0].Label.Status)
	require.Equal(t, oncekey.OutcomeExpired, out[1].Label.Status, "%+v", out[1].Label)
	require.False(t, out[1].Label.SafeToRepeat)
	require.Empty(t, out[1].Receipt.ID)
	require.Len(t, e.ds.EffectsFor(key), 1)
	require.Equal(t, 1, e.ds.Arrivals(key))
	require.Equal(t, tomb.Epoch, e.get(key).Epoch, "the late call changed nothing")
	e.check(2, 1)
	e.note("late call after retention: expired (tombstone until %s), 1 effect", tomb.TombstoneUntil.Format(time.RFC3339))
}

// A downstream that answers with a delayed job: the submission is stored with the job's ID; the
// agent is told in_flight and polls by the same operation key; a repeated submission replays the
// job receipt; one job.
func TestDelayedJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "delayed_job")
	e.inProcess("w1", false)
	run := e.startWorkflow("export", faults.WorkflowExport, faults.ExportInput{
		StepID: "export", Request: faults.Request{RequestID: "job-1", Customer: "acme", Subject: "export", Polls: 3},
		StartToClose: 10 * time.Second, PollEvery: 200 * time.Millisecond,
	})
	var out faults.ExportOutput
	require.NoError(t, run.Get(e.ctx(5*time.Minute), &out))
	key := e.key("export", "export")
	jobs := e.ds.EffectsFor(key)
	require.Len(t, jobs, 1, "one job")
	require.Equal(t, 1, e.ds.Arrivals(key), "no duplicate submission")
	require.Len(t, out.Submits, 2)
	require.Equal(t, out.Submits[0], out.Submits[1], "the repeat replayed the job receipt")
	require.Equal(t, jobs[0].ID, out.Final.ID)
	require.Equal(t, faults.JobDone, out.Final.Status)
	require.GreaterOrEqual(t, len(out.Labels), 2)
	for _, l := range out.Labels[:len(out.Labels)-1] {
		require.Equal(t, oncekey.OutcomeInFlight, l.Status)
		require.Equal(t, oncekey.NextPoll, l.NextAction)
		require.Equal(t, key, l.OperationKey, "polled by the same operation key")
	}
	require.Equal(t, oncekey.OutcomeApplied, out.Labels[len(out.Labels)-1].Status)
	rec := e.get(key)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	e.waitEvents(1, "replayed submission", outcome(faults.ToolExportSubmit, oncekey.OutcomeReplayed))
	e.check(1, 1)
	var states []string
	for _, l := range out.Labels {
		states = append(states, string(l.Status))
	}
	e.note("job %s: %v, 1 submission", out.Final.ID, states)
}

// A malformed answer, an incomplete one (no effect reference) and a timeout after the downstream
// committed are never read as success: each record is unknown and its workflow waits for
// reconciliation; an operator settles them from the downstream's ledger.
func TestMalformedResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "malformed_result")
	e.inProcess("w1", false)
	e.ds.Plan("malformed", faults.FaultMalformed)
	e.ds.Plan("incomplete", faults.FaultIncomplete)
	hang := e.ds.Arm(faults.PointAfterCommit, "timeout")
	defer hang.Release()
	ids := []string{"malformed", "incomplete", "timeout"}
	for _, id := range ids {
		e.startCalls(id, faults.CallsInput{Calls: []faults.Call{{Tool: faults.ToolCreate, StepID: "create",
			Request: faults.Request{RequestID: id, Customer: "acme", Subject: id}}}, StartToClose: 5 * time.Second})
	}
	for _, id := range ids {
		key := e.key(id, "create")
		e.waitReconciling(key)
		require.Equal(t, oncekeystore.StatusUnknown, e.get(key).Status, id)
		d, err := e.c.DescribeWorkflow(e.ctx(time.Minute), e.wfID(id), "")
		require.NoError(t, err)
		require.Equal(t, "Running", d.RawResponse.GetWorkflowExecutionInfo().GetStatus().String(), "%s: no success was inferred", id)
		require.Len(t, e.ds.EffectsFor(key), 1, "%s: the downstream committed", id)
	}
	for _, id := range ids {
		key := e.key(id, "create")
		r := e.decide(key, e.get(key).Epoch)
		require.Equal(t, reconcile.Applied, r.Outcome)
		require.NoError(t, reconcile.Resolve(e.ctx(time.Minute), e.c, "default", key, r))
	}
	for _, id := range ids {
		key := e.key(id, "create")
		var out []faults.CallResult
		require.NoError(t, e.c.GetWorkflow(e.ctx(time.Minute), e.wfID(id), "").Get(e.ctx(3*time.Minute), &out))
		landed, _ := e.ds.Lookup(key)
		require.Equal(t, oncekey.OutcomeApplied, out[0].Label.Status, id)
		require.Equal(t, landed, out[0].Receipt, "%s: the result is the ledger's, as resolved", id)
		require.Equal(t, 1, e.ds.Arrivals(key), "%s: no second call", id)
		rec := e.get(key)
		require.Equal(t, oncekeystore.StatusApplied, rec.Status)
		require.Equal(t, "faults-operator", rec.ResolvedBy)
	}
	e.check(3, 3)
	e.note("malformed, incomplete and timed-out answers: unknown, reconciled from the ledger, 1 request each")
}
