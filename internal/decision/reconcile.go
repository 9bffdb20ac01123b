package decision

import (
	"time"
)

// Input is the input of the reconciliation workflow. The interceptor fills it in when it hands
// an operation over.
type Input struct {
	Tenant       string `json:"tenant"`
	OperationKey string `json:"operation_key"`
	Tool         string `json:"tool"`
	// ActivityType is the activity type the tool was called through, when a Route named the tool
	// (Tool is then the Route's name for it): a resolution's result is checked against that
	// Route's result type (oncekey.Registry.CheckResult). Empty for a tool that is its own
	// activity type, and in inputs made before it existed.
	ActivityType string `json:"activity_type,omitempty"`
	WorkflowID   string `json:"workflow_id"`
	StepID       string `json:"step_id"`
	// Reason says why the outcome is unknown (the error or timeout that ended the attempt).
	Reason string `json:"reason,omitempty"`
	// EscalationTimeout bounds the wait for a Resolution; 0 waits forever. When it passes the
	// workflow fails with an error saying nobody resolved the operation.
	EscalationTimeout time.Duration `json:"escalation_timeout,omitempty"`
	// ClaimDeadline, if set, is the latest time the attempt handed over may still claim the
	// key. Until then a missing record means the claim has not landed yet: the workflow waits
	// (StateWaitingForClaim) and inspects again, and settles NotApplied only once the deadline has
	// passed with still no record. The zero value settles NotApplied at once. The interceptor sets
	// it when a cancelled workflow hands over an attempt that may not have claimed yet.
	ClaimDeadline time.Time `json:"claim_deadline,omitzero"`
	// Continued is set by the workflow itself when it continues as new (after MaxInvalidSignals
	// invalid signals in one run); callers leave it nil.
	Continued *Continued `json:"continued,omitempty"`
	// MetricsTenant adds the tenant as a tag to the workflow's metrics
	// (okworker.Options.MetricsTenantTag).
	MetricsTenant bool `json:"metrics_tenant,omitempty"`
	// SearchAttributes makes the workflow set its typed search attributes (SearchAttributeStatus
	// and the others) on every change of its state (okworker.Options.SearchAttributes). Off in
	// every history recorded before it existed, so those replay without the upserts.
	SearchAttributes bool `json:"search_attributes,omitempty"`
}

// Continued is what a reconciliation workflow carries into the run it continues as new: the
// wait for a person goes on where it was.
type Continued struct {
	// WaitingSince is when the first run started waiting for a Resolution.
	WaitingSince time.Time `json:"waiting_since"`
	// EscalationDeadline is when the wait escalates (zero: never), counted from WaitingSince.
	EscalationDeadline time.Time `json:"escalation_deadline,omitzero"`
	// InvalidSignals counts the invalid signals of all earlier runs.
	InvalidSignals int `json:"invalid_signals"`
	// LastInvalidSignal and LastInvalidRequestID are the earlier run's StatusReport fields.
	LastInvalidSignal    string `json:"last_invalid_signal,omitempty"`
	LastInvalidRequestID string `json:"last_invalid_request_id,omitempty"`
}

// MaxInvalidSignals bounds the invalid SignalName signals one run of the reconciliation workflow
// takes. Every signal is written to the workflow's history, refused or not; past this many the
// workflow continues as new (keeping its escalation deadline, see Continued), so signals that
// change nothing cannot grow a history up to Temporal's limits and keep the real resolution
// out. A valid signal or update is still answered, before and after. Refused updates leave no
// history and are not counted.
const MaxInvalidSignals = 100

const // SearchStatusRequestingApproval: the workflow asks the store (ApprovalStateRequesting); a
// repeat of a decided call goes from here to its decision without waiting.
SearchStatusRequestingApproval = "requesting_approval"
