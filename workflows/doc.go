// Package workflows holds oncekey's own workflow: the reconciliation workflow, which settles an
// operation whose outcome is unknown (from the record, a receipt lookup, or a person's signal).
// It must not import the interceptor or worker packages.
package workflows
