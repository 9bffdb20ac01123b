package faults_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/faults"
	"github.com/oncekey/oncekey/oncekeystore"
)

// The Transactional class (faults.ToolCredit) under crashes: its effect is a row the body writes
// in oncekey's transaction, counted in the table (the audit adds those rows to the downstream's
// ledger), so double_effects, lost and stuck are judged as for the other tools.

// creditSetup creates ToolCredit's table and returns the operation key and the request of the
// scenario's one call (workflow "wf", step "credit").
func (e *env) creditSetup() (key string, req faults.Request) {
	e.t.Helper()
	_, err := e.pool.Exec(e.ctx(time.Minute), faults.CreditsDDL)
	require.NoError(e.t, err)
	return e.key("wf", "credit"), faults.Request{RequestID: "c1", Customer: "acme", Subject: e.res.Scenario}
}

// credits counts key's committed rows.
func (e *env) credits(key string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(e.ctx(time.Minute), `SELECT count(*) FROM `+faults.CreditsTable+` WHERE op_key = $1`, key).Scan(&n))
	return n
}

func creditCalls(req faults.Request, startToClose time.Duration) faults.CallsInput {
	return faults.CallsInput{Calls: []faults.Call{{Tool: faults.ToolCredit, StepID: "credit", Request: req}}, StartToClose: startToClose}
}

func TestTxKillInBody(t *testing.T) {
	e := newEnv(t, "tx_kill_in_body")
	key, req := e.creditSetup()
	w1 := e.child("w1", true)
	hold := e.ds.Arm(faults.PointBody, req.RequestID)
	run := e.startCalls("wf", creditCalls(req, 8*time.Second))
	hit := e.waitHit(hold)
	require.Equal(t, key, hit.Key)
	w1.kill() // the body's row is written in the open transaction
	require.Equal(t, oncekeystore.StatusPending, e.get(key).Status)
	require.Zero(t, e.credits(key), "the killed body's row committed")

	e.child("w2", true)
	out := e.calls(run)
	require.Equal(t, oncekey.OutcomeApplied, out[0].Label.Status, out[0].Error)
	require.Equal(t, 1, e.credits(key))
	require.Equal(t, 2, e.ds.Bodies(key), "tool bodies entered")
	require.Equal(t, oncekeystore.StatusApplied, e.get(key).Status)
	e.check(1, 1)
	e.note("killed in the body with its row written: nothing committed; the retry took the record over after the lease and wrote once")
}

func TestTxKillAfterCommit(t *testing.T) {
	e := newEnv(t, "tx_kill_after_commit")
	key, req := e.creditSetup()
	w1 := e.child("w1", true)
	hold := e.ds.Arm(faults.PointCompleted, req.RequestID)
	run := e.startCalls("wf", creditCalls(req, 8*time.Second))
	hit := e.waitHit(hold)
	require.Equal(t, key, hit.Key)
	w1.kill()
	require.Equal(t, oncekeystore.StatusApplied, e.get(key).Status, "committed before the kill")
	require.Equal(t, 1, e.credits(key))

	e.child("w2", true)
	out := e.calls(run)
	require.Equal(t, oncekey.OutcomeApplied, out[0].Label.Status, out[0].Error)
	require.Equal(t, key, out[0].Receipt.Key)
	require.Equal(t, 1, e.credits(key))
	require.Equal(t, 1, e.ds.Bodies(key), "the retry ran the body")
	e.check(1, 1)
	e.note("killed after COMMIT: the retry replayed the stored result")
}

// Postgres is restarted while the body's transaction is open, just before the completion and
// COMMIT: the commit fails, the worker reads the outcome back from the record (a release fenced at
// the epoch lands: not committed) and Temporal's retry writes once. The same worker process
// carries on. The server is a private instance the test starts.
func TestTxPostgresRestartInCommit(t *testing.T) {
	e, pg := newRestartEnv(t, "tx_postgres_restart_in_commit")
	key, req := e.creditSetup()
	w1 := e.child("w1", true)
	hold := e.ds.Arm(faults.PointTxCommit, req.RequestID)
	run := e.startCalls("wf", creditCalls(req, time.Minute))
	hit := e.waitHit(hold)
	require.Equal(t, key, hit.Key)
	pg.Stop()
	require.NoError(t, pg.Start(e.ctx(time.Minute)))
	hold.Release()

	out := e.calls(run)
	require.Equal(t, oncekey.OutcomeApplied, out[0].Label.Status, out[0].Error)
	require.Equal(t, 1, e.credits(key))
	require.Equal(t, 2, e.ds.Bodies(key), "tool bodies entered")
	require.True(t, w1.alive(), "the worker process was never restarted")
	e.check(1, 1)
	e.note("Postgres restarted before COMMIT: the commit failed, read back as not committed; the retry wrote once")
}
