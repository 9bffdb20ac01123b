package scripted

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ToolNames are the names the script calls its tools by; they must match the tool definitions
// the client sends. The zero value of a field means its default.
type ToolNames struct {
	// Lookup reads the customer: {"customer_id"}. Defaults to "lookup_customer".
	Lookup string
	// Ticket opens a ticket: {"request_id","customer_id","subject","body","priority","trace_id"}.
	// Defaults to "CreateTicket".
	Ticket string
	// Email sends an e-mail: {"request_id","ticket_id","to","template","trace_id"}. Defaults to
	// "SendConfirmation".
	Email string
	// Refund refunds an order: {"request_id","customer_id","order_id","amount_cents","currency",
	// "reason","trace_id"}. Defaults to "IssueRefund".
	Refund string
	// Credit grants a goodwill credit: {"request_id","customer_id","to","amount_cents",
	// "currency","reason","trace_id"}. Defaults to "GrantCredit".
	Credit string
}

func (t ToolNames) withDefaults() ToolNames {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&t.Lookup, "lookup_customer")
	def(&t.Ticket, "CreateTicket")
	def(&t.Email, "SendConfirmation")
	def(&t.Refund, "IssueRefund")
	def(&t.Credit, "GrantCredit")
	return t
}

// Templates of the e-mails the script sends.
const (
	TemplateTicketOpened = "ticket_opened"
	TemplateRefundIssued = "refund_issued"
)

// The goodwill credit the script grants a gold customer once their ticket is open.
const (
	CreditTier        = "gold"
	CreditAmountCents = 500
	CreditCurrency    = "EUR"
)

// Options configure the script. The zero value means every default.
type Options struct {
	// Seed selects the script's choices. Defaults to 1.
	Seed int64
	// RepeatPercent is the chance, per effectful call that came back applied, that the model
	// proposes it again as if the result had gone missing (a new tool-call ID, a new trace ID).
	// Defaults to 25; negative means never.
	RepeatPercent int
	// ChangePercent is the chance, per issued refund, that the model also e-mails the customer
	// about the refund: the e-mail tool again with other arguments, a new operation. Defaults to
	// 40; negative means never.
	ChangePercent int
	// MaxAttempts bounds the proposals of one call whose results keep failing (retryable).
	// Defaults to 3.
	MaxAttempts int
	// Tools names the tools. Defaults as ToolNames says.
	Tools ToolNames
	// DuplicateRequest, if set, is the request whose first ticket proposal the model makes twice
	// in one message: two tool calls with the same material arguments (new tool-call and trace
	// IDs), as models now and then do. The agent runs them side by side. Defaults to none.
	DuplicateRequest string
}

func (o Options) withDefaults() Options {
	if o.Seed == 0 {
		o.Seed = 1
	}
	pct := func(p *int, d int) {
		switch {
		case *p == 0:
			*p = d
		case *p < 0:
			*p = 0
		}
	}
	pct(&o.RepeatPercent, 25)
	pct(&o.ChangePercent, 40)
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	o.Tools = o.Tools.withDefaults()
	return o
}

// Reply is the script's next assistant message: tool calls, or (with none) the final answer.
type Reply struct {
	Content string
	Calls   []ToolCall
}

// supportRequest is the support request the first user message carries as a JSON object.
type supportRequest struct {
	ID         string `json:"id"`
	CustomerID string `json:"customer_id"`
	Subject    string `json:"subject"`
	Body       string `json:"body"`
	Priority   string `json:"priority"`
	Refund     *struct {
		OrderID     string `json:"order_id"`
		AmountCents int64  `json:"amount_cents"`
		Currency    string `json:"currency"`
		Reason      string `json:"reason"`
	} `json:"refund,omitempty"`
}

// toolResult is what the script reads from a tool message: the labelled result oncekey's tool
// call hands to a model ({"status", "next_action", "safe_to_repeat", "result", ...}), or, from a
// worker without oncekey, what Temporal gives: {"result": ...} or {"error": "..."}.
type toolResult struct {
	Status       string          `json:"status"`
	NextAction   string          `json:"next_action"`
	SafeToRepeat bool            `json:"safe_to_repeat"`
	Result       json.RawMessage `json:"result"`
	Error        string          `json:"error"`
}

