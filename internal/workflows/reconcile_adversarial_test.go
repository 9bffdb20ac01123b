package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/workflows"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// setupSkewed is setup with a store clock that runs skew ahead of the environment's, so a test
// can move the store past a record's retention.
func setupSkewed(t *testing.T) (*testsuite.TestWorkflowEnvironment, *memstore.Store, *time.Duration) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	asReconciliation(env)
	env.SetTestTimeout(20 * time.Second)
	skew := new(time.Duration)
	store := memstore.New(&memstore.Options{Clock: func() time.Time { return env.Now().Add(*skew) }})
	acts, err := activities.New(store, oncekey.NewRegistry(), nil)
	require.NoError(t, err)
	acts.Register(env)
	workflows.Register(env)
	return env, store, skew
}

// unknownRecord claims ok1_k with a one-hour retention and marks it unknown.
func unknownRecord(t *testing.T, store oncekeystore.Store) {
	t.Helper()
	res, err := store.Claim(context.Background(), &oncekeystore.ClaimParams{Tenant: "t1", OperationKey: "ok1_k", Tool: "CreateTicket", Fingerprint: "fp",
		WorkflowID: "wf", StepID: "create_ticket", Effect: oncekey.Effectful, Lease: time.Minute, Retention: time.Hour, Tombstone: 24 * time.Hour})
	require.NoError(t, err)
	require.True(t, res.Acquired)
	_, err = store.MarkUnknown(context.Background(), &oncekeystore.MarkUnknownParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: res.Record.Epoch})
	require.NoError(t, err)
}

// requireUndecided checks the reconciliation ended without a decision: an error, not an Output
// that claims to know what happened.
func requireUndecided(t *testing.T, env *testsuite.TestWorkflowEnvironment) {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted(), "the reconciliation must end, not wait forever")
	err := env.GetWorkflowError()
	if err == nil {
		var out reconcile.Output
		require.NoError(t, env.GetWorkflowResult(&out))
		t.Fatalf("an expired record's outcome is not known, yet the reconciliation decided %q (%s)", out.Outcome, out.Failure)
	}
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.Equal(t, oncekey.ErrTypeExpired, appErr.Type())
	require.True(t, appErr.NonRetryable())
}

// An unknown record past its retention is not purged: nobody knows what happened, so it waits for
// a person like any other, and the resolution is recorded (and its retention counts from then).
func TestAdversarialUnknownRecordPastRetentionIsKept(t *testing.T) {
	env, store, skew := setupSkewed(t)
	unknownRecord(t, store)
	*skew = 2 * time.Hour
	res, err := store.Purge(context.Background(), &oncekeystore.PurgeParams{})
	require.NoError(t, err)
	require.Zero(t, res.Tombstoned, "an unknown outcome never expires unresolved")
	require.EqualValues(t, 1, res.Unsettled)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(reconcile.SignalName, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, ResolvedBy: "hana"})
	}, 10*time.Minute)
	env.ExecuteWorkflow(reconcile.WorkflowName, input)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out reconcile.Output
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, reconcile.Applied, out.Outcome)
	rec, err := store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.True(t, rec.ExpiresAt.After(rec.UpdatedAt), "retention counts from the resolution")
}

// A tombstone (of a settled record, or one written before unsettled records were kept) keeps no
// outcome: the reconciliation must not report it as a definite failure (which tells the caller
// no effect landed), and ends instead of waiting forever for a resolution it can never record.
func TestAdversarialTombstoneIsNotAFailure(t *testing.T) {
	env, store, skew := setupSkewed(t)
	res, err := store.Claim(context.Background(), &oncekeystore.ClaimParams{Tenant: "t1", OperationKey: "ok1_k", Tool: "CreateTicket", Fingerprint: "fp",
		WorkflowID: "wf", StepID: "create_ticket", Effect: oncekey.Effectful, Lease: time.Minute, Retention: time.Hour, Tombstone: 24 * time.Hour})
	require.NoError(t, err)
	_, err = store.Complete(context.Background(), &oncekeystore.CompleteParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: res.Record.Epoch, Status: oncekeystore.StatusApplied})
	require.NoError(t, err)
	*skew = 2 * time.Hour
	pr, err := store.Purge(context.Background(), &oncekeystore.PurgeParams{})
	require.NoError(t, err)
	require.EqualValues(t, 1, pr.Tombstoned)
	env.ExecuteWorkflow(reconcile.WorkflowName, input)
	requireUndecided(t, env)
}
