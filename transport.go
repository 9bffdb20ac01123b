package oncekey

import (
	"net/http"

	"github.com/oncekey/oncekey/internal/httpproof"
)

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
// oncekey cannot see. net/http itself treats a request with an Idempotency-Key header as safe to
// send again, and resends it once when a reused keep-alive connection breaks before the answer:
// in front of a downstream that does not deduplicate on the key, send the key under another
// header instead, or give Base keep-alives off (docs/agent-loops.md, "Outgoing HTTP and SDK
// retries").
//
// Inside an Effectful tool's body it also records, for the interceptor, what it can prove about
// each request whose method is not safe (not GET, HEAD, OPTIONS or TRACE): that the request never
// left (the connection, DNS lookup, TLS handshake or proxy failed before the transport had a
// connection for it, or the transport reported the end of writing it with an error before its
// header was written whole), or that the server answered with a status that says nothing was
// done (400, 401, 403, 404, 422: not retryable; 429: retryable, after Retry-After). When the body
// then returns an error, whatever error it is, and every such request of the attempt is proven
// so, the call ends not applied instead of unknown, as if the body had returned NotApplied;
// anything else (a 5xx, 409 or another status, an error after the header was written, a timeout
// waiting for the answer, a request still in flight, or one the transport was still writing when
// its round trip ended) proves nothing and the outcome stays unknown. Policy.DisableHTTPProof turns this off for a tool whose body has effects
// the transport does not see. The proof relies on net/http's client trace (httptrace), which its
// Transport reports for HTTP/1 and HTTP/2; through a Base that does not report it, only statuses
// prove anything.
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
	out := req
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		if key, ok := OperationKey(req.Context()); ok && key != "" {
			out = req.Clone(req.Context())
			out.Header.Set(IdempotencyKeyHeader, key)
		}
	}
	out, done := httpproof.Track(out)
	res, err := base.RoundTrip(out)
	if done != nil {
		done(res, err)
	}
	return res, err
}
