package main

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/oncekey/oncekey/cmd/oncekey/internal/workflowrun"
	"github.com/oncekey/oncekey/internal/decisiontext"
)

// sentDecision is a decision `oncekey resolve` or `oncekey approve`/`deny` sent to its protocol's
// workflow: what the two commands say differently about what became of it. decisionError says
// what they share, each outcome's words from decisiontext.
type sentDecision struct {
	p decisiontext.Protocol
	// verb names the command ("resolve", "approve"); noun the decision ("resolution", "denial").
	verb, noun string
	key        string
	// show is the `oncekey show` command of the key; status what it says until an unconfirmed
	// decision lands.
	show, status string
	// list is the command that lists what waits, for a key that does not have the shape of one.
	list string
	// stored looks the key up in the store when no workflow waits: an error says why (settled
	// already, another tenant's); nil when the store does not explain it.
	stored func() error
	// next is what still works when no workflow waits and the store does not explain it.
	next string
	// refused is the error of the workflow's refusal of the decision, err with its reason.
	refused func(err error, reason string) error
	// noNamespace is the error when Temporal has no such namespace.
	noNamespace func(err error) error
}

// decisionError is the command's error for a decision its client answered err: nil when the
// workflow accepted it; a malformed decision exit 2, a refusal exit 1, no workflow exit 3,
// unconfirmed exit 6, anything else exit 4.
func (a *app) decisionError(ctx context.Context, c client.Client, d sentDecision, err error) error {
	o, reason := d.p.Outcome(err)
	switch o {
	case decisiontext.Accepted:
		return nil
	case decisiontext.Invalid:
		return fail(exitUsage, "%v; nothing was sent", err)
	case decisiontext.Refused:
		return d.refused(err, reason)
	case decisiontext.Unconfirmed:
		id := d.p.WorkflowID(d.key)
		return fail(exitUnconfirmed, "%s (until then `%s` says %s)", d.p.UnconfirmedText(d.noun, id, workflowrun.Unconfirmed(ctx, c, id, d.p.Workflow)), d.show, d.status)
	case decisiontext.NoWorkflow:
		if shape := keyShape(d.key); shape != "" {
			return fail(exitNotFound, "%s: %s; copy the whole key from `%s`", d.p.NotWaiting(d.key, a.ns()), shape, d.list)
		}
		if err := d.stored(); err != nil {
			return err
		}
		return fail(exitNotFound, "%s: %s; %s", d.p.NotWaiting(d.key, a.ns()), decisiontext.NotStarted, d.next)
	case decisiontext.NoNamespace:
		return d.noNamespace(err)
	}
	return fail(exitUnreachable, "%s %s: %v", d.verb, d.key, oneLine(err))
}
