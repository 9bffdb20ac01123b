package activities_test

import (
	"context"
	"encoding/json"
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

// Every activity refuses, non-retryably and changing nothing, a record of another tool than the
// request names, and a record claimed in another namespace than the calling workflow's (the
// SDK's test environment runs in "default-test-namespace").
func TestActivitiesRefuseAForeignRecord(t *testing.T) {
	for _, c := range []struct {
		name, namespace, tool string
	}{
		{"another tool", "", "SendMoney"},
		{"another namespace", "prod", "CreateTicket"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := memstore.New(nil)
			ctx := context.Background()
			res, err := store.Claim(ctx, &oncekey.ClaimParams{Tenant: "t1", OperationKey: "ok1_f", Namespace: c.namespace, Tool: "CreateTicket", Fingerprint: "fp",
				Effect: oncekey.Effectful, Lease: time.Minute, Retention: time.Hour, Tombstone: time.Hour})
			require.NoError(t, err)
			_, err = store.MarkUnknown(ctx, &oncekey.MarkUnknownParams{Tenant: "t1", OperationKey: "ok1_f", Epoch: res.Record.Epoch})
			require.NoError(t, err)
			before, err := store.Get(ctx, &oncekey.GetParams{Tenant: "t1", OperationKey: "ok1_f"})
			require.NoError(t, err)
			acts, err := activities.New(store, oncekey.NewRegistry(), nil)
			require.NoError(t, err)
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			acts.Register(env)

			ref := activities.RecordRef{Tenant: "t1", OperationKey: "ok1_f", Tool: c.tool}
			for name, in := range map[string]any{
				activities.InspectName:     ref,
				activities.MarkUnknownName: activities.MarkUnknownInput{RecordRef: ref, Epoch: 1},
				activities.LookupReceiptName: activities.ReceiptInput{Epoch: 1, Request: oncekey.ReconcileRequest{
					Tenant: "t1", OperationKey: "ok1_f", Tool: c.tool}},
				activities.RecordResolutionName: activities.RecordInput{RecordRef: ref, Tool: c.tool, Resolution: reconcile.Resolution{
					Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":"FORGED"}`)}},
			} {
				_, err := env.ExecuteActivity(name, in)
				var appErr *temporal.ApplicationError
				require.ErrorAs(t, err, &appErr, name)
				require.Equal(t, activities.ErrTypeForeignRecord, appErr.Type(), name)
				require.True(t, appErr.NonRetryable(), name)
			}
			after, err := store.Get(ctx, &oncekey.GetParams{Tenant: "t1", OperationKey: "ok1_f"})
			require.NoError(t, err)
			require.Equal(t, before, after, "the record is unchanged")
		})
	}
}
