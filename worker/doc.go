// Package worker wires oncekey onto Temporal workers in one call: NewPlugin returns a plugin
// that installs the interceptor and registers oncekey's workflow and activities; Register does
// the registration for callers who set the interceptor themselves. It may import every oncekey
// package; nothing in oncekey imports it.
//
// A first worker: https://github.com/oncekey/oncekey/blob/main/README.md#quick-start
// Registering tools: https://github.com/oncekey/oncekey/blob/main/docs/policies-and-keys.md#registering-tools
package worker
