package oncekey_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
)

func TestApprovalNearDeadline(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	a := &oncekeystore.Approval{Status: oncekeystore.ApprovalPending, RequestedAt: at, Deadline: at.Add(4 * time.Hour)}
	require.False(t, a.NearDeadline(at.Add(2*time.Hour)))
	require.False(t, a.NearDeadline(at.Add(3*time.Hour-time.Second)))
	require.True(t, a.NearDeadline(at.Add(3*time.Hour)), "the last quarter of its wait")
	require.False(t, a.NearDeadline(at.Add(4*time.Hour)), "past its deadline it reads timed out")
	a.Status = oncekeystore.ApprovalApproved
	require.False(t, a.NearDeadline(at.Add(3*time.Hour+time.Minute)), "decided")
}

func TestApprovalEscalationPolicy(t *testing.T) {
	require.Equal(t, oncekey.DefaultApprovalTimeout, (&oncekey.ApprovalPolicy{}).RequestTimeout())
	p := &oncekey.ApprovalPolicy{Timeout: time.Hour, Escalation: &oncekey.ApprovalEscalation{To: "leads", Timeout: 2 * time.Hour}}
	require.Equal(t, 3*time.Hour, p.RequestTimeout())
	reg := oncekey.NewRegistry()
	for _, e := range []*oncekey.ApprovalEscalation{{To: "leads"}, {Timeout: time.Hour}, {To: " ", Timeout: time.Hour}} {
		err := reg.SetAs("Refund", issueRefund, oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{Escalation: e}})
		var pe *oncekey.PolicyError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "Approval.Escalation", pe.Field)
	}
	require.NoError(t, reg.SetAs("Refund", issueRefund, oncekey.Policy{Effect: oncekey.Effectful, Approval: p}))
}

func TestApprovalSignersPolicy(t *testing.T) {
	require.Equal(t, 1, (&oncekey.ApprovalPolicy{}).RequiredSigners())
	require.Equal(t, 2, (&oncekey.ApprovalPolicy{Signers: 2}).RequiredSigners())
	reg := oncekey.NewRegistry()
	err := reg.SetAs("Refund", issueRefund, oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{Signers: -1}})
	var pe *oncekey.PolicyError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "Approval.Signers", pe.Field)
	require.NoError(t, reg.SetAs("Refund", issueRefund, oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{Signers: 2}}))
}
