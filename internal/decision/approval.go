package decision

import (
	"time"
)

// ApprovalInput is the input of the approval workflow. The interceptor fills it in from the
// request the worker made (the worker's refusal of the call's attempt). The workflow reads the
// request itself from the store and acts only on it: Fingerprint says which call waits, Summary
// only labels the workflow until the store's summary is read.
type ApprovalInput struct {
	Tenant       string `json:"tenant"`
	OperationKey string `json:"operation_key"`
	Tool         string `json:"tool"`
	// Fingerprint is the call's fingerprint, as the worker computes it: an approval asked for
	// other arguments is not this call's.
	Fingerprint string `json:"fingerprint"`
	WorkflowID  string `json:"workflow_id"`
	StepID      string `json:"step_id,omitempty"`
	// Summary is what the approver sees (oncekey.ApprovalPolicy.Summary).
	Summary string `json:"summary"`
	// Timeout is how long a new request waits for a decision (oncekey.ApprovalPolicy.Timeout).
	Timeout time.Duration `json:"timeout"`
	// Retention is how long a decision is kept (the tool's Policy.Retention).
	Retention time.Duration `json:"retention"`
	// Continued is set by the workflow itself when it continues as new (after MaxInvalidSignals
	// invalid signals in one run); callers leave it nil.
	Continued *ApprovalContinued `json:"continued,omitempty"`
	// SearchAttributes makes the workflow set its typed search attributes (SearchAttributeStatus
	// with the SearchStatus… values, and the others) on every change of its state
	// (okworker.Options.SearchAttributes). Off in every history recorded before it existed, so
	// those replay without the upserts.
	SearchAttributes bool `json:"search_attributes,omitempty"`
	// EscalateAfter, when positive, escalates the request to EscalateTo once it has waited this
	// long undecided (oncekey.ApprovalPolicy.Escalation; Timeout is then the whole wait). Absent in
	// histories recorded before it existed, which replay without an escalation.
	EscalateAfter time.Duration `json:"escalate_after,omitempty"`
	EscalateTo    string        `json:"escalate_to,omitempty"`
}

// ApprovalContinued is what an approval workflow carries into the run it continues as new.
type ApprovalContinued struct {
	// Created: an earlier run asked the episode (ApprovalOutput.Created).
	Created bool `json:"created,omitempty"`
	// InvalidSignals counts the invalid signals of all earlier runs.
	InvalidSignals int `json:"invalid_signals"`
	// LastInvalidSignal and LastInvalidRequestID are the earlier run's ApprovalReport fields.
	LastInvalidSignal    string `json:"last_invalid_signal,omitempty"`
	LastInvalidRequestID string `json:"last_invalid_request_id,omitempty"`
}
