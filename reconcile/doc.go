// Package reconcile is the reconciliation contract: the Resolution an operator or a receipt
// lookup gives for an operation whose outcome is unknown, the signal, query and workflow ID scheme
// of the reconciliation workflow, and the operator API (List, Resolve, Status) used by the CLI;
// likewise the Decision a person gives on a call that waits for approval, the approval
// workflow's names and types, and Decide and QueryApproval.
// It must not import the interceptor, workflows, activities or worker packages.
//
// Settling unknown outcomes: https://github.com/oncekey/oncekey/blob/main/docs/settling-unknowns.md
package reconcile
