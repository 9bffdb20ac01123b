package oncekeytest

import (
	"context"
	"encoding/json"
	"errors"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/wire"
)

// callHeader is the activity header the kit's workflow side sets on each tool call it tracks, so
// that its activity side knows the call an attempt belongs to.
const callHeader = "oncekeytest-call"

// callMark is callHeader's value.
type callMark struct {
	WorkflowID string `json:"workflow_id"`
	Execution  int    `json:"execution"`
	Tool       string `json:"tool"`
	N          int    `json:"n"`
	Pass       int    `json:"pass"`
	Repeat     bool   `json:"repeat,omitempty"`
}

// errFailedBeforeBody and errCrashed are the errors of the attempts the kit kills. They name the
// kit, so a log or a test failure never passes them off as the tool's.
var (
	errFailedBeforeBody = errors.New("oncekeytest: injected failure before the tool's body ran (FailBeforeBody)")
	errCrashed          = errors.New("oncekeytest: injected crash after the tool's body returned; its result is lost (CrashMidBody)")
)

// timeOut ends an attempt as one whose answer never reaches the server: on the test
// environment at once, with the failure Temporal reports when the start-to-close timeout runs
// out; on a server by waiting for the timeout (the attempt's context ends), so that the server
// times the attempt out itself.
func (k *Kit) timeOut(ctx context.Context, f Fault) (any, error) {
	if k.cfg.Client != nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, errors.New("oncekeytest: injected "+f.String()))
}

// outer is the kit's interceptor outside oncekey's on the activity side (the first of the
// worker's interceptors): it loses answers and stalls attempts.
type outer struct {
	interceptor.WorkerInterceptorBase
	k *Kit
}

// inner is the last of the worker's interceptors: inside oncekey's on the activity side, where
// it fails attempts before the body and crashes them after it; outside oncekey's on the
// workflow side (an outbound call passes the interceptors from the last to the first), where it
// counts calls, records what the workflow got and repeats calls.
type inner struct {
	interceptor.WorkerInterceptorBase
	k *Kit
}

func (i *inner) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &workflowInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, k: i.k}
}

func (o *outer) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityOuter{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, k: o.k}
}

func (i *inner) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityInner{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, k: i.k}
}

type workflowInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	k *Kit
}

func (w *workflowInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return w.Next.Init(&workflowOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, k: w.k, n: map[string]int{}})
}

type workflowOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	k *Kit
	// n counts the calls of each tool in this run, replayed ones included, so a call has the same
	// N on every replay.
	n map[string]int
}

// callDecision is what the workflow side records of a call: its per-call fault and its run.
type callDecision struct {
	Fault Fault `json:"fault"`
	Pass  int   `json:"pass"`
}

// repeatKey marks the context of a call the kit repeats (Repropose): its value is the call.
type repeatKey struct{}

