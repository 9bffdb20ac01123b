package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// The workflow ID scheme is persisted in running workflows: changing it strands every open
// reconciliation. This test pins it.
func TestWorkflowIDPinned(t *testing.T) {
	require.Equal(t, "oncekey-reconcile-ok1_abc", reconcile.WorkflowID("ok1_abc"))
	require.Equal(t, "oncekey.resolve", reconcile.SignalName)
	require.Equal(t, "oncekey.status", reconcile.QueryName)
	require.Equal(t, "oncekey.Reconcile", reconcile.WorkflowName)
}

// The approval workflow's names are persisted in running workflows and in the JSON people send:
// changing them strands every pending approval. This test pins them.
func TestApprovalNamesPinned(t *testing.T) {
	require.Equal(t, "oncekey-approval-ok1_abc", reconcile.ApprovalWorkflowID("ok1_abc"))
	require.Equal(t, "oncekey.Approval", reconcile.ApprovalWorkflowName)
	require.Equal(t, "oncekey.decide", reconcile.DecideUpdateName)
	require.Equal(t, "oncekey.decide", reconcile.DecideSignalName)
	require.Equal(t, "oncekey.approval", reconcile.ApprovalQueryName)
	b, err := json.Marshal(reconcile.Decision{Decision: reconcile.Deny, Tenant: "acme", Episode: 2, DecidedBy: "alice", Reason: "no", RequestID: "r1"})
	require.NoError(t, err)
	require.JSONEq(t, `{"decision":"deny","tenant":"acme","episode":2,"decided_by":"alice","reason":"no","request_id":"r1"}`, string(b))
}

func TestDecisionValidate(t *testing.T) {
	var inv *reconcile.InvalidDecisionError
	for name, d := range map[string]reconcile.Decision{
		"unknown decision":  {Decision: "maybe", Tenant: "acme"},
		"no tenant":         {Decision: reconcile.Approve},
		"negative episode":  {Decision: reconcile.Approve, Tenant: "acme", Episode: -1},
		"deny without why":  {Decision: reconcile.Deny, Tenant: "acme", Reason: "  "},
		"NUL in reason":     {Decision: reconcile.Deny, Tenant: "acme", Reason: "a\x00b"},
		"bad UTF-8 decider": {Decision: reconcile.Approve, Tenant: "acme", DecidedBy: "ops\xff"},
		"long reason":       {Decision: reconcile.Deny, Tenant: "acme", Reason: strings.Repeat("n", reconcile.MaxNoteBytes+1)},
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorAs(t, d.Validate(), &inv)
		})
	}
	require.NoError(t, reconcile.Decision{Decision: reconcile.Approve, Tenant: "acme"}.Validate())
	require.NoError(t, reconcile.Decision{Decision: reconcile.Deny, Tenant: "acme", Episode: 3, Reason: "over budget"}.Validate())
	_, err := reconcile.Decide(context.Background(), nil, "ok1_k", reconcile.Decision{Decision: reconcile.Deny, Tenant: "acme"})
	require.ErrorAs(t, err, &inv, "refused before anything is sent")
}

func TestValidate(t *testing.T) {
	var inv *reconcile.InvalidResolutionError
	for name, r := range map[string]reconcile.Resolution{
		"unknown outcome":       {Outcome: "maybe"},
		"empty outcome":         {},
		"result on not-applied": {Outcome: reconcile.NotApplied, Result: json.RawMessage(`{}`)},
		"bad json":              {Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":`)},
		"NUL in note":           {Outcome: reconcile.Failed, Note: "downstream said: a\x00b"},
		"NUL in reference":      {Outcome: reconcile.Applied, EffectReference: "CH\x00"},
		"bad UTF-8 resolver":    {Outcome: reconcile.NotApplied, ResolvedBy: "ops\xff"},
		"long reference":        {Outcome: reconcile.Applied, EffectReference: strings.Repeat("r", oncekey.MaxEffectReferenceBytes+1)},
		"long note":             {Outcome: reconcile.Failed, Note: strings.Repeat("n", reconcile.MaxNoteBytes+1)},
		"long resolver":         {Outcome: reconcile.Failed, ResolvedBy: strings.Repeat("p", reconcile.MaxResolvedByBytes+1)},
	} {
		t.Run(name, func(t *testing.T) {
			err := r.Validate()
			require.ErrorAs(t, err, &inv)
		})
	}
	require.NoError(t, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied}.Validate())
	require.NoError(t, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(` {"id": "T-1"} `)}.Validate())
	require.NoError(t, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Failed, Note: "voided"}.Validate())
	require.NoError(t, reconcile.Resolution{Epoch: 1, Outcome: reconcile.Applied, EffectReference: strings.Repeat("é", oncekey.MaxEffectReferenceBytes/2),
		Note: strings.Repeat("n", reconcile.MaxNoteBytes), ResolvedBy: strings.Repeat("p", reconcile.MaxResolvedByBytes)}.Validate(), "limits are inclusive, in bytes")
}

