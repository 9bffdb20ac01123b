// Package worker wires oncekey onto Temporal workers in one call: NewPlugin returns a plugin
// that installs the interceptor and registers oncekey's workflow and activities; Register does
// the registration for callers who set the interceptor themselves. It may import every oncekey
// package; nothing in oncekey imports it.
package worker
