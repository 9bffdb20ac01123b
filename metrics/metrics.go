// Package metrics names the metrics oncekey records through the Temporal SDK's metrics handler
// (client.Options.MetricsHandler), so they land wherever the SDK's own metrics go: Prometheus
// through contrib/tally, OpenTelemetry through contrib/opentelemetry, or any other handler.
//
// It imports only the SDK's metrics handler types. docs/observability.md lists every name as it
// appears under Prometheus naming (tally's NewPrometheusNamingScope: counters end in _total,
// timers in _seconds).
package metrics

import (
	"go.temporal.io/sdk/client"
)

// Names. No metric is ever tagged with an operation key (one series per call would be
// unbounded); TagTenant is added only when the user opts in (okworker.Options.MetricsTenantTag).
const (
	// ToolCalls counts claimed tool calls, tagged TagTool and TagOutcome (applied, replayed,
	// in_flight, rejected, conflict, unknown, expired, failed). Recorded by the activity interceptor.
	ToolCalls = "oncekey_tool_calls"
	// ClaimLatency times the Store.Claim round trips of a call, repeats included, tagged TagTool.
	ClaimLatency = "oncekey_claim_latency"
	// ReconciliationsStarted counts reconciliation workflows that started, tagged TagTool.
	ReconciliationsStarted = "oncekey_reconciliations_started"
	// ReconciliationsSettled counts reconciliation workflows that settled their operation,
	// tagged TagTool, TagOutcome (applied, not_applied, failed) and TagSettledBy.
	ReconciliationsSettled = "oncekey_reconciliations_settled"
	// ReconciliationsEscalated counts reconciliation workflows that nobody resolved within
	// their EscalationTimeout, tagged TagTool.
	ReconciliationsEscalated = "oncekey_reconciliations_escalated"
	// UnknownWait times how long an unknown outcome waited for a person, from when the workflow
	// started waiting to the decision, tagged TagTool.
	UnknownWait = "oncekey_unknown_wait"
	// UnknownsWaiting is a gauge: how many records are unknown (waiting for a decision) in the
	// store, tagged TagTool. Sampled from the store (worker.SampleUnknowns); every worker that
	// samples reports the same store, so aggregate with max, not sum.
	UnknownsWaiting = "oncekey_unknowns_waiting"
	// UnknownOldestWait is a gauge: in seconds, how long the oldest unknown record has been
	// waiting, tagged TagTool (0 when none waits). Sampled with UnknownsWaiting.
	UnknownOldestWait = "oncekey_unknown_oldest_wait_seconds"
	// ApprovalsWaiting is a gauge: how many approvals are pending (calls waiting for a person's
	// approval before they run, Policy.Approval) in the store, tagged TagTool. Sampled with
	// UnknownsWaiting from a store that keeps approvals; aggregate with max, not sum.
	ApprovalsWaiting = "oncekey_approvals_waiting"
	// ApprovalOldestWait is a gauge: in seconds, how long the oldest pending approval has been
	// waiting since it was asked, tagged TagTool (0 when none waits). Alert on it well before
	// ApprovalPolicy.Timeout, which denies the call when it passes.
	ApprovalOldestWait = "oncekey_approval_oldest_wait_seconds"
	// ApprovalsNearDeadline is a gauge: how many pending approvals are in the last quarter of
	// their wait (oncekeystore.Approval.NearDeadline), tagged TagTool. Sampled with ApprovalsWaiting;
	// alert on it above 0 to have them decided before they are timed out or escalated.
	ApprovalsNearDeadline = "oncekey_approvals_near_deadline"
	// OutboxPending is a gauge: how many messages of the store's transactional outbox are not
	// delivered yet (oncekeystore.OutboxStats.Pending), untagged. Sampled with UnknownsWaiting
	// from a store that is an oncekeystore.OutboxInspector (pgstore); aggregate with max.
	OutboxPending = "oncekey_outbox_pending"
	// OutboxFailing is a gauge: how many pending outbox messages failed their last delivery
	// (OutboxStats.Failing), untagged. Sampled with OutboxPending; alert on it staying above 0
	// (pgstore.Store.OutboxFailing lists them, with their last errors).
	OutboxFailing = "oncekey_outbox_failing"
	// OutboxOldestPending is a gauge: in seconds, how long the oldest pending outbox message has
	// waited since it was written (0 when none waits), untagged. Sampled with OutboxPending.
	OutboxOldestPending = "oncekey_outbox_oldest_pending_seconds"
	// ApprovalsEscalated counts approval requests escalated undecided past their policy's Timeout
	// (ApprovalPolicy.Escalation), tagged TagTool. Recorded by the approval workflow.
	ApprovalsEscalated = "oncekey_approvals_escalated"
	// DecisionsRefused counts decisions and resolutions refused because of their signature
	// (okworker.Options.TrustList), and approved calls not run because their approval's stored
	// signature did not verify, tagged TagTool and TagReason (unsigned, bad_signature, untrusted,
	// mismatch). Recorded by the worker.
	DecisionsRefused = "oncekey_decisions_refused"
	// HeadersRefused counts calls a worker with okworker.Options.HeaderKeys refused because their
	// tenant, step ID or first activity ID headers were not bound by a key it lists, tagged
	// TagTool, TagReason (unbound, unknown_key, mismatch) and TagEnforced ("true"; "false" for a
	// call okworker.Options.HeaderKeysReportOnly let run). Recorded by the worker; never tagged
	// with the tenant, which the refused headers chose.
	HeadersRefused = "oncekey_headers_refused"
)

// Tag keys.
const (
	TagTool      = "tool"
	TagOutcome   = "outcome"
	TagSettledBy = "settled_by"
	TagTenant    = "tenant"
	TagReason    = "reason"
	// TagEnforced is "true" or "false" on HeadersRefused: whether the worker refused the call or,
	// under okworker.Options.HeaderKeysReportOnly, only reported it.
	TagEnforced = "enforced"
)

// Values of TagSettledBy.
const (
	// SettledByRecord: the record was already settled (or never claimed) when the workflow
	// inspected it; nobody had to decide.
	SettledByRecord = "record"
	// SettledByReceipt: the tool's Reconcile hook (a receipt lookup downstream) decided.
	SettledByReceipt = "receipt"
	// SettledByPerson: a person's resolution decided.
	SettledByPerson = "person"
)

// Tagged returns h tagged with the tool, and with the tenant when withTenant is set.
func Tagged(h client.MetricsHandler, tool, tenant string, withTenant bool) client.MetricsHandler {
	tags := map[string]string{TagTool: tool}
	if withTenant {
		tags[TagTenant] = tenant
	}
	return h.WithTags(tags)
}
