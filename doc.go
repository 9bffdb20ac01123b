// Package oncekey makes side-effecting Temporal activities safe to repeat.
//
// It holds what a tool or workflow author writes against: effect classes, Policy and Registry
// (with Route for one activity that runs many tools), operation keys and step IDs, the errors and
// failure details a workflow sees, and the labels an agent loop reads (Label, ErrorText). The
// plugin and its options are package worker; the store contract is package oncekeystore, for
// store authors.
//
// The promise: at most one side effect per operation key within its retention window. An effect
// whose outcome cannot be proven is reported as unknown and handed to reconciliation, never
// guessed; after retention a digest-only tombstone refuses late duplicates for a further window.
//
// Start with: https://github.com/oncekey/oncekey/blob/main/README.md
// Tools and their policies: https://github.com/oncekey/oncekey/blob/main/docs/policies-and-keys.md
// What a caller and a model see: https://github.com/oncekey/oncekey/blob/main/docs/agent-loops.md
package oncekey
