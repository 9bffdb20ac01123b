// Package recordtest writes operation records and approvals into a store for tests, through the
// store's own protocol (claim, then complete or mark unknown; request approval), and has a log
// buffer safe to share with a server goroutine. It is imported by tests only, and must not
// import any oncekey package but the root one.
package recordtest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
)

// Fingerprint is the fingerprint Seed and Ask store: 64 hex digits.
var Fingerprint = strings.Repeat("ab", 32)

// UnknownFailure is the failure Seed stores on an unknown record when Record.Failure is nil.
const UnknownFailure = `{"message":"connection reset"}`

// Record is what Seed writes: the operation (tenant, workflow ID, step ID, tool) of namespace
// "default", left in Status.
type Record struct {
	Tenant, WorkflowID, StepID, Tool string
	// Status is applied, unknown or pending (claimed, its one-minute lease running).
	Status oncekeystore.Status
	// Result is an applied record's result; its effect reference is "REF-" + StepID.
	Result []byte
	// Failure is an unknown record's failure. Defaults to UnknownFailure.
	Failure []byte
}

// operationKey is the operation key of (tenant, wf, step, tool) under an effectful policy.
func operationKey(t testing.TB, tenant, wf, step, tool string) string {
	t.Helper()
	op := oncekey.Operation{Namespace: "default", Tenant: tenant, WorkflowID: wf, StepID: step, Tool: tool}
	k, err := oncekey.Key(oncekey.Policy{Effect: oncekey.Effectful}, op)
	require.NoError(t, err)
	return k
}

// Seed claims r's operation in s at a fresh epoch (lease one minute, retention and tombstone one
// hour) and leaves it in r.Status; it returns the operation key and the epoch. It fails the test
// on any store error or when the operation was already claimed.
func Seed(t testing.TB, s oncekeystore.Store, r Record) (key string, epoch int64) {
	t.Helper()
	ctx := context.Background()
	k := operationKey(t, r.Tenant, r.WorkflowID, r.StepID, r.Tool)
	cr, err := s.Claim(ctx, &oncekeystore.ClaimParams{
		Tenant: r.Tenant, OperationKey: k, Tool: r.Tool, Fingerprint: Fingerprint,
		WorkflowID: r.WorkflowID, StepID: r.StepID, Effect: oncekey.Effectful,
		Lease: time.Minute, Retention: time.Hour, Tombstone: time.Hour,
	})
	require.NoError(t, err)
	require.True(t, cr.Acquired, "the operation was not claimed before")
	epoch = cr.Record.Epoch
	switch r.Status {
	case oncekeystore.StatusApplied:
		_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: r.Tenant, OperationKey: k, Epoch: epoch,
			Status: oncekeystore.StatusApplied, Result: r.Result, EffectReference: "REF-" + r.StepID})
	case oncekeystore.StatusUnknown:
		failure := r.Failure
		if failure == nil {
			failure = []byte(UnknownFailure)
		}
		_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: r.Tenant, OperationKey: k, Epoch: epoch, Failure: failure})
	case oncekeystore.StatusPending:
	default:
		t.Fatalf("recordtest.Seed: status %q is not applied, unknown or pending", r.Status)
	}
	require.NoError(t, err)
	return k, epoch
}

// Ask asks s for approval of the operation (tenant, wf, step, tool) of namespace "default" with
// summary, as the approval workflow does (timeout one hour), and returns its key. It fails the
// test on a store error or when an approval was already asked for.
func Ask(t testing.TB, s oncekeystore.ApprovalStore, tenant, wf, step, tool, summary string) string {
	t.Helper()
	k := operationKey(t, tenant, wf, step, tool)
	res, err := s.RequestApproval(context.Background(), &oncekeystore.RequestApprovalParams{
		Tenant: tenant, OperationKey: k, Namespace: "default", Tool: tool, Fingerprint: Fingerprint,
		WorkflowID: wf, StepID: step, Summary: summary, Timeout: time.Hour,
	})
	require.NoError(t, err)
	require.True(t, res.Created, "no approval was asked for before")
	return k
}

// SyncBuffer is an io.Writer that a server goroutine may write while the test reads String;
// the zero value is empty and ready.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
