package oncekey_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/httpproof"
)

// These tests send requests through IdempotencyKeyTransport, in a context like a claimed tool's
// body (an operation key and the interceptor's record), to real servers on loopback, and read
// what the record proves. Each server counts the requests that reached it: a request proven not
// sent never does, a refused one changes nothing, and every request that reached a server with an
// effect possible leaves the attempt unproven.

const proofKey = "ok1_00000000000000000000000000000000000000000000000000000000000000bb"

// toolContext returns a context like a claimed tool body's, and the function reading its proof.
func toolContext(t *testing.T) (context.Context, func() httpproof.Proof) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return httpproof.With(oncekey.ContextWithOperationKey(ctx, proofKey))
}

// counting is a downstream on loopback answering every request with status (and Retry-After,
// when set) after reading its body; it counts the requests that reached it.
type counting struct {
	*httptest.Server
	mu   sync.Mutex
	hits int
	keys []string
}

func newCounting(t *testing.T, status int, retryAfter string) *counting {
	t.Helper()
	c := &counting{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c.mu.Lock()
		c.hits++
		c.keys = append(c.keys, r.Header.Get(oncekey.IdempotencyKeyHeader))
		c.mu.Unlock()
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *counting) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// post sends a POST of a small JSON body to url through client, with ctx, and closes the answer.
func post(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"subject":"printer on fire"}`))
	if err != nil {
		return 0, err
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, nil
}

func keyClient(base http.RoundTripper) *http.Client {
	return &http.Client{Transport: &oncekey.IdempotencyKeyTransport{Base: base}}
}

// freshBase is a transport of its own (no proxy from the environment, no pooled connection
// shared with other tests).
func freshBase(t *testing.T) *http.Transport {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func TestTransportProofNotSent(t *testing.T) {
	t.Parallel()
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		ctx, proof := toolContext(t)
		_, err := post(ctx, keyClient(nil), "http://"+closedAddr(t)+"/tickets")
		require.ErrorContains(t, err, "connection refused")
		require.Equal(t, httpproof.Proof{NotApplied: true, Retryable: true, Requests: 1}, proof())
	})
	t.Run("DNS lookup failed", func(t *testing.T) {
		t.Parallel()
		// The resolver's server is a closed loopback port: the lookup fails before any dial.
		dns := closedAddr(t)
		base := freshBase(t)
		base.DialContext = (&net.Dialer{Resolver: &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", dns)
		}}}).DialContext
		ctx, proof := toolContext(t)
		_, err := post(ctx, keyClient(base), "http://tickets.oncekey.test/tickets")
		var dnsErr *net.DNSError
		require.ErrorAs(t, err, &dnsErr)
		require.Equal(t, httpproof.Proof{NotApplied: true, Retryable: true, Requests: 1}, proof())
	})
	t.Run("TLS handshake failed", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		hits := 0
		srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			mu.Lock()
			hits++
			mu.Unlock()
		}))
		srv.Config.ErrorLog = quietLog()
		t.Cleanup(srv.Close)
		ctx, proof := toolContext(t)
		// The client does not trust the server's certificate (httptest's own).
		_, err := post(ctx, keyClient(freshBase(t)), srv.URL+"/tickets")
		require.ErrorContains(t, err, "certificate")
		require.Equal(t, httpproof.Proof{NotApplied: true, Retryable: true, Requests: 1}, proof())
		mu.Lock()
		defer mu.Unlock()
		require.Zero(t, hits, "the request never reached the handler")
	})
	t.Run("connection reset before the header was written", func(t *testing.T) {
		t.Parallel()
		srv := newResetting(t)
		// The server resets the connection once the request's first byte reached it. The header
		// is far larger than what the client's socket and the server's can hold, so writing it
		// fails before it is whole, and net/http reports the end of the write with that error.
		base := freshBase(t)
		base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				err = conn.(*net.TCPConn).SetWriteBuffer(64 << 10)
			}
			return conn, err
		}
		ctx, proof := toolContext(t)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv.addr+"/tickets", strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set("X-Padding", strings.Repeat("p", 4<<20))
		_, err = keyClient(base).Do(req)
		require.Error(t, err)
		require.Equal(t, httpproof.Proof{NotApplied: true, Retryable: true, Requests: 1}, proof())
	})
}

// resetting accepts one connection, reads one byte from it and resets it (SO_LINGER 0): no
// request reaches anything.
type resetting struct {
	addr string
}

func newResetting(t *testing.T) *resetting {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = conn.Read(make([]byte, 1))
		_ = conn.(*net.TCPConn).SetLinger(0)
		_ = conn.Close()
	}()
	return &resetting{addr: l.Addr().String()}
}

func TestTransportProofStatuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status     int
		retryAfter string
		want       httpproof.Proof
	}{
		{http.StatusBadRequest, "", httpproof.Proof{NotApplied: true, Status: 400, Requests: 1}},
		{http.StatusUnauthorized, "", httpproof.Proof{NotApplied: true, Status: 401, Requests: 1}},
		{http.StatusForbidden, "", httpproof.Proof{NotApplied: true, Status: 403, Requests: 1}},
		{http.StatusNotFound, "", httpproof.Proof{NotApplied: true, Status: 404, Requests: 1}},
		{http.StatusUnprocessableEntity, "", httpproof.Proof{NotApplied: true, Status: 422, Requests: 1}},
		{http.StatusTooManyRequests, "7", httpproof.Proof{NotApplied: true, Retryable: true, Status: 429, RetryAfter: 7 * time.Second, Requests: 1}},
		{http.StatusTooManyRequests, "soon", httpproof.Proof{NotApplied: true, Retryable: true, Status: 429, Requests: 1}},
		// Statuses that prove nothing: the request was written and the server may have acted.
		{http.StatusOK, "", httpproof.Proof{Requests: 1}},
		{http.StatusCreated, "", httpproof.Proof{Requests: 1}},
		{http.StatusFound, "", httpproof.Proof{Requests: 1}},
		// 409: another request with the same key is still being processed (the IETF draft), so
		// the operation may be under way.
		{http.StatusConflict, "", httpproof.Proof{Requests: 1}},
		{http.StatusConflict, "2", httpproof.Proof{Requests: 1}},
		{http.StatusGone, "", httpproof.Proof{Requests: 1}},
		{http.StatusInternalServerError, "", httpproof.Proof{Requests: 1}},
		{http.StatusBadGateway, "", httpproof.Proof{Requests: 1}},
		{http.StatusServiceUnavailable, "3", httpproof.Proof{Requests: 1}},
		{http.StatusGatewayTimeout, "", httpproof.Proof{Requests: 1}},
	} {
		t.Run(strconv.Itoa(tc.status)+tc.retryAfter, func(t *testing.T) {
			t.Parallel()
			srv := newCounting(t, tc.status, tc.retryAfter)
			ctx, proof := toolContext(t)
			client := keyClient(freshBase(t))
			client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			got, err := post(ctx, client, srv.URL+"/tickets")
			require.NoError(t, err)
			require.Equal(t, tc.status, got)
			require.Equal(t, tc.want, proof())
			require.Equal(t, 1, srv.count(), "the request reached the server once")
			require.Equal(t, []string{proofKey}, srv.keys)
		})
	}
}

// Over HTTP/2 (TLS, a client that trusts the server) the trace says the same.
func TestTransportProofHTTP2(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		want   httpproof.Proof
	}{
		{http.StatusTooManyRequests, httpproof.Proof{NotApplied: true, Retryable: true, Status: 429, RetryAfter: time.Second, Requests: 1}},
		{http.StatusNotFound, httpproof.Proof{NotApplied: true, Status: 404, Requests: 1}},
		{http.StatusServiceUnavailable, httpproof.Proof{Requests: 1}},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			t.Parallel()
			var proto string
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				proto = r.Proto
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(tc.status)
			}))
			srv.EnableHTTP2 = true
			srv.StartTLS()
			t.Cleanup(srv.Close)
			ctx, proof := toolContext(t)
			got, err := post(ctx, keyClient(srv.Client().Transport), srv.URL+"/tickets")
			require.NoError(t, err)
			require.Equal(t, tc.status, got)
			require.Equal(t, "HTTP/2.0", proto)
			require.Equal(t, tc.want, proof())
			// And a connection refused on the same transport.
			ctx, proof = toolContext(t)
			_, err = post(ctx, keyClient(srv.Client().Transport), "https://"+closedAddr(t)+"/tickets")
			require.Error(t, err)
			require.Equal(t, httpproof.Proof{NotApplied: true, Retryable: true, Requests: 1}, proof())
		})
	}
}

// Over HTTP/2 net/http writes and flushes a request's header in a goroutine of its own and
// reports WroteHeaders only after, and a round trip ends as soon as its context does. Here the
// whole request (a POST without a body: one HEADERS frame) is on the wire when the client
// connection's Write stalls; the server counts the request, the context ends, and the round trip
// returns an error with no header reported written. The request may have had its effect: the
// record must not call it not sent.
func TestTransportProofHTTP2WriteStalled(t *testing.T) {
	t.Parallel()
	reached, release, stall := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	hits, proto := 0, ""
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		proto = r.Proto
		mu.Unlock()
		close(reached)
		<-release
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	base := freshBase(t)
	base.Protocols = new(http.Protocols)
	base.Protocols.SetUnencryptedHTTP2(true)
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stallingConn{Conn: conn, stall: stall}, nil
	}
	t.Cleanup(func() { close(stall) })

	ctx, proof := toolContext(t)
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/tickets/T-1/close", nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		res, err := keyClient(base).Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	<-reached
	cancel() // the attempt's deadline, while the client is still writing the request
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, httpproof.Proof{Requests: 1}, proof(), "the server had the request: it may have acted")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, hits)
	require.Equal(t, "HTTP/2.0", proto)
}

// stallingConn is a client connection whose Write, once it has sent a request's HEADERS frame
// (HTTP/2 frame type 1 on a stream other than 0), waits for stall to close before returning.
type stallingConn struct {
	net.Conn
	stall <-chan struct{}
}

func (c *stallingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err == nil && sendsHeaders(b) {
		<-c.stall
	}
	return n, err
}

// sendsHeaders reports whether b, the client's bytes of one write (the connection preface and
// whole frames), holds a HEADERS frame of a stream.
func sendsHeaders(b []byte) bool {
	b = bytes.TrimPrefix(b, []byte(http2Preface))
	for len(b) >= 9 {
		length := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
		if b[3] == 1 && binary.BigEndian.Uint32(b[5:9])&0x7fffffff != 0 {
			return true
		}
		b = b[min(len(b), 9+length):]
	}
	return false
}

const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

func TestTransportProofUnproven(t *testing.T) {
	t.Parallel()
	t.Run("server hijacks and closes before reading the body", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		hits := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits++
			mu.Unlock()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		}))
		t.Cleanup(srv.Close)
		ctx, proof := toolContext(t)
		_, err := post(ctx, keyClient(freshBase(t)), srv.URL+"/tickets")
		require.Error(t, err)
		require.Equal(t, httpproof.Proof{Requests: 1}, proof(), "the handler had the request: it may have acted")
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, 1, hits)
	})
	t.Run("server stalls after reading the request", func(t *testing.T) {
		t.Parallel()
		read, release := make(chan struct{}), make(chan struct{})
		var mu sync.Mutex
		effects := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			mu.Lock()
			effects++
			mu.Unlock()
			close(read)
			<-release
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		ctx, proof := toolContext(t)
		ctx, cancel := context.WithCancel(ctx)
		go func() {
			<-read
			cancel() // the attempt's deadline, while waiting for the answer
		}()
		_, err := post(ctx, keyClient(freshBase(t)), srv.URL+"/tickets")
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, httpproof.Proof{Requests: 1}, proof())
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, 1, effects, "the server had the request and acted")
	})
	t.Run("a request still in flight", func(t *testing.T) {
		t.Parallel()
		read, release := make(chan struct{}), make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(read)
			<-release
			w.WriteHeader(http.StatusNotFound)
		}))
		t.Cleanup(srv.Close)
		refused := newCounting(t, http.StatusTooManyRequests, "")
		ctx, proof := toolContext(t)
		client := keyClient(freshBase(t))
		done := make(chan error, 1)
		go func() {
			_, err := post(ctx, client, srv.URL+"/tickets")
			done <- err
		}()
		<-read
		_, err := post(ctx, client, refused.URL+"/tickets")
		require.NoError(t, err)
		require.Equal(t, httpproof.Proof{Requests: 2}, proof(), "the first request has no answer yet")
		close(release)
		require.NoError(t, <-done)
		require.Equal(t, httpproof.Proof{NotApplied: true, Status: 404, Requests: 2}, proof(), "both refused; the last to finish decides")
	})
	t.Run("a transport that does not trace", func(t *testing.T) {
		t.Parallel()
		ctx, proof := toolContext(t)
		silent := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("dial tcp: connection refused") })
		_, err := post(ctx, keyClient(silent), "http://tickets.oncekey.test/tickets")
		require.Error(t, err)
		require.Equal(t, httpproof.Proof{Requests: 1}, proof(), "without a trace an error proves nothing")
		srv := newCounting(t, http.StatusNotFound, "")
		ctx, proof = toolContext(t)
		plain := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return freshBase(t).RoundTrip(r.WithContext(context.Background()))
		})
		_, err = post(ctx, keyClient(plain), srv.URL+"/tickets")
		require.NoError(t, err)
		require.Equal(t, httpproof.Proof{NotApplied: true, Status: 404, Requests: 1}, proof(), "a status is proof by itself")
	})
}

// An attempt is proven only when every request of a method that is not safe was: one that
// reached the server with an effect possible leaves it unproven, whatever came after.
func TestTransportProofSeveralRequests(t *testing.T) {
	t.Parallel()
	created := newCounting(t, http.StatusCreated, "")
	limited := newCounting(t, http.StatusTooManyRequests, "")
	conflict := newCounting(t, http.StatusConflict, "")
	missing := newCounting(t, http.StatusNotFound, "")
	unavailable := newCounting(t, http.StatusServiceUnavailable, "")
	lookup := newCounting(t, http.StatusOK, "")
	refused := "http://" + closedAddr(t)
	send := func(t *testing.T, ctx context.Context, method, url string) {
		req, err := http.NewRequestWithContext(ctx, method, url+"/tickets", nil)
		require.NoError(t, err)
		res, err := keyClient(nil).Do(req)
		if err == nil {
			res.Body.Close()
		}
	}
	for _, tc := range []struct {
		name  string
		sends [][2]string
		want  httpproof.Proof
	}{
		{"first applied, second refused", [][2]string{{"POST", created.URL}, {"POST", limited.URL}}, httpproof.Proof{Requests: 2}},
		{"first refused, second 409", [][2]string{{"POST", missing.URL}, {"POST", conflict.URL}}, httpproof.Proof{Requests: 2}},
		{"first applied, second not sent", [][2]string{{"PUT", created.URL}, {"DELETE", refused}}, httpproof.Proof{Requests: 2}},
		{"first 503, second not sent", [][2]string{{"POST", unavailable.URL}, {"POST", refused}}, httpproof.Proof{Requests: 2}},
		{"first refused, second not sent", [][2]string{{"POST", missing.URL}, {"POST", refused}}, httpproof.Proof{NotApplied: true, Retryable: true, Requests: 2}},
		{"first not sent, second refused", [][2]string{{"POST", refused}, {"PATCH", missing.URL}}, httpproof.Proof{NotApplied: true, Status: 404, Requests: 2}},
		{"a lookup, then refused", [][2]string{{"GET", lookup.URL}, {"POST", limited.URL}}, httpproof.Proof{NotApplied: true, Retryable: true, Status: 429, Requests: 1}},
		{"lookups only", [][2]string{{"GET", lookup.URL}, {"HEAD", refused}}, httpproof.Proof{}},
		{"a method that is not safe, refused", [][2]string{{"PURGE", missing.URL}}, httpproof.Proof{NotApplied: true, Status: 404, Requests: 1}},
		{"a method that is not safe, applied", [][2]string{{"PURGE", created.URL}}, httpproof.Proof{Requests: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, proof := toolContext(t)
			for _, s := range tc.sends {
				send(t, ctx, s[0], s[1])
			}
			require.Equal(t, tc.want, proof())
		})
	}
	// Outside a tool's body nothing is recorded and the transport adds no trace.
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, created.URL, nil)
	require.NoError(t, err)
	traced, done := httpproof.Track(req)
	require.Nil(t, done)
	require.Same(t, req, traced)
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "0": 0, "-3": 0, "12": 12 * time.Second, "1.5": 0, "soon": 0, "99999999999": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
	} {
		require.Equal(t, want, httpproof.RetryAfter(v, now), "%q", v)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }
