package reconcile

// WaitingQuery is the visibility query (Temporal UI list filter, `temporal workflow list
// --query`) that finds every reconciliation waiting for a person.
const WaitingQuery = `WorkflowType = "` + WorkflowName + `" AND ExecutionStatus = "Running" AND OncekeyStatus = "` + string(StateWaiting) + `"`

// ApprovalWaitingQuery is the visibility query (Temporal UI list filter, `temporal workflow
// list --query`) that finds every approval workflow waiting for a decision.
const ApprovalWaitingQuery = `WorkflowType = "` + ApprovalWorkflowName + `" AND ExecutionStatus = "Running" AND OncekeyStatus = "` + SearchStatusWaitingForApproval + `"`
