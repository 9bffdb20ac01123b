package worker_test

import (
	"context"
	"log"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporalnexus"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/interceptor"
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
	plugin, err := worker.NewPlugin(interceptor.Options{Store: memstore.New(nil), Registry: reg})
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