type Ticket struct {
	ID  string `json:"id"`
	Seq int    `json:"seq"`
}

func TestEncodeResultDecodesIntoDeclaredType(t *testing.T) {
	for name, dc := range map[string]converter.DataConverter{
		"default": converter.GetDefaultDataConverter(),
		"zlib codec": converter.NewCodecDataConverter(converter.GetDefaultDataConverter(),
			converter.NewZlibCodec(converter.ZlibCodecOptions{AlwaysEncode: true})),
	} {
		t.Run(name, func(t *testing.T) {
			b, err := reconcile.EncodeResult(dc, json.RawMessage(`{"id":"T-7","seq":7}`))
			require.NoError(t, err)
			ps := &commonpb.Payloads{}
			require.NoError(t, proto.Unmarshal(b, ps))
			var got Ticket
			require.NoError(t, dc.FromPayloads(ps, &got))
			require.Equal(t, Ticket{ID: "T-7", Seq: 7}, got)
		})
	}
	b, err := reconcile.EncodeResult(nil, nil)
	require.NoError(t, err)
	require.Nil(t, b)
}

func unknownRecord(t *testing.T, s oncekeystore.Store, key string) {
	t.Helper()
	ctx := context.Background()
	res, err := s.Claim(ctx, &oncekeystore.ClaimParams{Tenant: "t1", OperationKey: key, Tool: "CreateTicket", Fingerprint: "fp",
		WorkflowID: "wf", StepID: "s", Effect: oncekey.Effectful, Lease: time.Minute, Retention: time.Hour, Tombstone: time.Hour})
	require.NoError(t, err)
	_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: "t1", OperationKey: key, Epoch: res.Record.Epoch})
	require.NoError(t, err)
}

func TestRecordAndList(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(nil)
	unknownRecord(t, s, "ok1_a")
	unknownRecord(t, s, "ok1_b")
	unknownRecord(t, s, "ok1_c")

	page, err := reconcile.List(ctx, s, oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, page.Records, 3)

	rec, err := reconcile.Record(ctx, s, nil, "t1", "ok1_a", reconcile.Resolution{
		Epoch: 1, Outcome: reconcile.Applied, Result: json.RawMessage(`{"id":"T-1","seq":1}`), EffectReference: "T-1", ResolvedBy: "alice", Note: "seen in the helpdesk",
	})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Equal(t, "alice", rec.ResolvedBy)
	require.Equal(t, "T-1", rec.EffectReference)
	ps := &commonpb.Payloads{}
	require.NoError(t, proto.Unmarshal(rec.Result, ps))
	var got Ticket
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(ps, &got))
	require.Equal(t, Ticket{ID: "T-1", Seq: 1}, got)

	rec, err = reconcile.Record(ctx, s, nil, "t1", "ok1_b", reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied, ResolvedBy: "bob"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusReleased, rec.Status)

	rec, err = reconcile.Record(ctx, s, nil, "t1", "ok1_c", reconcile.Resolution{Epoch: 1, Outcome: reconcile.Failed, Note: "voided"})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusFailed, rec.Status)
	require.Contains(t, string(rec.Failure), "voided")

	page, err = reconcile.List(ctx, s, oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Empty(t, page.Records, "nothing is waiting any more")

	// A second decision on a settled record is refused by the store and changes nothing.
	_, err = reconcile.Record(ctx, s, nil, "t1", "ok1_a", reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied})
	var conflict *oncekeystore.StatusConflictError
	require.ErrorAs(t, err, &conflict)
	_, err = reconcile.Record(ctx, s, nil, "t1", "ok1_missing", reconcile.Resolution{Epoch: 1, Outcome: reconcile.NotApplied})
	require.True(t, errors.Is(err, oncekeystore.ErrNotFound))
	var inv *reconcile.InvalidResolutionError
	_, err = reconcile.Record(ctx, s, nil, "t1", "ok1_a", reconcile.Resolution{Epoch: 1, Outcome: "maybe"})
	require.ErrorAs(t, err, &inv)
}

// A resolution must name the epoch it was decided on.
func TestValidateNeedsEpoch(t *testing.T) {
	var inv *reconcile.InvalidResolutionError
	require.ErrorAs(t, reconcile.Resolution{Outcome: reconcile.NotApplied}.Validate(), &inv)
	require.Equal(t, "Epoch", inv.Field)
	require.ErrorAs(t, reconcile.Resolution{Outcome: reconcile.NotApplied, Epoch: -1}.Validate(), &inv)
	require.Equal(t, "Epoch", inv.Field)
}
