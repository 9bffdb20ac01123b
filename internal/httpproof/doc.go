// Package httpproof keeps what oncekey.IdempotencyKeyTransport can prove about the requests one
// attempt of a tool's body sent: that a request never left, or that its answer says nothing was
// done. The interceptor reads it when the body fails. It imports nothing of oncekey's.
package httpproof