// pastCall is one tool call of the conversation with its result, if one came back.
type pastCall struct {
	name string
	args map[string]any
	// turn is the assistant message (1-based) that proposed it.
	turn   int
	result *toolResult
}

// goal is one thing the script wants done, and how it recognises its calls.
type goal struct {
	name  string
	tool  string
	match func(args map[string]any) bool
	args  func(trace string) map[string]any
	// effectful goals may be proposed again after an applied result.
	effectful bool
}

// state of a goal after reading the conversation.
type state int

const (
	todo    state = iota // not proposed yet, or to be proposed again
	done                 // applied (or replayed): its result is known
	pending              // the outcome is unknown: being established, not to be repeated
	gaveUp               // rejected, a definite failure, or too many failed attempts
)

// Decide returns the script's next message for the conversation msgs under opts. The choices are
// a function of opts.Seed, the request and the conversation, so one conversation always gets the
// same answer.
func Decide(opts Options, msgs []Message) (Reply, error) {
	opts = opts.withDefaults()
	req, err := findRequest(msgs)
	if err != nil {
		return Reply{}, err
	}
	calls, err := readCalls(msgs)
	if err != nil {
		return Reply{}, err
	}
	turn := 0
	for _, m := range msgs {
		if m.Role == "assistant" {
			turn++
		}
	}
	s := &script{opts: opts, req: req, calls: calls, turn: turn}
	return s.next(), nil
}

type script struct {
	opts  Options
	req   supportRequest
	calls []pastCall
	turn  int
}

// roll returns a number in [0,100) from the seed, the request and parts.
func (s *script) roll(parts ...string) int {
	return int(binary.BigEndian.Uint64(s.hash(parts...)[:8]) % 100)
}

