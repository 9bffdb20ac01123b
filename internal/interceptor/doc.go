// Package interceptor is oncekey's Temporal worker interceptor. Its activity inbound side claims
// an operation key before a claimed tool's body runs, replays stored results and records
// outcomes; its workflow outbound side carries step IDs and tenants in headers, runs Effectful
// tools' retries itself and hands unknown outcomes to the reconciliation workflow, which it
// starts by name. It must not import the workflows or worker packages.
//
// Install it on every worker that runs claimed tools or the workflows calling them: most simply
// with the worker package's plugin on the client, or with New in worker.Options.Interceptors.
//
// What it does not do: local activities of Idempotent or Effectful tools are refused (an error
// of type oncekey.ErrTypeConfig at schedule time and on the worker), because local-activity
// retries cannot be turned off and their outcomes cannot be reconciled. Idempotent tools are left
// to Temporal's retry policy and are not reconciled. A record that was never created is read by
// reconciliation as "the body never ran"; an attempt that times out before claiming cannot claim
// afterwards (the claim checks the activity's context first), and a claim that still lands late is
// met by the re-runs, which keep the first attempt's operation key (its explicit step ID, or its
// default step "<runID>/<first activity ID>").
//
// The claim protocol and the workflow side: https://github.com/oncekey/oncekey/blob/main/docs/design.md#the-claim-protocol
// Options, with defaults: https://github.com/oncekey/oncekey/blob/main/docs/configuration.md#okworkeroptions
package interceptor
