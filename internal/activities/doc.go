// Package activities holds oncekey's own activities: the store reads and writes the
// reconciliation workflow needs, the automatic receipt lookup (Policy.Reconcile), and the wait on
// another workflow's reconciliation. It must not import the workflows, interceptor or worker
// packages.
//
// How reconciliation works: https://github.com/oncekey/oncekey/blob/main/docs/design.md#reconciliation
package activities
