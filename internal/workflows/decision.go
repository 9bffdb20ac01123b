package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey/internal/decision"
	"github.com/oncekey/oncekey/internal/failure"
)

// decider is the decision kernel the reconciliation and approval workflows share: one run of a
// child workflow per operation key that waits for a fenced decision D from a person, sent by
// Update (strictly decoded and validated before it is accepted, answered with the output O) or
// by signal (strictly decoded by the workflow, a refusal counted in the query's report, at most
// decision.MaxInvalidSignals a run before it continues as new), or for its deadline; a decision
// is written by the protocol's one activity (record) and settles the run once.
//
// The protocol fills in its names, texts and hooks; the kernel's order of commands is the one
// both workflows had before it was shared, so recorded histories replay unchanged.
type decider[D, O any] struct {
	protocol
	// tool and key name the run in logs.
	tool, key string

	// invalid says why d cannot decide the run now (signal or update), or "".
	invalid func(d D) string
	// check, if set, says why the update's validator refuses d beyond invalid, or "".
	check func(d D) string
	// record writes d with the protocol's activity: why it was refused, or "" once the run is
	// decided (by d, by a decision found recorded, or ended by an error).
	record func(ctx workflow.Context, d D) string
	// requestID is d's RequestID.
	requestID func(d D) string
	// settled says the run's report shows it decided, and outcome what it was decided as (for
	// the refusal of a decision sent then); waiting says whether the run waits for a decision,
	// and state where it stands instead.
	settled func() bool
	outcome func() string
	waiting func() (bool, string)
	// details is the run's current details, set after a refused signal.
	details func() string
	// invalidSignals, lastInvalid and lastInvalidRequestID are the query report's tally of
	// refused signals.
	invalidSignals                    *int
	lastInvalid, lastInvalidRequestID *string

	// busy: a decision is being recorded (by the update handler or the signal loop).
	busy bool
	// decided is set once a decision or a terminal error settled the run.
	decided bool
	out     O
	err     error
	// answered, when hasAnswer, is the update's answer to a decision recorded without settling
	// the run (a partial approval, which waits for another signer).
	answered  O
	hasAnswer bool
	f         workflow.Future
	s         workflow.Settable
	// invalidThisRun counts the invalid signals of this run.
	invalidThisRun int
	// signatureRefused: the last decision record refused was refused for its signature
	// (refusedBy), which the update's refusal says in its details.
	signatureRefused bool
}

// decisionActivities are the activity options of a decision workflow: a minute each, retried
// from a second to a minute apart, except the error types given.
func decisionActivities(ctx workflow.Context, nonRetryable ...string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: nonRetryable,
		},
	})
}

// protocol is a decision protocol's names and words, the same for all its runs: the kernel
// registers its handlers and words its refusals with them.
type protocol struct {
	// noun and goType name a decision ("resolution", "reconcile.Resolution") and verb what it
	// does ("resolve"); workflow names a run ("reconciliation") and report its query ("status").
	noun, goType, verb, workflow, report string
	// settledAs says, before the outcome, that a run has decided: "the operation was already
	// settled as".
	settledAs string
	// refusedType is the error type of a decision refused for what it says; notWaitingType the
	// one of a decision sent when none can be taken (decided, being recorded, not waiting yet).
	refusedType, notWaitingType string
	// The decision signal's, the query's and the decision update's names and descriptions.
	signalName, signalDescription string
	queryName, queryDescription   string
	updateName, updateDescription string
	// ignoredLog is the log message of a refused signal.
	ignoredLog string
}

// settledText is the refusal of a decision sent to a run decided as outcome.
func (p protocol) settledText(outcome string) string {
	return fmt.Sprintf("nothing to %s: %s %s", p.verb, p.settledAs, outcome)
}

// busyText is the refusal of an update that arrives while another decision is recorded.
func (p protocol) busyText() string {
	return fmt.Sprintf("another %s is being recorded; check the %s query, then try again if it was refused", p.noun, p.report)
}

// notYetText is the refusal of a decision sent to a run that does not wait for one: it is in
// state.
func (p protocol) notYetText(state string) string {
	return fmt.Sprintf("nothing to %s yet: the %s is %s", p.verb, p.workflow, state)
}

