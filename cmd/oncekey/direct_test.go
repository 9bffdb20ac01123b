package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// An unknown record whose reconciliation workflow ended without a decision (here: terminated)
// cannot be resolved the normal way; the error names `--direct`, which writes the decision to the
// store, and the caller's workflow replays it when it runs the step again. While a reconciliation
// workflow is running, --direct is refused.
func TestResolveDirectSettlesAnUnknownNothingWaitsFor(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "ines")
	b := &bookings{loseFirst: true}
	tq := bookingWorker(t, c, url, b, "acme")
	run := runBooking(t, c, tq)
	key := waitingKey(t, c, env)

	// A reconciliation workflow waits: --direct is refused and says to resolve through it.
	r := cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--direct", "--applied", "--ref", "BK-R1")
	requireOneLine(t, r, exitFailed, "the reconciliation workflow "+reconcile.WorkflowID(key)+" is running in namespace default (waiting_for_resolution)",
		"resolve through it instead, without --direct: `oncekey resolve "+key+" --tenant acme --epoch 1 --address "+env["TEMPORAL_ADDRESS"]+" --applied --ref BK-R1`", "nothing was written")
	require.Equal(t, oncekeystore.StatusUnknown, showJSON(t, env, key, "acme").Status)

	// The reconciliation ends without a decision; the caller's workflow fails, the record stays unknown.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, c.TerminateWorkflow(ctx, reconcile.WorkflowID(key), "", "test: the investigation was abandoned"))
	require.Error(t, run.Get(ctx, nil))
	require.Equal(t, oncekeystore.StatusUnknown, showJSON(t, env, key, "acme").Status)

	// The normal form finds nothing waiting and names the --direct form, as the command was run.
	r = cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--applied", "--ref", "BK-R1", "--result", `{"id":"BK-R1"}`, "--note", "found in the booking system")
	direct := "`oncekey resolve " + key + " --tenant acme --epoch 1 --address " + env["TEMPORAL_ADDRESS"] + " --direct --applied --ref BK-R1 --result '{\"id\":\"BK-R1\"}' --note 'found in the booking system'`"
	requireOneLine(t, r, exitNotFound, "no reconciliation workflow is waiting for "+key, "if it is still unknown "+direct+" writes the decision straight to the store")
	cmds := suggested(t, r.stderr, nil)
	require.Len(t, cmds, 2)

	// The suggested --direct command settles the record.
	r = cli(t, env, cmds[1]...)
	require.Equal(t, 0, r.code, r.stderr)
	for _, want := range []string{
		"resolved " + key + " directly in the store as applied (tenant acme, " + dbAt(t) + ", schema ",
		`by ines (oncekey-cli --direct), ref BK-R1, result 14 bytes of JSON, note "found in the booking system"`,
		"record: tool Book, workflow booking-" + t.Name() + ", step book; status now applied",
		"checked: no reconciliation workflow for the key is running in namespace default (" + reconcile.WorkflowID(key) + " ended: terminated at ",
		"not checked: the result's type",
		"it replays this result and must be able to decode it",
	} {
		require.Contains(t, r.stdout, want)
	}
	require.NotContains(t, r.stdout, "not confirmed", "a step key confirms the namespace")
	v := showJSON(t, env, key, "acme")
	require.Equal(t, oncekeystore.StatusApplied, v.Status)
	require.Equal(t, "BK-R1", v.EffectReference)
	require.Equal(t, "ines (oncekey-cli --direct)", v.ResolvedBy)
	require.Equal(t, "found in the booking system", v.Note)

	// Settled once: a second --direct changes nothing.
	r = cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--direct", "--failed")
	requireOneLine(t, r, exitFailed, key+" is already applied by ines (oncekey-cli --direct): there is nothing to resolve; nothing was written")

	// Running the step again replays the stored decision: the tool does not run again.
	run = runBooking(t, c, tq)
	var out Booking
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, "BK-R1", out.ID)
	effects, runs := b.counts()
	require.Equal(t, 1, effects, "the downstream landed one booking")
	require.Equal(t, 1, runs, "the tool was not run again")
}

