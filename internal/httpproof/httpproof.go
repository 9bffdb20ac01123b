package httpproof

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"time"
)

// Verdict is what one request's trace and answer prove.
type Verdict int

const (
	// Unproven: the request may have reached the server and had an effect (a 2xx, 3xx or 5xx
	// answer, 409 or another 4xx status, an error after its header was written, a request still
	// in flight, including one whose round trip ended while the transport was still writing it,
	// or a transport that does not trace its connections).
	Unproven Verdict = iota
	// NotSent: the request never left: it failed before the transport had a connection for it
	// (dial, DNS, TLS handshake, proxy), or the transport reported the end of writing it
	// (WroteRequest) with an error and no header written whole.
	NotSent
	// Refused: the server answered with a status that says it did nothing (Refusal).
	Refused
)

// Refusal says whether status is one that says the server did nothing with the request, as the
// IETF draft "The Idempotency-Key HTTP Header Field" and Stripe use them, and whether the same
// request may succeed later: 400, 401, 403, 404 and 422 (a request the server will refuse again,
// not retryable); 429 (too many requests), retryable. Any other status proves nothing, 409
// included: in the draft it answers a request whose key another request still being processed
// holds, so the operation may be under way.
func Refusal(status int) (refused, retryable bool) {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity:
		return true, false
	case http.StatusTooManyRequests:
		return true, true
	}
	return false, false
}

// Safe reports whether method is one of HTTP's safe methods (RFC 9110 section 9.2.1: GET, HEAD,
// OPTIONS, TRACE), read-only by definition: a Record does not count them.
func Safe(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// request is one request a Record follows.
type request struct {
	// traced: the transport reported looking for a connection (GetConn or GotConn), so its
	// silence about the connection is meaningful.
	traced bool
	// connected: the transport reported having a connection for the request (GotConn). From
	// then on the request may be on the wire: over HTTP/2 the header is written and flushed
	// before WroteHeaders fires, in a goroutine of its own that a round trip ending with its
	// context does not wait for.
	connected bool
	// headers counts the times the request's header was written whole (WroteHeaders, or a
	// WroteRequest without error): more than once means the transport sent it again inside one
	// RoundTrip.
	headers int
	// wrote: WroteRequest fired (with or without error): the transport is done writing.
	wrote bool
	// done: the round trip returned, with failed (an error) or the answer's status and
	// Retry-After.
	done       bool
	failed     bool
	status     int
	retryAfter string
	doneAt     time.Time
}

// verdict is what q proves. A failed round trip proves the request never left only when the
// transport traced it and either never had a connection for it (the dial, DNS lookup, TLS
// handshake or proxy failed, or the context ended first) or reported the end of writing it
// (WroteRequest) with no header written whole; a request with a connection whose writing has
// not ended is in flight.
func (q *request) verdict() (v Verdict, retryable bool) {
	switch {
	case !q.done:
		return Unproven, false
	case q.failed:
		if q.traced && q.headers == 0 && (!q.connected || q.wrote) {
			return NotSent, true
		}
	case q.headers <= 1:
		if refused, retryable := Refusal(q.status); refused {
			return Refused, retryable
		}
	}
	return Unproven, false
}

// Record is the requests one attempt of a tool's body sent through the transport, in the order
// they finished. It is safe for concurrent use.
type Record struct {
	mu       sync.Mutex
	requests []*request
	finished []*request
}

// Proof is what a Record proves about the attempt.
type Proof struct {
	// NotApplied: the record holds at least one request of a method that is not safe, and every
	// such request either never left or was refused (safe methods do not count).
	NotApplied bool
	// Retryable: the request that finished last says the same request may succeed later (it
	// never left, or its status is 429).
	Retryable bool
	// RetryAfter is that request's Retry-After (seconds or an HTTP date, from now); 0 when none.
	RetryAfter time.Duration
	// Status is that request's HTTP status; 0 when it never left.
	Status int
	// Requests counts the requests of a method that is not safe.
	Requests int
}

// Reason says in a few words what the proof rests on, for logs and the call's details:
// "not applied: the request was not sent" or "not applied: the server answered 404".
func (p Proof) Reason() string {
	if p.Status == 0 {
		return "not applied: the request was not sent"
	}
	return "not applied: the server answered " + strconv.Itoa(p.Status)
}

type recordKey struct{}

// With returns ctx carrying a new Record, and the function that reads what it proves so far.
func With(ctx context.Context) (context.Context, func() Proof) {
	r := &Record{}
	return context.WithValue(ctx, recordKey{}, r), r.Proof
}

// Track follows req when its context carries a Record and its method is not safe: it returns the
// request to send (req with a client trace added to its context) and the function to call with
// what the round trip returned. Otherwise it returns req and nil.
func Track(req *http.Request) (*http.Request, func(*http.Response, error)) {
	r, _ := req.Context().Value(recordKey{}).(*Record)
	if r == nil || Safe(req.Method) {
		return req, nil
	}
	q := &request{}
	r.mu.Lock()
	r.requests = append(r.requests, q)
	r.mu.Unlock()
	trace := &httptrace.ClientTrace{
		GetConn:      func(string) { r.update(func() { q.traced = true }) },
		GotConn:      func(httptrace.GotConnInfo) { r.update(func() { q.traced, q.connected = true, true }) },
		WroteHeaders: func() { r.update(func() { q.headers++ }) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			// net/http reports WroteHeaders first, and an error here without it means the header
			// was not written whole; a transport that reports only WroteRequest wrote it.
			r.update(func() {
				q.wrote = true
				if info.Err == nil {
					q.headers = max(q.headers, 1)
				}
			})
		},
	}
	out := req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	return out, func(res *http.Response, err error) {
		r.update(func() {
			q.done, q.doneAt = true, time.Now()
			r.finished = append(r.finished, q)
			switch {
			case err != nil:
				q.failed = true
			case res != nil:
				q.status, q.retryAfter = res.StatusCode, res.Header.Get("Retry-After")
			}
		})
	}
}

func (r *Record) update(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// Proof returns what the record proves so far (see Proof).
func (r *Record) Proof() Proof {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := Proof{Requests: len(r.requests)}
	if len(r.requests) == 0 {
		return p
	}
	for _, q := range r.requests {
		if v, _ := q.verdict(); v == Unproven {
			return p
		}
	}
	last := r.finished[len(r.finished)-1]
	v, retryable := last.verdict()
	p.NotApplied, p.Retryable = true, retryable
	if v == Refused {
		p.Status = last.status
		if retryable {
			p.RetryAfter = RetryAfter(last.retryAfter, last.doneAt)
		}
	}
	return p
}

// RetryAfter parses a Retry-After header value, delay-seconds or an HTTP date, into a delay from
// now; 0 for an empty, unparsable or past value.
func RetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 || s > int64(365*24*time.Hour/time.Second) {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