// serve registers the query (query, a func() (Report, error)) and the decision update, runs run, and lets an update being
// answered finish before the workflow does.
func (k *decider[D, O]) serve(ctx workflow.Context, query any, run func(workflow.Context) (O, error)) (O, error) {
	var zero O
	k.f, k.s = workflow.NewFuture(ctx)
	if err := workflow.SetQueryHandlerWithOptions(ctx, k.queryName, query, workflow.QueryHandlerOptions{Description: k.queryDescription}); err != nil {
		return zero, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, k.updateName, k.update, workflow.UpdateHandlerOptions{
		Validator:   k.validate,
		Description: k.updateDescription,
	}); err != nil {
		return zero, err
	}
	out, err := run(ctx)
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	return out, err
}

// decisionWait is what a wait ends on besides a decision.
type decisionWait[O any] struct {
	// deadline, when hasDeadline, starts a timer (at least a millisecond); at it, once a decision
	// being recorded has finished without deciding, expire ends the run.
	hasDeadline bool
	deadline    time.Time
	expire      func(ctx workflow.Context) (O, error)
	// bounded, if set, says whether a run that took MaxInvalidSignals invalid signals continues
	// as new (a workflow.GetVersion check); nil: it does.
	bounded func(ctx workflow.Context) bool
	// continueAsNew is the error that continues the run as new.
	continueAsNew func(ctx workflow.Context) error
}

// wait waits for a decision: the update handler's, a signal's, or the deadline.
func (k *decider[D, O]) wait(ctx workflow.Context, w decisionWait[O]) (O, error) {
	var zero O
	signals := workflow.GetSignalChannelWithOptions(ctx, k.signalName, workflow.SignalChannelOptions{Description: k.signalDescription})
	var deadline workflow.Future
	if w.hasDeadline {
		deadline = workflow.NewTimer(ctx, max(w.deadline.Sub(workflow.Now(ctx)), time.Millisecond))
	}
	for {
		var (
			raw     converter.RawValue
			got     bool
			expired bool
		)
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) {
			// A RawValue always decodes, so the SDK never drops a signal here (it would block this
			// coroutine, timer and all, until a next one came); the payload is decoded below.
			c.Receive(ctx, &raw)
			got = true
		})
		sel.AddFuture(k.f, func(workflow.Future) {})
		if deadline != nil {
			sel.AddFuture(deadline, func(workflow.Future) { expired = true })
		}
		sel.Select(ctx)
		if k.decided {
			return k.out, k.err
		}
		if expired {
			// A decision being recorded by the update handler finishes first: it may decide.
			if err := workflow.Await(ctx, func() bool { return !k.busy }); err != nil {
				return zero, err
			}
			if k.decided {
				return k.out, k.err
			}
			return w.expire(ctx)
		}
		if !got {
			continue
		}
		if k.takeSignal(ctx, raw) {
			return k.out, k.err
		}
		if k.invalidThisRun >= decision.MaxInvalidSignals && (w.bounded == nil || w.bounded(ctx)) {
			// Signals already delivered are taken before the run ends; a valid one still decides.
			if drainSignals(signals, func(raw converter.RawValue) bool { return k.takeSignal(ctx, raw) }) {
				return k.out, k.err
			}
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return zero, err
			}
			if k.decided {
				return k.out, k.err
			}
			return zero, w.continueAsNew(ctx)
		}
	}
}

// drainSignals takes the signals already delivered on ch with take, before a run continues as
// new, and reports whether one of them decided the run.
func drainSignals(ch workflow.ReceiveChannel, take func(converter.RawValue) bool) bool {
	for {
		var more converter.RawValue
		if !ch.ReceiveAsync(&more) {
			return false
		}
		if take(more) {
			return true
		}
	}
}

// takeSignal handles one signal payload: a valid decision is recorded, anything else is refused
// in the query's report. It reports whether the run is decided.
func (k *decider[D, O]) takeSignal(ctx workflow.Context, raw converter.RawValue) bool {
	d, reason := signalJSON[D](raw, strictSignals(ctx), k.noun, k.goType)
	if reason == "" {
		reason = k.invalid(d)
	}
	if reason == "" {
		if reason = k.recording(ctx, d); reason == "" {
			// Recorded: it settled the run, or, a partial approval, the run waits on.
			k.hasAnswer = false
			return k.decided
		}
	}
	*k.lastInvalid, *k.lastInvalidRequestID = reason, k.requestID(d)
	*k.invalidSignals++
	k.invalidThisRun++
	workflow.SetCurrentDetails(ctx, k.details())
	workflow.GetLogger(ctx).Warn(k.ignoredLog, "tool", k.tool, "key_prefix", prefix(k.key), "reason", reason)
	return k.decided
}

