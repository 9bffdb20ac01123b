package workflows_test

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/decisionsig"
	"github.com/oncekey/oncekey/internal/activities"
	"github.com/oncekey/oncekey/internal/workflows"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// An unsigned decision sent to the approval workflow of a worker with a trust list: the update is
// refused as every refusal of it is (reconcile.ErrTypeDecisionRefused), with one detail, the
// activity's oncekey.ErrTypeSignatureRefused, and a message that says what to sign it with;
// nothing is recorded and the workflow keeps waiting, and a decision signed by a trusted key
// then decides it. The detail is what reconcile.Decide reads as DecisionRefusedError.Signature:
// CHANGING IT IS A BREAKING CHANGE.
func TestApprovalUpdateRefusedForItsSignature(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: reconcile.ApprovalWorkflowID(approvalInput.OperationKey)})
	store := memstore.New(&memstore.Options{Clock: env.Now})
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	ada, err := decisionsig.NewEd25519Signer(priv)
	require.NoError(t, err)
	tl, err := decisionsig.NewTrustList(decisionsig.Entry{PublicKey: ada.Public(), Name: "ada", Tenants: []string{"t1"}, Tools: []string{"Refund"},
		Kinds: []decisionsig.Kind{decisionsig.Approve}})
	require.NoError(t, err)
	acts, err := activities.NewWithOptions(store, activities.Options{Registry: oncekey.NewRegistry(), TrustList: tl})
	require.NoError(t, err)
	acts.Register(env)
	workflows.Register(env)
	ap := askAsWorker(t, store, approvalInput)

	approve := reconcile.Decision{Decision: reconcile.Approve, Tenant: "t1", Episode: 1, DecidedBy: "ada", RequestID: "u-unsigned"}
	var unsigned, signed decideResult
	var refused error // the handler's: the validator accepts an unsigned decision, the activity refuses it
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(reconcile.DecideUpdateName, "u-unsigned", &testsuite.TestUpdateCallback{
			OnAccept:   func() { unsigned.accepted = true },
			OnReject:   func(err error) { unsigned.rejected = err },
			OnComplete: func(_ any, err error) { refused = err },
		}, approve)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, oncekeystore.ApprovalPending, approvalOf(t, store).Status, "a refusal writes nothing")
		require.Equal(t, reconcile.ApprovalStateWaiting, queryApproval(t, env).State)
		d, err := reconcile.SignDecision(ada, ap, approve)
		require.NoError(t, err)
		d.RequestID = "u-signed"
		sendDecision(env, "u-signed", d, &signed)
	}, 2*time.Minute)
	out := runApproval(t, env, approvalInput)

	var appErr *temporal.ApplicationError
	require.NoError(t, unsigned.rejected)
	require.True(t, errors.As(refused, &appErr), "got %v", refused)
	require.Equal(t, reconcile.ErrTypeDecisionRefused, appErr.Type(), "the update's refusal keeps its type")
	var detail string
	require.True(t, appErr.HasDetails())
	require.NoError(t, appErr.Details(&detail))
	require.Equal(t, "oncekey.SignatureRefused", detail)
	require.Equal(t, oncekey.ErrTypeSignatureRefused, detail)
	require.Contains(t, appErr.Error(), "decision refused (unsigned)")
	require.Contains(t, appErr.Error(), "Sign it with a key the workers' trust list holds for tenant t1, tool Refund: `oncekey approve ok1_a --tenant t1 --sign-key FILE`")
	require.Contains(t, appErr.Error(), "type: oncekey.SignatureRefused", "the activity's failure names its type")

	require.NoError(t, signed.rejected)
	require.Equal(t, oncekeystore.ApprovalApproved, out.Status)
	require.Equal(t, "ada", out.DecidedBy)
}
