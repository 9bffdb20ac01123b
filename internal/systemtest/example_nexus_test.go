package systemtest_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporalnexus"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/worker"
)

type NexusRefundRequest struct {
	OrderID string `json:"order_id"`
	Cents   int64  `json:"cents"`
}

type NexusRefund struct {
	ID string `json:"id"`
}

// refundAtPSP stands for the payment provider's API, which takes the operation key as its
// Idempotency-Key.
func refundAtPSP(_ context.Context, key string, in NexusRefundRequest) (NexusRefund, error) {
	return NexusRefund{ID: "re_" + in.OrderID + "_" + key[:8]}, nil
}

// IssueRefund is an activity of the workflow behind the asynchronous operation.
func IssueRefund(ctx context.Context, in NexusRefundRequest) (NexusRefund, error) {
	key, _ := oncekey.OperationKey(ctx)
	return refundAtPSP(ctx, key, in)
}

// RefundWorkflow backs the asynchronous operation: its Effectful activity is protected as in any
// workflow.
func RefundWorkflow(ctx workflow.Context, in NexusRefundRequest) (NexusRefund, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var r NexusRefund
	err := workflow.ExecuteActivity(oncekey.WithStepID(ctx, "refund"), IssueRefund, in).Get(ctx, &r)
	return r, err
}

// A Nexus service with two operations. The synchronous "refund" performs its effect in its
// handler: its name gets a policy, and the worker's interceptor claims it like an activity, keyed
// by the caller's key (the oncekey-key header, set for a workflow's call made with WithStepID) or
// the Nexus request ID, the operation's name and its material input. The asynchronous
// "refund-later" starts RefundWorkflow: no policy for the operation, since the workflow's ID
// deduplicates its start and its own tools (IssueRefund) carry their policies.
func Example_nexusOperations() {
	reg := oncekey.NewRegistry()
	if err := oncekey.SetTool[NexusRefundRequest](reg, "refund", oncekey.Policy{Effect: oncekey.Effectful}); err != nil {
		log.Fatal(err)
	}
	if err := reg.Set(IssueRefund, oncekey.Policy{Effect: oncekey.Effectful}); err != nil {
		log.Fatal(err)
	}
	svc := nexus.NewService("payments")
	refund := nexus.NewSyncOperation("refund", func(ctx context.Context, in NexusRefundRequest, _ nexus.StartOperationOptions) (NexusRefund, error) {
		key, _ := oncekey.OperationKey(ctx)
		return refundAtPSP(ctx, key, in)
	})
	refundLater := temporalnexus.NewWorkflowRunOperation("refund-later", RefundWorkflow,
		func(_ context.Context, in NexusRefundRequest, _ nexus.StartOperationOptions) (client.StartWorkflowOptions, error) {
			return client.StartWorkflowOptions{ID: "refund-" + in.OrderID}, nil
		})
	if err := svc.Register(refund, refundLater); err != nil {
		log.Fatal(err)
	}
	plugin, err := worker.NewPlugin(worker.Options{Store: memstore.New(nil), Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(client.Options{Plugins: []client.Plugin{plugin}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w := sdkworker.New(c, "payments", sdkworker.Options{})
	w.RegisterNexusService(svc)
	w.RegisterWorkflow(RefundWorkflow)
	w.RegisterActivity(IssueRefund)
	if err := w.Run(sdkworker.InterruptCh()); err != nil {
		log.Fatal(err)
	}
}

// CreateNexusEndpoint creates the Nexus endpoint name, which routes its callers' requests to the
// workers polling taskQueue in namespace, through the operator service; an endpoint that exists
// already is left as it is. An operator does it once per endpoint, before any caller calls it
// (`temporal operator nexus endpoint create` does the same); the tests create theirs with it.
func CreateNexusEndpoint(ctx context.Context, c client.Client, name, namespace, taskQueue string) error {
	_, err := c.OperatorService().CreateNexusEndpoint(ctx, &operatorservice.CreateNexusEndpointRequest{
		Spec: &nexuspb.EndpointSpec{
			Name: name,
			Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{
				Worker: &nexuspb.EndpointTarget_Worker{Namespace: namespace, TaskQueue: taskQueue},
			}},
		},
	})
	var exists *serviceerror.AlreadyExists
	if errors.As(err, &exists) {
		return nil
	}
	return err
}

// RefundCallerWorkflow calls the synchronous refund through the endpoint "payments". The
// server sends the start to the handler; each request times out after the server's Nexus request
// timeout (10 s by default), and the server sends it again, with the same request ID and
// oncekey-key header, until the operation's ScheduleToCloseTimeout: that timeout is what leaves
// room for the retry that replays a result the first request did not bring back.
func RefundCallerWorkflow(ctx workflow.Context, in NexusRefundRequest) (NexusRefund, error) {
	c := workflow.NewNexusClient("payments", "payments")
	var r NexusRefund
	err := c.ExecuteOperation(oncekey.WithStepID(ctx, "refund"), "refund", in,
		workflow.NexusOperationOptions{ScheduleToCloseTimeout: 5 * time.Minute}).Get(ctx, &r)
	return r, err
}

// The endpoint that routes the callers of the payments service to the worker above: created
// once, by an operator, before the callers' first call.
func Example_nexusEndpoint() {
	c, err := client.Dial(client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := CreateNexusEndpoint(context.Background(), c, "payments", "default", "payments"); err != nil {
		log.Fatal(err)
	}
}
