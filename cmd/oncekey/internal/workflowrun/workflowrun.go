// Package workflowrun says how a decision protocol's workflow stands, for the CLI's and the
// inbox's messages: whether it runs, is missing or closed (Describe), and what a decision
// delivered to it but not confirmed in time needs to land (Unconfirmed). It must not import any
// oncekey package but internal/shell.
package workflowrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/internal/shell"
)

// askWait bounds the two questions Unconfirmed asks Temporal.
const askWait = 3 * time.Second

// Unconfirmed says, for a decision delivered to workflow id (what names it: "reconciliation
// workflow") that did not confirm it in time, which task queue a worker must run for it to land
// (quoted as one shell word), or that no worker polled that queue for minutes, and that it lands
// once one runs with no need to send it again. It is a lower-case clause without a final period:
// "a worker must be running task queue q (the reconciliation workflow's) for it to land; it is
// taken once a worker runs the workflow, with no need to send it again". It asks Temporal for at
// most 3s, and not past ctx; trouble asking leaves the task queue out.
func Unconfirmed(ctx context.Context, c client.Client, id, what string) string {
	return need(ctx, c, id, what) + "; it is taken once a worker runs the workflow, with no need to send it again"
}

// need is Unconfirmed's first part: what a worker must do for the decision to land.
func need(ctx context.Context, c client.Client, id, what string) string {
	ctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	var tq string
	if desc, err := c.DescribeWorkflow(ctx, id, ""); err == nil {
		tq = desc.RawResponse.GetWorkflowExecutionInfo().GetTaskQueue()
	}
	if tq == "" {
		return "a worker must be running the " + what + "'s task queue for it to land"
	}
	// Temporal lists the pollers of the last minutes, so a worker just stopped still shows.
	if q, err := c.DescribeTaskQueue(ctx, tq, enumspb.TASK_QUEUE_TYPE_WORKFLOW); err == nil && len(q.GetPollers()) == 0 {
		return fmt.Sprintf("no worker has polled task queue %s (the %s's) for minutes: start one there for it to land", shell.Word(tq), what)
	}
	return fmt.Sprintf("a worker must be running task queue %s (the %s's) for it to land", shell.Word(tq), what)
}

// Run is how a workflow stands, as DescribeWorkflowExecution tells. Temporal answers queries of a
// closed workflow while its history is kept, so a query alone cannot tell a waiting workflow from
// one that has ended.
type Run struct {
	// Missing: no such workflow exists (never started, or its history is no longer kept).
	Missing bool
	// Closed says how a workflow that has ended closed ("terminated", "timed out", "failed",
	// "completed", "canceled", "continued as new"), at ClosedAt; "" while it runs.
	Closed   string
	ClosedAt time.Time
}

// Describe asks Temporal how workflow id (its latest run) stands. An error is Temporal not
// answering; a missing workflow is Run.Missing, not an error.
func Describe(ctx context.Context, c client.Client, id string) (Run, error) {
	desc, err := c.DescribeWorkflow(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return Run{Missing: true}, nil
	case err != nil:
		return Run{}, err
	}
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	st := info.GetStatus()
	if st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return Run{}, nil
	}
	how := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_"), "_", " "))
	if how == "" || how == "unspecified" {
		how = "closed"
	}
	return Run{Closed: how, ClosedAt: info.GetCloseTime().AsTime()}, nil
}
