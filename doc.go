// Package oncekey makes side-effecting Temporal activities safe to repeat.
//
// It holds the vocabulary shared by every other package: effect classes, Policy and Registry,
// operation keys and fingerprints, the Store contract, typed errors and outcome labels. It must
// not import any oncekey store, interceptor or workflow package.
//
// The promise: at most one side effect per operation key within its retention window. An effect
// whose outcome cannot be proven is reported as unknown and handed to reconciliation, never
// guessed; after retention a digest-only tombstone refuses late duplicates for a further window.
package oncekey