func (s *script) hash(parts ...string) []byte {
	h := sha256.New()
	for _, p := range append([]string{strconv.FormatInt(s.opts.Seed, 10), s.req.ID}, parts...) {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// traceID is the free text the model regenerates on every proposal.
func (s *script) traceID(n int) string {
	return "tr-" + hex.EncodeToString(s.hash("trace", strconv.Itoa(s.turn), strconv.Itoa(n))[:6])
}

func (s *script) callID(n int) string {
	return "call_" + hex.EncodeToString(s.hash("call", strconv.Itoa(s.turn), strconv.Itoa(n))[:12])
}

// of returns the conversation's calls of g, in order.
func (s *script) of(g goal) []pastCall {
	var out []pastCall
	for _, c := range s.calls {
		if c.name == g.tool && g.match(c.args) {
			out = append(out, c)
		}
	}
	return out
}

// assess reads g's calls: its state, the result of its applied call, and whether the next
// proposal would be a repeat of an applied call.
func (s *script) assess(g goal) (state, json.RawMessage) {
	calls := s.of(g)
	if len(calls) == 0 {
		return todo, nil
	}
	last := calls[len(calls)-1]
	if last.result == nil {
		return todo, nil // a call without a result: propose it again
	}
	for _, c := range calls {
		if c.result != nil && c.result.Status == "unknown" {
			return pending, nil // the text says not to repeat it, nor to try another way
		}
	}
	for _, c := range calls {
		if c.turn == last.turn && c.result != nil && c.result.Status == "in_flight" {
			return todo, nil // the text says to wait and ask again; the loop waits
		}
	}
	if last.result.Status == "" && last.result.Error == "" && last.result.Result != nil {
		last.result.Status = "applied" // a plain worker's result: it ran
	}
	switch last.result.Status {
	case "applied", "replayed":
		// Like a model that did not see the result it expected, propose an effectful call again
		// once, now and then.
		if g.effectful && len(calls) == 1 && s.roll("repeat", g.name) < s.opts.RepeatPercent {
			return todo, nil
		}
		return done, last.result.Result
	case "in_flight":
		return todo, nil // the text says to wait and ask again; the loop waits
	case "unknown":
		return pending, nil // the text says not to repeat
	case "rejected", "expired", "conflict":
		return gaveUp, nil
	}
	// failed, or a result the script cannot read.
	if last.result.NextAction == "stop" || len(calls) >= s.opts.MaxAttempts {
		return gaveUp, nil
	}
	return todo, nil
}

func (s *script) next() Reply {
	r, t := s.req, s.opts.Tools
	anyArgs := func(map[string]any) bool { return true }
	lookup := goal{name: "lookup", tool: t.Lookup, match: anyArgs, args: func(string) map[string]any {
		return map[string]any{"customer_id": r.CustomerID}
	}}
	ticket := goal{name: "ticket", tool: t.Ticket, match: anyArgs, effectful: true, args: func(trace string) map[string]any {
		return map[string]any{"request_id": r.ID, "customer_id": r.CustomerID, "subject": r.Subject,
			"body": r.Body, "priority": r.Priority, "trace_id": trace}
	}}
	lookupState, customer := s.assess(lookup)
	ticketState, ticketRes := s.assess(ticket)

	var propose []goal
	if lookupState == todo {
		propose = append(propose, lookup)
	}
	if ticketState == todo {
		propose = append(propose, ticket)
	}
	if len(propose) > 0 {
		if ticketState == todo && len(s.of(ticket)) == 0 && r.ID == s.opts.DuplicateRequest {
			propose = append(propose, ticket) // the same call twice in one message
		}
		return s.reply(propose)
	}

	email := field(customer, "email")
	ticketID := field(ticketRes, "id")
	var steps []goal
	if lookupState == done && ticketState == done && email != "" && ticketID != "" {
		steps = append(steps, s.emailGoal("confirmation", TemplateTicketOpened, ticketID, email))
	}
	if lookupState == done && ticketState == done && email != "" && field(customer, "tier") == CreditTier {
		steps = append(steps, goal{name: "credit", tool: t.Credit, match: anyArgs, effectful: true, args: func(trace string) map[string]any {
			return map[string]any{"request_id": r.ID, "customer_id": r.CustomerID, "to": email,
				"amount_cents": CreditAmountCents, "currency": CreditCurrency, "reason": "goodwill", "trace_id": trace}
		}})
	}
	if rf := r.Refund; rf != nil && lookupState == done {
		steps = append(steps, goal{name: "refund", tool: t.Refund, match: anyArgs, effectful: true, args: func(trace string) map[string]any {
			return map[string]any{"request_id": r.ID, "customer_id": r.CustomerID, "order_id": rf.OrderID,
				"amount_cents": rf.AmountCents, "currency": rf.Currency, "reason": rf.Reason, "trace_id": trace}
		}})
	}
	outcome := map[string]state{"lookup": lookupState, "ticket": ticketState}
	for _, g := range steps {
		st, _ := s.assess(g)
		outcome[g.name] = st
		if st == todo {
			return s.reply([]goal{g})
		}
	}
	// The same tool with other arguments: after an issued refund, now and then also e-mail the
	// customer about it.
	if outcome["refund"] == done && email != "" && ticketID != "" && s.roll("change", "refund-mail") < s.opts.ChangePercent {
		g := s.emailGoal("refund-mail", TemplateRefundIssued, ticketID, email)
		st, _ := s.assess(g)
		outcome[g.name] = st
		if st == todo {
			return s.reply([]goal{g})
		}
	}
	return Reply{Content: s.summary(outcome, ticketID)}
}

func (s *script) emailGoal(name, template, ticketID, to string) goal {
	return goal{
		name: name, tool: s.opts.Tools.Email, effectful: true,
		match: func(a map[string]any) bool { return a["template"] == template },
		args: func(trace string) map[string]any {
			return map[string]any{"request_id": s.req.ID, "ticket_id": ticketID, "to": to, "template": template, "trace_id": trace}
		},
	}
}

// reply proposes the goals' calls, with a short text in front now and then, as models do.
func (s *script) reply(goals []goal) Reply {
	var out Reply
	var names []string
	for i, g := range goals {
		b, _ := json.Marshal(g.args(s.traceID(i)))
		out.Calls = append(out.Calls, ToolCall{ID: s.callID(i), Type: "function", Function: FunctionCall{Name: g.tool, Arguments: string(b)}})
		names = append(names, g.name)
	}
	variants := []string{"", "Working on it: %s.", "Next: %s.", "Let me take care of the %s."}
	if v := variants[s.roll("text", strconv.Itoa(s.turn))%len(variants)]; v != "" {
		out.Content = fmt.Sprintf(v, strings.Join(names, " and "))
	}
	return out
}

// summary is the final answer to the customer's request.
func (s *script) summary(outcome map[string]state, ticketID string) string {
	var parts []string
	switch outcome["ticket"] {
	case done:
		parts = append(parts, "Ticket "+ticketID+" is open")
	case pending:
		parts = append(parts, "I cannot confirm yet whether your ticket was opened; it has to be checked, so I did not try again")
	default:
		parts = append(parts, "I could not open a ticket")
	}
	if st, ok := outcome["confirmation"]; ok && st != done {
		parts = append(parts, "the confirmation e-mail is not confirmed")
	}
	switch st, ok := outcome["credit"]; {
	case ok && st == done:
		parts = append(parts, fmt.Sprintf("a goodwill credit of %d.%02d %s is on your account", CreditAmountCents/100, CreditAmountCents%100, CreditCurrency))
	case ok:
		parts = append(parts, "I could not grant you a goodwill credit")
	}
	if s.req.Refund != nil {
		switch outcome["refund"] {
		case done:
			parts = append(parts, "the refund is issued")
		case pending:
			parts = append(parts, "I cannot confirm the refund yet; it has to be checked")
		default:
			parts = append(parts, "the refund needs a person's approval")
		}
	}
	return strings.Join(parts, "; ") + "."
}

// field returns the string field name of a JSON object, or "".
func field(obj json.RawMessage, name string) string {
	var m map[string]any
	if json.Unmarshal(obj, &m) != nil {
		return ""
	}
	v, _ := m[name].(string)
	return v
}

// findRequest reads the support request from the first user message: the JSON object in it.
func findRequest(msgs []Message) (supportRequest, error) {
	for _, m := range msgs {
		if m.Role != "user" {
			continue
		}
		text := m.Text()
		i, j := strings.Index(text, "{"), strings.LastIndex(text, "}")
		if i < 0 || j < i {
			return supportRequest{}, badConversation("the first user message carries no JSON support request")
		}
		var r supportRequest
		if err := json.Unmarshal([]byte(text[i:j+1]), &r); err != nil {
			return supportRequest{}, badConversation("support request: %v", err)
		}
		if r.ID == "" || r.CustomerID == "" {
			return supportRequest{}, badConversation("support request without id or customer_id")
		}
		return r, nil
	}
	return supportRequest{}, badConversation("no user message")
}

// readCalls pairs the assistant messages' tool calls with the tool messages answering them.
func readCalls(msgs []Message) ([]pastCall, error) {
	var calls []pastCall
	byID := map[string]int{}
	turn := 0
	for _, m := range msgs {
		switch m.Role {
		case "assistant":
			turn++
			for _, tc := range m.ToolCalls {
				var args map[string]any
				if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
					return nil, badConversation("arguments of tool call %s: %v", tc.ID, err)
				}
				byID[tc.ID] = len(calls)
				calls = append(calls, pastCall{name: tc.Function.Name, args: args, turn: turn})
			}
		case "tool":
			i, ok := byID[m.ToolCallID]
			if !ok {
				return nil, badConversation("tool message for unknown tool call %q", m.ToolCallID)
			}
			var r toolResult
			if json.Unmarshal([]byte(m.Text()), &r) != nil {
				r = toolResult{} // not JSON: read as a failure
			}
			calls[i].result = &r
		}
	}
	return calls, nil
}
