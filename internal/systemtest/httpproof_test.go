package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/reconcile"
)

// helpdesk is a ticket service on loopback that answers each request it reads with the next of
// its statuses (the last repeats): 201 creates a ticket, one per Idempotency-Key. It counts the
// requests that reached it and the tickets it created.
type helpdesk struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	requests int
	tickets  map[string]Ticket
}

func newHelpdesk(t *testing.T, statuses ...int) *helpdesk {
	t.Helper()
	h := &helpdesk{statuses: statuses, tickets: map[string]Ticket{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in TicketRequest
		_ = json.NewDecoder(r.Body).Decode(&in)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.requests++
		status := h.statuses[0]
		if len(h.statuses) > 1 {
			h.statuses = h.statuses[1:]
		}
		if status != http.StatusCreated {
			w.Header().Set("Retry-After", "1")
			http.Error(w, http.StatusText(status), status)
			return
		}
		key := r.Header.Get(oncekey.IdempotencyKeyHeader)
		tk, ok := h.tickets[key]
		if !ok {
			tk = Ticket{ID: fmt.Sprintf("T-%d", len(h.tickets)+1), Subject: in.Subject, Seq: len(h.tickets) + 1}
			h.tickets[key] = tk
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(tk)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *helpdesk) counts() (requests, tickets int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests, len(h.tickets)
}

// postTicket is the body of an HTTP tool that knows nothing of oncekey's errors: it POSTs
// through IdempotencyKeyTransport to the next of urls (the last repeats) and returns an error of
// its own for any status but 201.
func postTicket(urls ...string) func(context.Context, TicketRequest) (Ticket, error) {
	client := &http.Client{Transport: &oncekey.IdempotencyKeyTransport{Base: &http.Transport{}}}
	var mu sync.Mutex
	return func(ctx context.Context, in TicketRequest) (Ticket, error) {
		mu.Lock()
		url := urls[0]
		if len(urls) > 1 {
			urls = urls[1:]
		}
		mu.Unlock()
		body, _ := json.Marshal(in)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/tickets", strings.NewReader(string(body)))
		if err != nil {
			return Ticket{}, err
		}
		res, err := client.Do(req)
		if err != nil {
			return Ticket{}, fmt.Errorf("helpdesk: %w", err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			b, _ := io.ReadAll(res.Body)
			return Ticket{}, fmt.Errorf("helpdesk: HTTP %d: %s", res.StatusCode, strings.TrimSpace(string(b)))
		}
		var tk Ticket
		return tk, json.NewDecoder(res.Body).Decode(&tk)
	}
}

func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr
}

// An Effectful HTTP tool whose first request is refused at the connection and whose second is
// answered 429: each proves nothing was done, so oncekey runs the tool again by itself, and the
// third run creates the one ticket. No operator, no reconciliation.
func TestE2EHTTPRefusedRetriedWithoutOperator(t *testing.T) {
	desk := newHelpdesk(t, http.StatusTooManyRequests, http.StatusCreated)
	l := newLedger()
	l.body = postTicket(closedURL(t), desk.URL)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.start(t, "http-refused-retried", req, 10*time.Second)
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	requests, tickets := desk.counts()
	require.Equal(t, 2, requests, "the refused connection never reached the helpdesk; the 429 and the 201 did")
	require.Equal(t, 1, tickets, "one ticket")
	_, bodies := l.counts()
	require.Equal(t, 3, bodies)
	require.Equal(t, "T-1", got.ID)
	rec, err := e.store.Get(context.Background(), &oncekeystore.GetParams{Tenant: "default", OperationKey: e.onlyKey(t)})
	require.NoError(t, err)
	require.Equal(t, oncekeystore.StatusApplied, rec.Status)
	require.Empty(t, rec.ResolvedBy, "nobody resolved anything")
	require.Equal(t, []oncekey.Outcome{oncekey.OutcomeFailed, oncekey.OutcomeFailed, oncekey.OutcomeApplied}, e.outcomes())
	require.NoError(t, e.replay(t, true, "http-refused-retried"))
}

// A 503 answered after the helpdesk read the request proves nothing: the outcome is unknown and
// waits for a person, as before; resolved not applied, the tool runs once more.
func TestE2EHTTP503AfterWriteStaysUnknown(t *testing.T) {
	desk := newHelpdesk(t, http.StatusServiceUnavailable, http.StatusCreated)
	l := newLedger()
	l.body = postTicket(desk.URL)
	e := setupE2E(t, l, oncekey.Policy{Effect: oncekey.Effectful})
	run := e.start(t, "http-503-unknown", req, 10*time.Second)
	key := e.waitingKey(t)
	requests, tickets := desk.counts()
	require.Equal(t, 1, requests, "the request reached the helpdesk")
	require.Zero(t, tickets)
	_, bodies := l.counts()
	require.Equal(t, 1, bodies, "not run again while unknown")
	require.NoError(t, reconcile.Resolve(context.Background(), e.c, "default", key, reconcile.Resolution{
		Epoch: 1, Outcome: reconcile.NotApplied, ResolvedBy: "bob", Note: "no ticket in the helpdesk",
	}))
	var got Ticket
	require.NoError(t, run.Get(testCtx(t), &got))
	requests, tickets = desk.counts()
	require.Equal(t, 2, requests)
	require.Equal(t, 1, tickets)
	require.Equal(t, "T-1", got.ID)
}
