package desk

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
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

// AgentInput is the agent workflow's input.
type AgentInput struct {
	Request Request `json:"request"`
	// Tenant keys the workflow's operations (oncekey.WithTenant).
	Tenant string `json:"tenant"`
	// Seed drives the scripted model's repeats.
	Seed int64 `json:"seed"`
	// RepeatPercent is the chance, per effectful tool, that the model proposes the call again.
	RepeatPercent int `json:"repeat_percent"`
}

// Call is one tool call the model proposed, as the agent saw it.
type Call struct {
	Tool string `json:"tool"`
	// Repeat marks a call the model proposed again after it had already been made.
	Repeat bool            `json:"repeat"`
	Status oncekey.Outcome `json:"status"`
	Error  string          `json:"error,omitempty"`
}

// AgentResult is the agent workflow's result.
type AgentResult struct {
	RequestID string `json:"request_id"`
	TicketID  string `json:"ticket_id,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	RefundID  string `json:"refund_id,omitempty"`
	// RefundStatus is "none", "issued", "refused" (not authorized) or "failed".
	RefundStatus string `json:"refund_status"`
	Calls        []Call `json:"calls"`
}

// Agent is the support agent workflow: a scripted stand-in for a model decides the tool calls
// for one request. Like a model whose tool result went missing, it sometimes proposes the same
// call a second time (with a new trace ID). The workflow is the same with and without oncekey;
// only the worker differs.
func Agent(ctx workflow.Context, in AgentInput) (AgentResult, error) {
	req := in.Request
	res := AgentResult{RequestID: req.ID, RefundStatus: "none"}
	if in.Tenant != "" {
		ctx = oncekey.WithTenant(ctx, in.Tenant)
	}
	// No RetryPolicy: Temporal's default retry policy. oncekey turns it off for Effectful tools
	// and keeps it for its own retries of calls that provably did not land.
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    20 * time.Second,
		ScheduleToCloseTimeout: 5 * time.Minute,
	})
	m := model{seed: in.Seed, request: req.ID, percent: in.RepeatPercent}
	proposal := 0
	trace := func() string { proposal++; return fmt.Sprintf("%s-p%d", req.ID, proposal) }

	var lastErr error
	call := func(ctx workflow.Context, tool string, repeat bool, arg, out any) oncekey.ToolResult {
		err := workflow.ExecuteActivity(ctx, tool, arg).Get(ctx, out)
		lastErr = err
		tr := oncekey.Label(out, err)
		c := Call{Tool: tool, Repeat: repeat, Status: tr.Status}
		if err != nil {
			c.Error = err.Error()
		}
		res.Calls = append(res.Calls, c)
		return tr
	}
	// propose runs a tool call and, if the model decides so, proposes it again.
	propose := func(ctx workflow.Context, tool string, arg func() any, out any) oncekey.ToolResult {
		tr := call(ctx, tool, false, arg(), out)
		if tr.Status == oncekey.OutcomeApplied && m.repeats(tool) {
			tr = call(ctx, tool, true, arg(), out)
		}
		return tr
	}

	var cust Customer
	if tr := call(ctx, ToolLookupCustomer, false, req.CustomerID, &cust); tr.Status != oncekey.OutcomeApplied {
		return res, fmt.Errorf("look up customer %s: %s", req.CustomerID, tr.Error)
	}

	var ticket Ticket
	tctx := oncekey.WithStepID(ctx, StepCreateTicket)
	tr := propose(tctx, ToolCreateTicket, func() any {
		return TicketInput{RequestID: req.ID, CustomerID: req.CustomerID, Subject: req.Subject, Body: req.Body, Priority: req.Priority, TraceID: trace()}
	}, &ticket)
	if tr.Status != oncekey.OutcomeApplied {
		return res, fmt.Errorf("create ticket: %s", tr.Error)
	}
	res.TicketID = ticket.ID

	var msg Message
	tr = propose(ctx, ToolSendConfirmation, func() any {
		return EmailInput{RequestID: req.ID, TicketID: ticket.ID, To: cust.Email, Template: "ticket_opened", TraceID: trace()}
	}, &msg)
	if tr.Status != oncekey.OutcomeApplied {
		return res, fmt.Errorf("send confirmation: %s", tr.Error)
	}
	res.MessageID = msg.ID

	if r := req.Refund; r != nil {
		var refund Refund
		rctx := oncekey.WithStepID(ctx, StepIssueRefund)
		tr = propose(rctx, ToolIssueRefund, func() any {
			return RefundInput{RequestID: req.ID, CustomerID: req.CustomerID, OrderID: r.OrderID, AmountCents: r.AmountCents, Currency: r.Currency, Reason: r.Reason, TraceID: trace()}
		}, &refund)
		switch {
		case tr.Status == oncekey.OutcomeApplied:
			res.RefundID, res.RefundStatus = refund.ID, "issued"
		case isRefundRefused(tr, lastErr):
			res.RefundStatus = "refused"
		default:
			res.RefundStatus = "failed"
		}
	}
	return res, nil
}

// isRefundRefused reports whether a refund call was refused by the allow-list: by the
// policy's Authorize hook (label rejected) or inside the tool (the path plain workers take).
func isRefundRefused(tr oncekey.ToolResult, err error) bool {
	if tr.Status == oncekey.OutcomeRejected {
		return true
	}
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == ErrTypeRefundNotAllowed
}

// model is the scripted stand-in for a language model. Its choices are a pure function of the
// seed and the request, so workflow replay sees the same choices.
type model struct {
	seed    int64
	request string
	percent int
}

// repeats reports whether the model proposes tool a second time for this request.
func (m model) repeats(tool string) bool {
	h := sha256.New()
	for _, p := range []string{strconv.FormatInt(m.seed, 10), "repeat", m.request, tool} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return int(binary.BigEndian.Uint64(h.Sum(nil)[:8])%100) < m.percent
}
