// Package faults is oncekey's fault-injection suite (`make faults`): a fake downstream that keeps
// its own ledger of effects, the tools, workflows and worker the suite runs (in process or as a
// child process that the tests SIGKILL), and the report the suite prints.
//
// It is test infrastructure, imported by the suite and its commands only; nothing in the library
// may import it.
//
// Running it: https://github.com/oncekey/oncekey/blob/main/docs/testing.md#the-projects-tests
package faults
