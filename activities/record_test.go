package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/activities"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/reconcile"
)

type Ticket struct {
	ID string `json:"id"`
}

func CreateTicket(ctx context.Context, title string) (Ticket, error) { return Ticket{ID: title}, nil }

// unknownRecordEnv puts an unknown record (tenant t1, key ok1_k, tool CreateTicket) into store
// and returns an activity environment with the activities on store registered.
func unknownRecordEnv(t *testing.T, store oncekey.Store) *testsuite.TestActivityEnvironment {
	t.Helper()
	ctx := context.Background()
	res, err := store.Claim(ctx, &oncekey.ClaimParams{Tenant: "t1", OperationKey: "ok1_k", Tool: "CreateTicket", Fingerprint: "fp",
		WorkflowID: "wf", StepID: "s", Effect: oncekey.Effectful, Lease: time.Minute, Retention: time.Hour, Tombstone: time.Hour})
	require.NoError(t, err)
	_, err = store.MarkUnknown(ctx, &oncekey.MarkUnknownParams{Tenant: "t1", OperationKey: "ok1_k", Epoch: res.Record.Epoch})
	require.NoError(t, err)
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	acts, err := activities.New(store, reg, nil)
	require.NoError(t, err)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	acts.Register(env)
	return env
}

// RecordResolution without the tool's name (input from a reconciliation workflow started before
// the field existed) reads it from the record and still refuses a result of the wrong type,
// leaving the record unknown.
func TestRecordResolutionChecksTheResultTypeFromTheRecord(t *testing.T) {
	store := memstore.New(nil)
	env := unknownRecordEnv(t, store)
	ctx := context.Background()

	in := activities.RecordInput{RecordRef: activities.RecordRef{Tenant: "t1", OperationKey: "ok1_k"},
		Resolution: reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`["T-1"]`)}}
	_, err := env.ExecuteActivity(activities.RecordResolutionName, in)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activities.ErrTypeInvalid, appErr.Type())
	require.True(t, appErr.NonRetryable())
	rec, err := store.Get(ctx, &oncekey.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, oncekey.StatusUnknown, rec.Status)

	in.Resolution.Result = json.RawMessage(`{"id":"T-1"}`)
	v, err := env.ExecuteActivity(activities.RecordResolutionName, in)
	require.NoError(t, err)
	var out reconcile.Output
	require.NoError(t, v.Get(&out))
	require.Equal(t, reconcile.Applied, out.Outcome)
}

// A resolution the store refuses (here a result over its size limit, which Resolution.Validate
// cannot know) is refused for good, not retried: a retried RecordResolution would keep the
// reconciliation workflow from ever reading a corrected signal. The record stays unknown.
func TestRecordResolutionRefusedByTheStoreIsNotRetried(t *testing.T) {
	store := memstore.New(&memstore.Options{MaxResultBytes: 64})
	env := unknownRecordEnv(t, store)
	ctx := context.Background()

	in := activities.RecordInput{RecordRef: activities.RecordRef{Tenant: "t1", OperationKey: "ok1_k"},
		Resolution: reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":"` + strings.Repeat("x", 100) + `"}`)}}
	_, err := env.ExecuteActivity(activities.RecordResolutionName, in)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activities.ErrTypeInvalid, appErr.Type())
	require.True(t, appErr.NonRetryable(), "%v", err)
	rec, err := store.Get(ctx, &oncekey.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, oncekey.StatusUnknown, rec.Status)
}