func (w *workflowOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	k := w.k
	tool, doc, claimed, tracked := k.resolve(activityType, args)
	if !tracked {
		return w.Next.ExecuteActivity(ctx, activityType, args...)
	}
	info := workflow.GetInfo(ctx)
	live := !workflow.IsReplaying(ctx)
	var call Call
	repeat := false
	if c, ok := ctx.Value(repeatKey{}).(Call); ok {
		call, repeat = c, true
	} else {
		w.n[tool]++
		id := info.WorkflowExecution.ID
		call = Call{WorkflowID: id, Execution: k.execution(id), Tool: tool, N: w.n[tool]}
	}
	fault := NoFault
	if !repeat {
		// The plan's decision for the call, and the run it is in, are recorded in the history, so
		// that a replay (a reset run's, a worker's after a restart) makes the same commands.
		var d callDecision
		if err := workflow.SideEffect(ctx, func(workflow.Context) any {
			c := call
			c.Pass = k.pass(c.WorkflowID)
			return callDecision{Fault: k.callFault(c), Pass: c.Pass}
		}).Get(&d); err == nil {
			fault, call.Pass = d.Fault, d.Pass
		}
		if live {
			step, hasStep := oncekey.StepID(ctx)
			k.intend(call, doc, step, hasStep)
			if fault != NoFault {
				k.injected(call, fault)
			}
			if fault == Reset || fault == Rerun {
				k.wantPass(call, fault)
			}
		}
	}
	if h := interceptor.WorkflowHeader(ctx); h != nil {
		if pl, err := k.dc.ToPayload(callMark{WorkflowID: call.WorkflowID, Execution: call.Execution, Tool: tool, N: call.N, Pass: call.Pass, Repeat: repeat}); err == nil {
			h[callHeader] = pl
		}
	}
	fut := w.Next.ExecuteActivity(ctx, activityType, args...)
	f, s := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		var raw converter.RawValue
		err := fut.Get(gctx, &raw)
		if !workflow.IsReplaying(gctx) {
			k.read(call, repeat, claimed, raw, err)
		}
		if fault == Repropose {
			// As the workflow would schedule it: a new activity, through every interceptor.
			rctx := workflow.WithValue(gctx, repeatKey{}, call)
			err = workflow.ExecuteActivity(rctx, activityType, args...).Get(gctx, &raw)
		}
		settle(k.dc, s, raw, err)
	})
	return f
}

// settle settles s with what the attempt returned, re-encoded through the data converter so Get
// decodes it into the workflow's type.
func settle(dc converter.DataConverter, s workflow.Settable, raw converter.RawValue, err error) {
	switch {
	case err != nil:
		s.SetError(err)
	case raw.Payload() == nil:
		s.SetValue(nil)
	default:
		ps, err := dc.ToPayloads(raw)
		if err != nil {
			s.SetError(err)
			return
		}
		s.SetValue(ps)
	}
}

type activityOuter struct {
	interceptor.ActivityInboundInterceptorBase
	k *Kit
}

// attemptKey carries, from the outer activity interceptor to the inner, the attempt and the
// fault it meets.
type attemptKey struct{}

type attemptFault struct {
	call  Call
	fault Fault
}

func (a *activityOuter) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	h := interceptor.Header(ctx)
	if h == nil || h[callHeader] == nil || h[wire.HeaderCheck] != nil {
		// Not a tracked call, or oncekey's check after a timeout: it reads the record and runs
		// nothing, so no fault applies and it is no attempt.
		return a.Next.ExecuteActivity(ctx, in)
	}
	var m callMark
	if err := a.k.dc.FromPayload(h[callHeader], &m); err != nil {
		return a.Next.ExecuteActivity(ctx, in)
	}
	call := a.k.attempt(m)
	fault := a.k.attemptFault(call)
	if fault != NoFault {
		a.k.injected(call, fault)
	}
	switch fault {
	case Stall:
		return a.k.timeOut(ctx, fault)
	case LoseAnswer:
		_, _ = a.Next.ExecuteActivity(ctx, in)
		return a.k.timeOut(ctx, fault)
	case FailBeforeBody, CrashMidBody:
		ctx = context.WithValue(ctx, attemptKey{}, attemptFault{call: call, fault: fault})
	}
	return a.Next.ExecuteActivity(ctx, in)
}

type activityInner struct {
	interceptor.ActivityInboundInterceptorBase
	k *Kit
}

func (a *activityInner) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	af, ok := ctx.Value(attemptKey{}).(attemptFault)
	if !ok {
		return a.Next.ExecuteActivity(ctx, in)
	}
	key, _ := oncekey.OperationKey(ctx)
	switch af.fault {
	case FailBeforeBody:
		a.k.saw(key, af, NotApplied())
		return nil, errFailedBeforeBody
	case CrashMidBody:
		res, err := a.Next.ExecuteActivity(ctx, in)
		d := NotApplied()
		if err == nil {
			b, merr := json.Marshal(res)
			if merr == nil {
				d = Applied(json.RawMessage(b), "")
			}
		}
		a.k.saw(key, af, d)
		return nil, errCrashed
	}
	return a.Next.ExecuteActivity(ctx, in)
}