// A record whose key cannot be confirmed as a step key of the namespace checked gets a warning:
// the reconciliation workflow may run in another namespace, which was not checked.
func TestResolveDirectSaysWhenTheNamespaceIsUnconfirmed(t *testing.T) {
	needsServices(t)
	testenv.Temporal(t)
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url, "TEMPORAL_ADDRESS": testenv.TemporalHostPort(t)}
	ctx := context.Background()
	key, err := oncekey.Key(oncekey.Policy{}, oncekey.Operation{Namespace: "prod", Tenant: "acme", WorkflowID: "wf-9", StepID: "charge"})
	require.NoError(t, err)
	cr, err := s.Claim(ctx, &oncekeystore.ClaimParams{Tenant: "acme", OperationKey: key, Tool: "Charge", Fingerprint: strings.Repeat("ab", 32),
		WorkflowID: "wf-9", StepID: "charge", Effect: oncekey.Effectful, Lease: time.Minute, Retention: time.Hour, Tombstone: time.Hour})
	require.NoError(t, err)
	_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: "acme", OperationKey: key, Epoch: cr.Record.Epoch})
	require.NoError(t, err)

	r := cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--direct", "--failed", "--note", "declined at the provider")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "checked: no reconciliation workflow "+reconcile.WorkflowID(key)+" exists in namespace default")
	require.Contains(t, r.stdout, "not confirmed: that namespace default is the caller's")
	require.Contains(t, r.stdout, "fails with oncekey.Failed")
	v := showJSON(t, env, key, "acme")
	require.Equal(t, oncekeystore.StatusFailed, v.Status)
	require.Equal(t, "oncekey-cli --direct", v.ResolvedBy, "no $USER: the CLI alone")
}

// Without Temporal, --direct refuses (it cannot check that nothing waits) unless told not to
// check, and then says what it did not check. A later claim of the key replays the stored result.
func TestResolveDirectWithoutTemporal(t *testing.T) {
	url, s, _ := migrated(t)
	env := map[string]string{"DATABASE_URL": url, "TEMPORAL_ADDRESS": "127.0.0.1:1"}
	key := seed(t, s, "acme", "CreateTicket", "wf-1", "create_ticket", oncekeystore.StatusUnknown, nil)

	r := cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--direct", "--applied", "--timeout", "2s")
	requireOneLine(t, r, exitUnreachable, "cannot reach Temporal at 127.0.0.1:1",
		"--direct checks with Temporal that no reconciliation workflow for the key is running before it writes, so nothing was written",
		"add --no-temporal-check if you know none is running")
	require.Equal(t, oncekeystore.StatusUnknown, showJSON(t, env, key, "acme").Status)

	r = cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "acme", "--direct", "--no-temporal-check", "--applied", "--ref", "TCK-7", "--result", `{"id":"TCK-7"}`, "--by", "ops")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "not checked: whether a reconciliation workflow for the key is running (--no-temporal-check)")
	require.Contains(t, r.stdout, "not checked: the result's type")
	v := showJSON(t, env, key, "acme")
	require.Equal(t, oncekeystore.StatusApplied, v.Status)
	require.Equal(t, "ops (oncekey-cli --direct)", v.ResolvedBy)

	// The next claim of the key (a run of the step) finds the decision and its result.
	cr, err := s.Claim(context.Background(), &oncekeystore.ClaimParams{
		Tenant: "acme", OperationKey: key, Tool: "CreateTicket", Fingerprint: strings.Repeat("ab", 32),
		WorkflowID: "wf-1", StepID: "create_ticket", Effect: oncekey.Effectful,
		Lease: time.Minute, Retention: time.Hour, Tombstone: time.Hour,
	})
	require.NoError(t, err)
	require.False(t, cr.Acquired)
	require.Equal(t, oncekeystore.StatusApplied, cr.Record.Status)
	require.Equal(t, "TCK-7", cr.Record.EffectReference)
	require.JSONEq(t, `{"id":"TCK-7"}`, string(decodeResult(cr.Record.Result).(json.RawMessage)))

	// Not found, under the tenant given.
	r = cli(t, env, "resolve", key, "--epoch", "1", "--tenant", "globex", "--direct", "--no-temporal-check", "--not-applied")
	requireOneLine(t, r, exitNotFound, "no record for "+key+" under tenant globex")
}
