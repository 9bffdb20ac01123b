// Package interceptor is oncekey's Temporal worker interceptor. Its activity inbound side claims
// an operation key before a claimed tool's body runs, replays stored results and records
// outcomes; its workflow outbound side carries step IDs and tenants in headers, runs Effectful
// tools' retries itself and hands unknown outcomes to the reconciliation workflow, which it
// starts by name. It must not import the workflows or worker packages.
package interceptor
