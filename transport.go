package oncekey

import "net/http"

// IdempotencyKeyHeader is the header IdempotencyKeyTransport sets: the name Stripe-style APIs
// (and the IETF draft "The Idempotency-Key HTTP Header Field") read.
const IdempotencyKeyHeader = "Idempotency-Key"

// IdempotencyKeyTransport is an http.RoundTripper that sets the Idempotency-Key header of a
// POST, PUT, PATCH or DELETE request to the operation key of the claimed tool whose context the
// request carries (OperationKey(req.Context())), replacing any value the header had, so that a
// downstream that deduplicates by that header sees one key for every attempt of one operation.
// GET, HEAD, OPTIONS and other methods, and requests made outside a claimed tool's body, pass
// unchanged. The request given is never modified: a key is set on a clone. Base is the
// transport that sends the request; nil means http.DefaultTransport.
//
// Use it as the HTTP client of a vendor SDK called from an Effectful tool (openai-go's
// option.WithHTTPClient, anthropic-sdk-go's, any client taking an *http.Client) and pass the
// tool's context to every call: the SDK's own retries inside one attempt (openai-go and
// anthropic-sdk-go retry twice by default) then send the same key, and a downstream that honours
// it applies the request once. Against a downstream that does not, turn the SDK's retries off
// (option.WithMaxRetries(0)): a lost response retried inside the attempt is a second effect that
// oncekey cannot see.
type IdempotencyKeyTransport struct {
	Base http.RoundTripper
}

var _ http.RoundTripper = (*IdempotencyKeyTransport)(nil)

// RoundTrip sends req through Base, with the Idempotency-Key header set as the type's doc says.
func (t *IdempotencyKeyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return base.RoundTrip(req)
	}
	key, ok := OperationKey(req.Context())
	if !ok || key == "" {
		return base.RoundTrip(req)
	}
	out := req.Clone(req.Context())
	out.Header.Set(IdempotencyKeyHeader, key)
	return base.RoundTrip(out)
}
