package desk

import (
	"net/http"

	"github.com/oncekey/oncekey"
)

// keyForwarding wraps next so that POST, PUT, PATCH and DELETE requests carry the operation key
// of their context (oncekey.OperationKey) as the Idempotency-Key header.
func keyForwarding(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if key, ok := oncekey.OperationKey(r.Context()); ok && key != "" && r.Header.Get("Idempotency-Key") == "" {
				r = r.Clone(r.Context())
				r.Header.Set("Idempotency-Key", key)
			}
		}
		return next.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
