package desk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/examples/ticketdesk/internal/downstream"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// OperatorName is the ResolvedBy of the demo's operator.
const OperatorName = "operator:ticketdesk"

// operator stands in for the person on call: it lists operations whose outcome is unknown,
// waits until their reconciliation workflow asks for a person, looks the operation up in the
// downstream system by the idempotency key the tool sent (as a person would search the ticket
// system), and resolves it with reconcile.Resolve.
type operator struct {
	client   client.Client
	store    oncekeystore.Store
	tenant   string
	services *downstream.Set
	http     *downstream.Client
	progress func(string)
	// leaveOne, if set, is given the first operation waiting for a person, which the operator
	// then leaves alone.
	leaveOne func(rec *oncekeystore.Record, lookupURL string)
	left     string
	// awayFor is the request whose ticket operation the operator is away for: it waits until
	// the reconciliation gives up (EscalationTimeout), and comeBack settles it afterwards.
	awayFor string

	mu       sync.Mutex
	resolved map[string]reconcile.ResolutionOutcome
}

// lookup names where a person would look for a tool's effect.
func (o *operator) lookup(tool string) (base, path, what string, ok bool) {
	switch tool {
	case ToolCreateTicket:
		return o.services.Tickets.URL, "/tickets", "ticket system", true
	case ToolSendConfirmation:
		return o.services.Email.URL, "/messages", "e-mail log", true
	case ToolIssueRefund:
		return o.services.Payments.URL, "/refunds", "payments dashboard", true
	}
	return "", "", "", false
}

func (o *operator) run(ctx context.Context) {
	t := time.NewTicker(150 * time.Millisecond)
	defer t.Stop()
	for {
		o.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (o *operator) pass(ctx context.Context) {
	page, err := reconcile.List(ctx, o.store, oncekeystore.ListParams{Tenant: o.tenant, Limit: 1000})
	if err != nil {
		return
	}
	for _, rec := range page.Records {
		o.mu.Lock()
		_, done := o.resolved[rec.OperationKey]
		o.mu.Unlock()
		if done {
			continue
		}
		if rec.OperationKey == o.left || o.away(rec) {
			continue
		}
		st, err := reconcile.Status(ctx, o.client, rec.OperationKey)
		if err != nil || st.State != reconcile.StateWaiting {
			continue // not started yet, or still inspecting / running the receipt lookup
		}
		if o.leaveOne != nil && o.left == "" {
			if base, path, _, ok := o.lookup(rec.Tool); ok {
				o.left = rec.OperationKey
				o.leaveOne(rec, base+path+"?idempotency_key="+rec.OperationKey)
				continue
			}
		}
		r, ok := o.decide(ctx, rec)
		if !ok {
			continue
		}
		if err := reconcile.Resolve(ctx, o.client, rec.Tenant, rec.OperationKey, r); err != nil {
			continue // try again on the next pass
		}
		o.mu.Lock()
		if o.resolved == nil {
			o.resolved = map[string]reconcile.ResolutionOutcome{}
		}
		o.resolved[rec.OperationKey] = r.Outcome
		o.mu.Unlock()
		o.progress(fmt.Sprintf("[operator] %s of %s (key %.16s…): %s → %s", rec.Tool, rec.WorkflowID, rec.OperationKey, r.Note, r.Outcome))
	}
}

// away reports whether rec is the operation the operator is away for.
func (o *operator) away(rec *oncekeystore.Record) bool {
	return o.awayFor != "" && rec.Tool == ToolCreateTicket && strings.HasSuffix(rec.WorkflowID, "-"+o.awayFor)
}

// comeBack settles the operations left unknown while the operator was away, writing each
// decision straight to the store (reconcile.Record), as `oncekey resolve --direct` does once no
// reconciliation workflow waits. It is called once every agent workflow has ended, so no
// reconciliation waits any more: besides the operation the operator was away for, it settles any
// whose reconciliation gave up before the operator's pass reached it (on a loaded machine a pass
// can take longer than EscalationTimeout), as the person on call settles what `oncekey list
// --status unknown` shows. The operation LeaveOne left is left for the user.
func (o *operator) comeBack(ctx context.Context) {
	page, err := reconcile.List(ctx, o.store, oncekeystore.ListParams{Tenant: o.tenant, Limit: 1000})
	if err != nil {
		return
	}
	for _, rec := range page.Records {
		if rec.OperationKey == o.left {
			continue
		}
		r, ok := o.decide(ctx, rec)
		if !ok {
			continue
		}
		if _, err := reconcile.Record(ctx, o.store, nil, rec.Tenant, rec.OperationKey, r); err != nil {
			o.progress(fmt.Sprintf("[operator] back: %s of %s not settled: %v", rec.Tool, rec.WorkflowID, err))
			continue
		}
		o.progress(fmt.Sprintf("[operator] back: %s of %s (key %.16s…): %s → %s", rec.Tool, rec.WorkflowID, rec.OperationKey, r.Note, r.Outcome))
	}
}

// decide looks the operation up downstream by its key. Found: applied, with the downstream's
// record as the result. Not found: not applied (every request in the demo finishes well within
// its timeout, so a missing effect will not land later).
func (o *operator) decide(ctx context.Context, rec *oncekeystore.Record) (reconcile.Resolution, bool) {
	base, path, what, ok := o.lookup(rec.Tool)
	if !ok {
		return reconcile.Resolution{}, false
	}
	var body json.RawMessage
	err := o.http.FindByKey(ctx, base, path, rec.OperationKey, &body)
	switch {
	case err == nil:
		var ref struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(body, &ref)
		return reconcile.Resolution{
			Epoch:           rec.Epoch,
			Outcome:         reconcile.Applied,
			EffectReference: ref.ID,
			Result:          body,
			Note:            fmt.Sprintf("found %s in the %s", ref.ID, what),
			ResolvedBy:      OperatorName,
		}, true
	case errors.Is(err, downstream.ErrNotFound):
		return reconcile.Resolution{
			Epoch:      rec.Epoch,
			Outcome:    reconcile.NotApplied,
			Note:       "nothing in the " + what + " for this key",
			ResolvedBy: OperatorName,
		}, true
	}
	return reconcile.Resolution{}, false
}
