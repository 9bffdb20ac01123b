package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/oncekey/oncekey"
)

// downstream is a fake downstream service the tests own. It counts its own effects (tickets it
// really created), apart from whatever the executor reports, and the tool bodies that ran.
type downstream struct {
	mu      sync.Mutex
	effects int
	bodies  int
	byKey   map[string]Ticket // with dedupe: the ticket created for an idempotency key
	next    int
	// faults, consumed in order by successive body executions ("" = behave).
	faults []string
	dedupe bool
	keys   []string // operation keys seen by the bodies
}

// Fault kinds.
const (
	faultNone               = ""
	faultErrorBeforeCommit  = "error-before-commit"   // refuse without committing; plain error
	faultNotApplied         = "not-applied"           // refuse without committing; NotApplied
	faultFailed             = "failed"                // refuse without committing; Failed
	faultLostAfterCommit    = "lost-after-commit"     // commit, then the response is lost (error)
	faultPanicAfterCommit   = "panic-after-commit"    // commit, then panic
	faultHangAfterCommit    = "hang-after-commit"     // commit, then hang until the context ends
	faultHangBeforeCommit   = "hang-before-commit"    // hang until the context ends, no commit
	faultNonRetryableNotApp = "non-retryable-not-app" // NotApplied of a non-retryable error
)

func newDownstream(faults ...string) *downstream {
	return &downstream{faults: faults, byKey: map[string]Ticket{}}
}

func (d *downstream) counts() (effects, bodies int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.effects, d.bodies
}

type TicketRequest struct {
	Customer  string `json:"customer"`
	Subject   string `json:"subject"`
	RequestID string `json:"request_id"`
}

type Ticket struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Subject  string `json:"subject"`
	Seq      int    `json:"seq"`
}

// commit performs the effect once; with dedupe, a repeat of the same key returns the first
// ticket without a second effect.
func (d *downstream) commit(key string, in TicketRequest) Ticket {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dedupe && key != "" {
		if t, ok := d.byKey[key]; ok {
			return t
		}
	}
	d.effects++
	d.next++
	t := Ticket{ID: fmt.Sprintf("T-%d", d.next), Customer: in.Customer, Subject: in.Subject, Seq: d.next}
	if key != "" {
		d.byKey[key] = t
	}
	return t
}

func (d *downstream) fault() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bodies++
	if len(d.faults) == 0 {
		return faultNone
	}
	f := d.faults[0]
	d.faults = d.faults[1:]
	return f
}

// CreateTicket is the tool: an activity that creates a ticket downstream.
func (d *downstream) CreateTicket(ctx context.Context, in TicketRequest) (Ticket, error) {
	key, _ := oncekey.OperationKey(ctx)
	d.mu.Lock()
	d.keys = append(d.keys, key)
	d.mu.Unlock()
	switch d.fault() {
	case faultErrorBeforeCommit:
		return Ticket{}, errors.New("downstream: connection reset before the request was sent")
	case faultNotApplied:
		return Ticket{}, oncekey.NotApplied(errors.New("downstream: 503, request refused"))
	case faultNonRetryableNotApp:
		return Ticket{}, oncekey.NotApplied(temporalNonRetryable("downstream: 400, invalid customer"))
	case faultFailed:
		return Ticket{}, oncekey.Failed(errors.New("downstream: customer account closed"))
	case faultLostAfterCommit:
		d.commit(key, in)
		return Ticket{}, errors.New("downstream: connection lost while reading the response")
	case faultPanicAfterCommit:
		d.commit(key, in)
		panic("tool bug after commit")
	case faultHangAfterCommit:
		d.commit(key, in)
		<-ctx.Done()
		return Ticket{}, ctx.Err()
	case faultHangBeforeCommit:
		<-ctx.Done()
		return Ticket{}, ctx.Err()
	}
	return d.commit(key, in), nil
}

// LookupCustomer is a ReadOnly tool.
func (d *downstream) LookupCustomer(ctx context.Context, customer string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bodies++
	return "customer:" + customer, nil
}

// Untracked has no policy.
func (d *downstream) Untracked(ctx context.Context, s string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bodies++
	return "untracked:" + s, nil
}

// stepCall is one tool call a test workflow makes.
type stepCall struct {
	StepID string        `json:"step_id"`
	Tool   string        `json:"tool"`
	Req    TicketRequest `json:"req"`
	// Local schedules the call as a local activity.
	Local bool `json:"local"`
}

