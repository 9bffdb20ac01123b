// Package workflows holds oncekey's own workflow: the reconciliation workflow, which settles an
// operation whose outcome is unknown (from the record, a receipt lookup, or a person's signal).
// It must not import the interceptor or worker packages.
//
// How reconciliation works: https://github.com/oncekey/oncekey/blob/main/docs/design.md#reconciliation
// Sending a decision: https://github.com/oncekey/oncekey/blob/main/docs/settling-unknowns.md
package workflows
