package oncekeytest

import (
	"context"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// reset returns the function that resets the workflow id to the workflow task that scheduled
// the call a Reset names, on the server.
func (k *Kit) reset(id string) func(context.Context, Call) (client.WorkflowRun, error) {
	return func(ctx context.Context, c Call) (client.WorkflowRun, error) {
		cl := k.cfg.Client
		it := cl.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var finish int64
		for finish == 0 && it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return nil, fmt.Errorf("oncekeytest: read the history of %s to reset it: %w", id, err)
			}
			a := ev.GetActivityTaskScheduledEventAttributes()
			if a == nil {
				continue
			}
			pl := a.GetHeader().GetFields()[callHeader]
			var m callMark
			if pl == nil || k.dc.FromPayload(pl, &m) != nil {
				continue
			}
			if m.Tool == c.Tool && m.N == c.N && !m.Repeat {
				finish = a.GetWorkflowTaskCompletedEventId()
			}
		}
		if finish == 0 {
			return nil, fmt.Errorf("oncekeytest: the history of %s has no scheduled %s to reset to", id, c)
		}
		resp, err := cl.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
			Namespace:                 k.cfg.Namespace,
			WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: id},
			Reason:                    "oncekeytest: Reset before " + c.String(),
			WorkflowTaskFinishEventId: finish,
			RequestId:                 fmt.Sprintf("oncekeytest-%s-%d", id, time.Now().UnixNano()),
		})
		if err != nil {
			return nil, fmt.Errorf("oncekeytest: reset %s to before %s: %w", id, c, err)
		}
		return cl.GetWorkflow(ctx, id, resp.GetRunId()), nil
	}
}