type workflowInput struct {
	Calls []stepCall `json:"calls"`
	// StartToClose for the activities; defaults to 10s.
	StartToClose time.Duration `json:"start_to_close"`
	Heartbeat    time.Duration `json:"heartbeat"`
	MaxAttempts  int32         `json:"max_attempts"`
	Tenant       string        `json:"tenant"`
	// RawLabels reads CreateTicket's results as converter.RawValue and labels them with
	// oncekey.Label (Label, Next, Reason, EffectReference), as agent.Call does.
	RawLabels bool `json:"raw_labels,omitempty"`
	// Retry policy shape; zero fields give 100ms initial interval and Temporal's defaults.
	Initial         time.Duration `json:"initial"`
	Coefficient     float64       `json:"coefficient"`
	MaxInterval     time.Duration `json:"max_interval"`
	ScheduleToClose time.Duration `json:"schedule_to_close"`
}

type callResult struct {
	Ticket Ticket `json:"ticket"`
	Text   string `json:"text"`
	Err    string `json:"err,omitempty"`
	// Detail is the operator's account of the error (oncekey.Details.Message); Err, what
	// the workflow's err.Error() says, is the text for a model.
	Detail string `json:"detail,omitempty"`
	Type   string `json:"type,omitempty"`
	// Label and Next are oncekey.Label's status and next action for the error, computed in the
	// workflow as a user's workflow would.
	Label oncekey.Outcome `json:"label,omitempty"`
	Next  string          `json:"next,omitempty"`
	// Reason and EffectReference are the label's, for a result read with RawLabels.
	Reason          string `json:"reason,omitempty"`
	EffectReference string `json:"effect_reference,omitempty"`
	// Benign: the application error carries temporal.ApplicationErrorCategoryBenign (an
	// expected refusal, which the SDK does not log as an error).
	Benign bool `json:"benign,omitempty"`
}

// AgentWorkflow makes the calls in order and reports each result or error.
func AgentWorkflow(ctx workflow.Context, in workflowInput) ([]callResult, error) {
	stc := in.StartToClose
	if stc == 0 {
		stc = 10 * time.Second
	}
	initial := in.Initial
	if initial == 0 {
		initial = 100 * time.Millisecond
	}
	rp := &retryPolicy{InitialInterval: initial, BackoffCoefficient: in.Coefficient, MaximumInterval: in.MaxInterval, MaximumAttempts: in.MaxAttempts}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    stc,
		ScheduleToCloseTimeout: in.ScheduleToClose,
		HeartbeatTimeout:       in.Heartbeat,
		RetryPolicy:            rp,
	})
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: stc, RetryPolicy: rp})
	if in.Tenant != "" {
		ctx = oncekey.WithTenant(ctx, in.Tenant)
	}
	var out []callResult
	for _, c := range in.Calls {
		cctx := ctx
		if c.StepID != "" {
			cctx = oncekey.WithStepID(ctx, c.StepID)
		}
		var r callResult
		var err error
		switch {
		case c.Local:
			err = workflow.ExecuteLocalActivity(cctx, c.Tool, c.Req).Get(ctx, &r.Ticket)
		case c.Tool == "CreateTicket" && in.RawLabels:
			var raw converter.RawValue
			if err = workflow.ExecuteActivity(cctx, c.Tool, c.Req).Get(ctx, &raw); err == nil {
				tr := oncekey.Label(raw, nil)
				r.Label, r.Next, r.Reason, r.EffectReference = tr.Status, tr.NextAction, tr.Reason, tr.EffectReference
				err = converter.GetDefaultDataConverter().FromPayload(raw.Payload(), &r.Ticket)
			}
		case c.Tool == "CreateTicket":
			err = workflow.ExecuteActivity(cctx, c.Tool, c.Req).Get(ctx, &r.Ticket)
		default:
			err = workflow.ExecuteActivity(cctx, c.Tool, c.Req.Customer).Get(ctx, &r.Text)
		}
		if err != nil {
			r.Err = err.Error()
			if d, ok := oncekey.ErrorDetails(err); ok {
				r.Detail = d.Message
			}
			r.Type = errType(err)
			tr := oncekey.Label(nil, err)
			r.Label, r.Next = tr.Status, tr.NextAction
			var appErr *temporal.ApplicationError
			r.Benign = errors.As(err, &appErr) && appErr.Category() == temporal.ApplicationErrorCategoryBenign
		}
		out = append(out, r)
	}
	return out, nil
}

type retryPolicy = temporal.RetryPolicy

func temporalNonRetryable(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, "downstream.Invalid", nil)
}

// errType returns the application error type in err's chain, or "".
func errType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}
