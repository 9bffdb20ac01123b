// Package oncekeytest proves an agent's own workflow under the faults oncekey exists for: it
// runs the test's real workflow and tool functions with their Registry, injects lost answers,
// failures, stalls, crashes, re-proposals, resets and re-runs around the tools, acts as the
// person on call (or the receipt lookup) for unknown outcomes and approvals, counts the effects
// the test's own downstream landed, and asserts in one call that each tool landed at most once
// per intended call.
//
// A test reads:
//
//	reg := oncekey.NewRegistry() // the worker's, with the tools' policies
//	kit := oncekeytest.New(t, oncekeytest.Config{
//		Registry: reg,
//		Effects:  ledger.Counts, // what the fake downstream landed, by tool
//		Plan:     oncekeytest.RandomMix(7),
//	})
//	kit.RegisterWorkflow(AgentWorkflow)
//	kit.RegisterActivity(activities)
//	run := kit.ExecuteWorkflow(AgentWorkflow, "refund order A-1001")
//	require.NoError(t, run.Err())
//	kit.RequireAtMostOnce() // fails naming each tool that landed twice, with the table
//	kit.RequireModelSafe()  // no operator detail, no success a record does not back
//
// # Where it runs
//
// Without Config.Client the kit runs each workflow on the SDK's test environment
// (go.temporal.io/sdk/testsuite, no server, a new environment per run), with a memstore unless
// Config.Store is set. With Config.Client and Config.Store (a dev server and a pgstore.Store)
// the same test code runs on that server: the kit starts a worker on Config.TaskQueue at the
// first ExecuteWorkflow and stops it when the test ends. Config.Disabled runs the same
// workflows and faults without oncekey, with Temporal's retries as the workflow asks: the
// control that shows the plan does repeat effects.
//
// # Faults
//
// The kit installs two interceptors around oncekey's, never changing the workflow or the tools:
// the first of the worker's interceptors (outside oncekey's on the activity side) and the last
// (inside oncekey's, next to the tool's function, and outside oncekey's on the workflow side).
//
//	fault              where                          what happens                      the kit as receipt lookup
//	FailBeforeBody     inside oncekey, before body    error; nothing sent               settles not applied
//	Stall              outside oncekey                start-to-close timeout; nothing   -
//	                                                  claimed
//	LoseAnswer         outside oncekey, after it      the effect and its record land;   -
//	                                                  the workflow sees a timeout
//	CrashMidBody       inside oncekey, after body     the effect lands; the result is   settles applied with the
//	                                                  lost; the attempt ends in error   body's result
//	Repropose          workflow side                  the call is scheduled again once  -
//	                                                  answered
//	Reset              after the run                  reset to before the call (test    -
//	                                                  environment: as Rerun)
//	Rerun              after the run                  the workflow runs again under     -
//	                                                  its ID with its input
//
// On the test environment Stall and LoseAnswer end the attempt at once with the timeout failure
// Temporal reports for it; on a server the attempt waits, and the server times it out after the
// activity's StartToCloseTimeout (keep it short in tests). The kit records each call's per-call
// fault in the workflow's history (a SideEffect marker), so a replay makes the same commands. A Plan chooses each call's and
// each attempt's fault: Script names them, Mix draws them from a seed.
//
// # What is counted
//
// Intended effects are counted from what the workflow schedules (one per Config.Intent name:
// by default the step ID, else the tool and its arguments, in one workflow), landed effects from
// Config.Effects, replays and unknowns from oncekey's events (worker.Options.OnEvent). Reads are
// the answers the workflow got from each tool call, what a loop hands its model; Read.Problem
// checks one. Report and its String give the table RequireAtMostOnce prints.
package oncekeytest
