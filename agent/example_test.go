package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/agent"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/worker"
)

// ToolCall is one tool call a model returned: its name and its arguments as JSON text (the
// shape of openai-go's ChatCompletionMessageToolCall.Function and of anthropic-sdk-go's
// ToolUseBlock).
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Turn is one message of the conversation the loop keeps: a tool's answer for the model.
type Turn struct {
	ToolCallID string             `json:"tool_call_id"`
	Content    oncekey.ToolResult `json:"content"`
}

// Billing is the example's downstream: it counts the invoices it sends.
type Billing struct{ sent int }

type InvoiceIn struct {
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
	TraceID     string `json:"trace_id"` // new in every proposal
}

func (b *Billing) SendInvoice(ctx context.Context, in InvoiceIn) (string, error) {
	b.sent++
	ref := fmt.Sprintf("INV-%d", b.sent)
	_ = oncekey.SetEffectReference(ctx, ref)
	return ref, nil
}

// Model stands in for the model call (an activity, like any call to a vendor API): it proposes
// SendInvoice, then, having lost track, the same invoice again with a new trace ID, then stops.
func Model(ctx context.Context, transcript []Turn) ([]ToolCall, error) {
	if len(transcript) >= 2 {
		return nil, nil
	}
	return []ToolCall{{ID: fmt.Sprintf("call_%d", len(transcript)), Name: "SendInvoice",
		Arguments: fmt.Sprintf(`{"customer":"acme","amount_cents":1200,"trace_id":"t-%d"}`, len(transcript))}}, nil
}

// billingTools is the Registry the worker's interceptor and the agent workflow share.
var billingTools = oncekey.NewRegistry()

// BillingAgent is an agent loop: ask the model, run each tool call it returns with agent.Call,
// hand each ToolResult back as the tool's message, until the model stops. No step IDs: a call the
// model proposes again with the same material arguments is the same operation.
func BillingAgent(ctx workflow.Context) ([]Turn, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var transcript []Turn
	for range 10 { // a bound on turns
		var calls []ToolCall
		if err := workflow.ExecuteActivity(ctx, Model, transcript).Get(ctx, &calls); err != nil {
			return nil, err
		}
		if len(calls) == 0 {
			break
		}
		for _, call := range calls {
			res, err := agent.Call(ctx, billingTools, call.Name, json.RawMessage(call.Arguments))
			if err != nil {
				// Operator detail, for the log; the model gets res (res.Text says what to do).
				workflow.GetLogger(ctx).Warn("tool call failed", "tool", call.Name, "status", res.Status, "error", err)
			}
			transcript = append(transcript, Turn{ToolCallID: call.ID, Content: res})
		}
	}
	return transcript, nil
}

// An agent loop on the SDK test environment: the model proposes the same invoice twice, one is
// sent, and the model reads the second answer as replayed, with the first one's effect
// reference.
func Example_agentLoop() {
	billing := &Billing{}
	if err := billingTools.Set(billing.SendInvoice, oncekey.Policy{Effect: oncekey.Effectful, Exclude: []string{"trace_id"}}); err != nil {
		panic(err)
	}
	if err := billingTools.Set(Model, oncekey.Policy{Effect: oncekey.ReadOnly}); err != nil {
		panic(err)
	}
	opts := worker.Options{Store: memstore.New(nil), Registry: billingTools}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestWorkflowEnvironment()
	wo, err := worker.WorkerOptions(opts, sdkworker.Options{})
	if err != nil {
		panic(err)
	}
	env.SetWorkerOptions(wo)
	if err := worker.Register(env, opts); err != nil {
		panic(err)
	}
	env.RegisterActivity(billing.SendInvoice)
	env.RegisterActivity(Model)
	env.RegisterWorkflow(BillingAgent)

	env.ExecuteWorkflow(BillingAgent)
	var transcript []Turn
	if err := env.GetWorkflowResult(&transcript); err != nil {
		panic(err)
	}
	for _, t := range transcript {
		fmt.Println(t.ToolCallID, t.Content.Status, t.Content.EffectReference, t.Content.Result)
	}
	fmt.Println("invoices sent:", billing.sent)
	// Output:
	// call_0 applied INV-1 INV-1
	// call_1 replayed INV-1 INV-1
	// invoices sent: 1
}
