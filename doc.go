// Package oncekey makes side-effecting Temporal activities safe to repeat.
//
// It holds the vocabulary shared by every other package: effect classes, Policy and Registry,
// operation keys and fingerprints, the Store contract, typed errors and outcome labels. It must
// not import any oncekey store, interceptor or workflow package.
//
// The promise: at most one side effect per operation key within its retention window. An effect
// whose outcome cannot be proven is reported as unknown and handed to reconciliation, never
// guessed; after retention a digest-only tombstone refuses late duplicates for a further window.
//
// Start with: https://github.com/oncekey/oncekey/blob/main/README.md
// Tools and their policies: https://github.com/oncekey/oncekey/blob/main/docs/policies-and-keys.md
// What a caller and a model see: https://github.com/oncekey/oncekey/blob/main/docs/agent-loops.md
package oncekey
