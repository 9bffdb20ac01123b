package desk

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
)

// Request is one support request from requests.jsonl.
type Request struct {
	ID         string     `json:"id"`
	CustomerID string     `json:"customer_id"`
	Channel    string     `json:"channel"`
	Subject    string     `json:"subject"`
	Body       string     `json:"body"`
	Priority   string     `json:"priority"`
	Refund     *RefundAsk `json:"refund,omitempty"`
}

// RefundAsk is the refund a request asks for.
type RefundAsk struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Reason      string `json:"reason"`
}

// ToolTimeout is a tool attempt's start-to-close timeout: the calls take well under a second, so
// a worker that died mid-call is noticed after this long.
const ToolTimeout = 8 * time.Second

// DefaultMaxTurns bounds the model calls of one request.
const DefaultMaxTurns = 12

// AgentInput is the agent workflow's input.
type AgentInput struct {
	Request Request `json:"request"`
	// Tenant keys the workflow's operations (oncekey.WithTenant).
	Tenant string `json:"tenant"`
	// MaxTurns bounds the model calls. Defaults to DefaultMaxTurns.
	MaxTurns int `json:"max_turns,omitempty"`
	// Plain marks a run on a worker without oncekey: the model reads what Temporal gives, the
	// tool's result or its error, with none of oncekey's labels or texts.
	Plain bool `json:"plain,omitempty"`
}

// Call is one tool call the model proposed and what came of it.
type Call struct {
	// Turn is the model call (1-based) that proposed it.
	Turn int `json:"turn"`
	// ID is the tool-call ID the model gave it.
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Arguments are the arguments as the model wrote them (a JSON text, valid or not).
	Arguments string  `json:"arguments"`
	Outcome   Outcome `json:"outcome"`
}

// AgentResult is the agent workflow's result.
type AgentResult struct {
	RequestID string `json:"request_id"`
	// Answer is the model's final answer ("" when the turns ran out).
	Answer string `json:"answer"`
	// Turns is the number of model calls.
	Turns int `json:"turns"`
	// OutOfTurns is set when the model was still calling tools after MaxTurns.
	OutOfTurns bool `json:"out_of_turns,omitempty"`
	// Messages is the conversation as the model saw it, its final answer last.
	Messages []ChatMessage `json:"messages"`
	Calls    []Call        `json:"calls"`
}

// AgentWorkflow is the agent workflow's registered name.
const AgentWorkflow = "TicketdeskAgent"

// Agent is the support agent workflow: a model-driven tool loop. Run asks the model (the
// CallModel activity) what to do, runs the tool calls it returns with agent.Call, appends their
// results to the conversation, and asks again, until the model answers without tool calls or
// MaxTurns is reached. The workflow is the same with and without oncekey; only the worker
// differs.
type Agent struct {
	// Registry is the tools' registry, the one the worker's interceptor has.
	Registry *oncekey.Registry
}

// Run is the workflow function.
func (a *Agent) Run(ctx workflow.Context, in AgentInput) (AgentResult, error) {
	req := in.Request
	res := AgentResult{RequestID: req.ID}
	if in.Tenant != "" {
		ctx = oncekey.WithTenant(ctx, in.Tenant)
	}
	maxTurns := in.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	// Temporal's default retry policy, which oncekey turns off for Effectful tools and keeps for
	// its own retries of calls that provably did not land; except that a call another attempt of
	// the same operation holds (in_flight) is not waited for inside the call but handed to the
	// model, which waits retry_after_seconds and asks again.
	toolCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    ToolTimeout,
		ScheduleToCloseTimeout: 5 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{NonRetryableErrorTypes: []string{oncekey.ErrTypeInFlight}},
	})
	modelCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: 10 * time.Minute,
	})
	res.Messages = []ChatMessage{{Role: "system", Content: systemPrompt}, {Role: "user", Content: userPrompt(req)}}
	for res.Turns < maxTurns {
		res.Turns++
		var out ModelOutput
		if err := workflow.ExecuteActivity(modelCtx, ActivityCallModel, ModelInput{Messages: res.Messages}).Get(ctx, &out); err != nil {
			return res, fmt.Errorf("call model (turn %d): %w", res.Turns, err)
		}
		res.Messages = append(res.Messages, out.Message)
		if len(out.Message.ToolCalls) == 0 {
			res.Answer = out.Message.Content
			return res, nil
		}
		// The message's tool calls run side by side, as agent frameworks run parallel tool calls;
		// their results go back in the order the model gave them.
		outcomes := make([]Outcome, len(out.Message.ToolCalls))
		wg := workflow.NewWaitGroup(ctx)
		for i, tc := range out.Message.ToolCalls {
			wg.Add(1)
			workflow.Go(ctx, func(gctx workflow.Context) {
				defer wg.Done()
				outcomes[i] = callTool(workflow.WithActivityOptions(gctx, workflow.GetActivityOptions(toolCtx)), a.Registry, tc.Name, json.RawMessage(tc.Arguments))
			})
		}
		wg.Wait(ctx)
		var wait time.Duration
		for i, tc := range out.Message.ToolCalls {
			o := outcomes[i]
			if in.Plain {
				o = o.plainTemporal()
			}
			res.Calls = append(res.Calls, Call{Turn: res.Turns, ID: tc.ID, Tool: tc.Name, Arguments: tc.Arguments, Outcome: o})
			content := o.forModel()
			if in.Plain {
				content = o.forModelPlain()
			}
			res.Messages = append(res.Messages, ChatMessage{Role: "tool", ToolCallID: tc.ID, Content: content})
			if o.Status == oncekey.OutcomeInFlight {
				wait = max(wait, o.RetryAfter, time.Second)
			}
		}
		if wait > 0 {
			// in_flight: another attempt holds the operation; ask the model again after the wait.
			if err := workflow.Sleep(ctx, wait); err != nil {
				return res, err
			}
		}
	}
	res.OutOfTurns = true
	return res, nil
}