// recording runs record with the run marked busy.
func (k *decider[D, O]) recording(ctx workflow.Context, d D) string {
	k.busy, k.signatureRefused = true, false
	defer func() { k.busy = false }()
	return k.record(ctx, d)
}

// decide settles the run with out or err, once.
func (k *decider[D, O]) decide(out O, err error) {
	if k.decided {
		return
	}
	k.decided, k.out, k.err = true, out, err
	k.s.Set(nil, nil)
}

// refusedFor reports whether an activity that failed with an error of kind k refused the decision
// it was given (the decision workflow refuses it and keeps waiting): an invalid decision
// (activities.ErrTypeInvalid), or one refused for its signature (oncekey.ErrTypeSignatureRefused;
// workers before it refused those as invalid too).
func refusedFor(k failure.Kind) bool {
	return k == failure.Invalid || k == failure.SignatureRefused
}

// refusedBy is record's answer to a decision the protocol's activity refused (refusedFor) with
// appErr, of kind: the reason, which the update's refusal and the query's last refused signal
// give; a refusal for the decision's signature is noted for the update's refusal.
func (k *decider[D, O]) refusedBy(kind failure.Kind, appErr error) string {
	k.signatureRefused = kind == failure.SignatureRefused
	return appErr.Error()
}

// refuseRecorded is the update handler's error for a decision record refused with reason. A
// refusal for the decision's signature carries one detail, the activity's error type
// (oncekey.ErrTypeSignatureRefused), which reconcile's clients read; other refusals carry none.
func (k *decider[D, O]) refuseRecorded(reason string) error {
	if k.signatureRefused {
		return temporal.NewNonRetryableApplicationError(reason, k.refusedType, nil, failure.TypeSignatureRefused)
	}
	return refuse(reason, k.refusedType)
}

// refuse is the validator's and the handler's error of a refused decision.
func refuse(reason, errType string) error {
	return temporal.NewNonRetryableApplicationError(reason, errType, nil)
}

// validate is the decision update's validator: it refuses, with nothing written to history, a
// decision the workflow cannot take now or could never record, or whose JSON is not exactly a D
// (a member it does not have, such as "decidedBy" for "decided_by", is named in the refusal,
// not dropped).
func (k *decider[D, O]) validate(ctx workflow.Context, raw json.RawMessage) error {
	d, reason := decodeStrict[D](raw, "the update", k.noun, k.goType)
	if reason != "" {
		return refuse(reason, k.refusedType)
	}
	switch {
	case k.decided || k.settled():
		return refuse(k.settledText(k.outcome()), k.notWaitingType)
	case k.busy:
		return refuse(k.busyText(), k.notWaitingType)
	}
	if waiting, state := k.waiting(); !waiting {
		return refuse(k.notYetText(state), k.notWaitingType)
	}
	if reason := k.invalid(d); reason != "" {
		return refuse(reason, k.refusedType)
	}
	if k.check != nil {
		if reason := k.check(d); reason != "" {
			return refuse(reason, k.refusedType)
		}
	}
	return nil
}

// update is the decision update's handler: it records an accepted decision and answers with the
// run's output. A decision the store refuses fails the update (refusedType) and the workflow
// keeps waiting.
//
// It takes the raw JSON, as the validator does, and decodes it as the SDK decoded the D it took
// before: the validator refused anything else before it was accepted, and an update accepted
// before the validator was strict replays as it ran.
func (k *decider[D, O]) update(ctx workflow.Context, raw json.RawMessage) (O, error) {
	var zero O
	var d D
	if err := json.Unmarshal(raw, &d); err != nil {
		return zero, refuse("the "+k.noun+" does not decode into "+k.goType+": "+err.Error(), k.refusedType)
	}
	if refused := k.recording(ctx, d); refused != "" {
		return zero, k.refuseRecorded(refused)
	}
	if !k.decided && k.hasAnswer {
		k.hasAnswer = false
		return k.answered, nil
	}
	return k.out, k.err
}

func prefix(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}
