package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/testing/sealtest"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

type Ticket struct {
	ID string `json:"id"`
}

func CreateTicket(ctx context.Context, title string) (Ticket, error) { return Ticket{ID: title}, nil }

// unknownRecordActs puts an unknown record (tenant t1, key ok1_k, tool CreateTicket) into store
// and returns the activities on store, with CreateTicket's policy registered.
func unknownRecordActs(t *testing.T, store oncekeystore.Store) *activities.Activities {
	t.Helper()
	unknownRecord(t, store, "ok1_k", "")
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	acts, err := activities.New(store, reg, nil)
	require.NoError(t, err)
	return acts
}

// RecordResolution without the tool's name (input from a reconciliation workflow started before
// the field existed) reads it from the record and still refuses a result of the wrong type,
// leaving the record unknown.
func TestRecordResolutionChecksTheResultTypeFromTheRecord(t *testing.T) {
	store := memstore.New(nil)
	acts := unknownRecordActs(t, store)
	ctx := context.Background()

	in := activities.RecordInput{RecordRef: activities.RecordRef{Tenant: "t1", OperationKey: "ok1_k"},
		Resolution: reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`["T-1"]`)}}
	_, err := callFrom(t, acts, reconciliationOf("ok1_k"), activities.RecordResolutionName, in)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activities.ErrTypeInvalid, appErr.Type())
	require.True(t, appErr.NonRetryable())
	rec, err := store.Get(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)

	in.Resolution.Result = json.RawMessage(`{"id":"T-1"}`)
	v, err := callFrom(t, acts, reconciliationOf("ok1_k"), activities.RecordResolutionName, in)
	require.NoError(t, err)
	var out reconcile.Output
	require.NoError(t, json.Unmarshal(v, &out))
	require.Equal(t, reconcile.Applied, out.Outcome)
}

// A resolution the store refuses (here a result over its size limit, which Resolution.Validate
// cannot know) is refused for good, not retried: a retried RecordResolution would keep the
// reconciliation workflow from ever reading a corrected signal. The record stays unknown.
func TestRecordResolutionRefusedByTheStoreIsNotRetried(t *testing.T) {
	store := memstore.New(&memstore.Options{MaxResultBytes: 64})
	acts := unknownRecordActs(t, store)
	ctx := context.Background()

	in := activities.RecordInput{RecordRef: activities.RecordRef{Tenant: "t1", OperationKey: "ok1_k"},
		Resolution: reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":"` + strings.Repeat("x", 100) + `"}`)}}
	_, err := callFrom(t, acts, reconciliationOf("ok1_k"), activities.RecordResolutionName, in)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activities.ErrTypeInvalid, appErr.Type())
	require.True(t, appErr.NonRetryable(), "%v", err)
	rec, err := store.Get(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusUnknown, rec.Status)
}

// With a ResultSealer, a resolution's result is stored sealed to its record, and the activities
// hand it out opened; a plain result, or one moved from another record, is refused.
func TestActivitiesSealWhatTheyStoreAndOpenWhatTheyRead(t *testing.T) {
	store := memstore.New(nil)
	unknownRecord(t, store, "ok1_k", "")
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.Set(CreateTicket, oncekey.Policy{Effect: oncekey.Effectful}))
	acts, err := activities.NewWithOptions(store, activities.Options{Registry: reg, ResultSealer: sealtest.Binder{}})
	require.NoError(t, err)
	ctx := context.Background()

	ref := activities.RecordRef{Tenant: "t1", OperationKey: "ok1_k", Tool: "CreateTicket"}
	v, err := callFrom(t, acts, reconciliationOf("ok1_k"), activities.RecordResolutionName, activities.RecordInput{RecordRef: ref,
		Resolution: reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":"T-1"}`)}})
	require.NoError(t, err)
	var out reconcile.Output
	require.NoError(t, json.Unmarshal(v, &out))
	plain, err := reconcile.EncodeResult(nil, json.RawMessage(`{"id":"T-1"}`))
	require.NoError(t, err)
	require.Equal(t, plain, out.Result, "the output carries the result opened")
	rec, err := store.Get(ctx, &oncekeystore.GetParams{Tenant: "t1", OperationKey: "ok1_k"})
	require.NoError(t, err)
	require.True(t, oncekey.IsSealedResult(rec.Result), "stored sealed")

	v, err = callFrom(t, acts, reconciliationOf("ok1_k"), activities.InspectName, ref)
	require.NoError(t, err)
	var in activities.Inspection
	require.NoError(t, json.Unmarshal(v, &in))
	require.Equal(t, plain, in.Result)

	// ok1_j resolved applied with ok1_k's sealed bytes (a row moved), then with plain bytes.
	for _, result := range [][]byte{rec.Result, plain} {
		mem := memstore.New(nil)
		unknownRecord(t, mem, "ok1_j", "")
		_, err := mem.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: "t1", OperationKey: "ok1_j", Epoch: 1, Status: oncekeystore.StatusApplied, Result: result})
		require.NoError(t, err)
		acts, err := activities.NewWithOptions(mem, activities.Options{Registry: reg, ResultSealer: sealtest.Binder{}})
		require.NoError(t, err)
		_, err = callFrom(t, acts, reconciliationOf("ok1_j"), activities.InspectName, activities.RecordRef{Tenant: "t1", OperationKey: "ok1_j", Tool: "CreateTicket"})
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, oncekey.ErrTypeConfig, appErr.Type())
		require.True(t, appErr.NonRetryable())
		require.Contains(t, err.Error(), "ok1_j")
	}
}
