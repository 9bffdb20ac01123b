// Package reconcile is the reconciliation contract: the Resolution an operator or a receipt
// lookup gives for an operation whose outcome is unknown, the signal, query and workflow ID scheme
// of the reconciliation workflow, and the operator API (List, Resolve, Status) used by the CLI.
// It must not import the interceptor, workflows, activities or worker packages.
//
// Settling unknown outcomes: https://github.com/oncekey/oncekey/blob/main/docs/settling-unknowns.md
package reconcile
