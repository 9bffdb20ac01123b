package main

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/worker"
)

// RefundArgs is the input of the edit test's Refund tool.
type RefundArgs struct {
	Order string `json:"order"`
	Cents int64  `json:"cents"`
}

// refunds is the edit test's downstream: the amounts it refunded.
type refunds struct {
	mu   sync.Mutex
	paid []int64
}

func (r *refunds) Refund(_ context.Context, in RefundArgs) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paid = append(r.paid, in.Cents)
	return fmt.Sprintf("RF-%s-%d", in.Order, in.Cents), nil
}

func refundWorkflow(ctx workflow.Context, in RefundArgs) (string, error) {
	ctx = oncekey.WithStepID(ctx, "refund")
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, "Refund", in).Get(ctx, &out)
	return out, err
}

// approve --args runs the call with the edited arguments, once: the CLI prints the edit's key,
// show links the two approvals, and an edit the tool's input type does not take is refused with
// the worker's reason (exit 1) and the approval keeps waiting.
func TestApproveWithEditedArguments(t *testing.T) {
	needsServices(t)
	c, url, env := workerEnv(t, "ines")
	s, _ := migratedAt(t, url)
	r := &refunds{}
	reg := oncekey.NewRegistry()
	require.NoError(t, reg.SetAs("Refund", r.Refund, oncekey.Policy{Effect: oncekey.Effectful, Approval: &oncekey.ApprovalPolicy{}}))
	plugin, err := worker.NewPlugin(worker.Options{Store: s, Registry: reg, DataConverter: converter.GetDefaultDataConverter()})
	require.NoError(t, err)
	tq := "cli-edit-" + t.Name()
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	w.RegisterWorkflowWithOptions(refundWorkflow, workflow.RegisterOptions{Name: "RefundFlow"})
	w.RegisterActivityWithOptions(r.Refund, activity.RegisterOptions{Name: "Refund"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "refund-" + t.Name(), TaskQueue: tq, WorkflowExecutionTimeout: 3 * time.Minute},
		"RefundFlow", RefundArgs{Order: "O-1", Cents: 19000})
	require.NoError(t, err)
	ap := waitingApproval(t, c, env)

	res := cli(t, env, "approve", ap.OperationKey, "--args", `{"order":"O-1","cents":"9500"}`)
	require.Equal(t, exitFailed, res.code, res.stdout+res.stderr)
	require.Contains(t, res.stderr, "do not decode into")
	res = cli(t, env, "approve", ap.OperationKey, "--reason", "half, as agreed", "--args", `{"order":"O-1","cents":9500}`)
	require.Equal(t, 0, res.code, res.stderr)
	require.Regexp(t, `the workflow answered: replaced, by ines, at \S+Z, reason: half, as agreed`, res.stdout)
	m := regexp.MustCompile(`the call runs with the edited arguments as (ok1_[0-9a-f]{64})`).FindStringSubmatch(res.stdout)
	require.NotNil(t, m, res.stdout)
	edit := m[1]

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out string
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, "RF-O-1-9500", out)
	r.mu.Lock()
	require.Equal(t, []int64{9500}, r.paid, "one refund, at the edited amount")
	r.mu.Unlock()

	res = cli(t, env, "show", ap.OperationKey)
	require.Equal(t, 0, res.code, res.stderr)
	require.Regexp(t, `(?m)^approval\s+replaced, episode 1$`, res.stdout)
	require.Regexp(t, `(?m)^replaced by the edit\s+`+edit, res.stdout)
	res = cli(t, env, "show", edit)
	require.Equal(t, 0, res.code, res.stderr)
	require.Regexp(t, `(?m)^status\s+applied$`, res.stdout)
	require.Regexp(t, `(?m)^edit of\s+`+ap.OperationKey, res.stdout)
}
