package interceptor_test

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
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/oncekeystore"
)

// helpdesk is a ticket service on loopback. Each request it reads is answered with the next of
// its statuses (the last one repeats); 201 creates a ticket, deduplicated by Idempotency-Key.
// It counts the requests that reached it and the tickets it created.
type helpdesk struct {
	*httptest.Server
	mu         sync.Mutex
	statuses   []int
	retryAfter string
	requests   int
	tickets    map[string]Ticket
}

func newHelpdesk(t *testing.T, statuses ...int) *helpdesk {
	t.Helper()
	h := &helpdesk{statuses: statuses, tickets: map[string]Ticket{}}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Close)
	return h
}

func (h *helpdesk) serve(w http.ResponseWriter, r *http.Request) {
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
		if h.retryAfter != "" {
			w.Header().Set("Retry-After", h.retryAfter)
		}
		http.Error(w, http.StatusText(status), status)
		return
	}
	key := r.Header.Get(oncekey.IdempotencyKeyHeader)
	t, ok := h.tickets[key]
	if !ok {
		t = Ticket{ID: fmt.Sprintf("T-%d", len(h.tickets)+1), Customer: in.Customer, Subject: in.Subject, Seq: len(h.tickets) + 1}
		h.tickets[key] = t
	}
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(t)
}

func (h *helpdesk) counts() (requests, tickets int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests, len(h.tickets)
}

// httpTickets is an Effectful tool written as any HTTP tool is: it POSTs the request through
// IdempotencyKeyTransport and returns an error of its own for any status but 201, knowing
// nothing of oncekey's errors. urls are the addresses of its successive runs (the last repeats).
type httpTickets struct {
	ds     *downstream
	client *http.Client
	mu     sync.Mutex
	urls   []string
}

func newHTTPTickets(urls ...string) *httpTickets {
	return &httpTickets{ds: newDownstream(), urls: urls,
		client: &http.Client{Transport: &oncekey.IdempotencyKeyTransport{Base: &http.Transport{}}}}
}

func (h *httpTickets) CreateTicket(ctx context.Context, in TicketRequest) (Ticket, error) {
	h.ds.fault() // counts the body's runs
	h.mu.Lock()
	url := h.urls[0]
	if len(h.urls) > 1 {
		h.urls = h.urls[1:]
	}
	h.mu.Unlock()
	body, _ := json.Marshal(in)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/tickets", strings.NewReader(string(body)))
	if err != nil {
		return Ticket{}, err
	}
	res, err := h.client.Do(req)
	if err != nil {
		return Ticket{}, fmt.Errorf("helpdesk: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(res.Body)
		return Ticket{}, fmt.Errorf("helpdesk: HTTP %d: %s", res.StatusCode, strings.TrimSpace(string(b)))
	}
	var t Ticket
	return t, json.NewDecoder(res.Body).Decode(&t)
}

func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr
}

// An Effectful HTTP tool that returns plain errors: what IdempotencyKeyTransport proves about
// its request decides the call's outcome, counted at the helpdesk.
func TestSuiteHTTPProof(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		statuses   []int // the helpdesk's answers
		refused    bool  // the first run's request goes to a closed port
		retryAfter string
		policy     oncekey.Policy
		// fallback: a Route names the call's tool "helpdesk.create", which has no policy, so the
		// call runs under the Route's Fallback (Effectful) instead of policy
		fallback bool
		// what the call ends with, and what the helpdesk and the store saw
		wantType     string
		wantLabel    oncekey.Outcome
		wantNext     string
		wantBodies   int
		wantRequests int
		wantTickets  int
		wantStatus   oncekeystore.Status
	}{
		{name: "connection refused, then created", refused: true, statuses: []int{201},
			wantBodies: 2, wantRequests: 1, wantTickets: 1, wantStatus: oncekeystore.StatusApplied},
		{name: "429, then created", statuses: []int{429, 201}, retryAfter: "7",
			wantBodies: 2, wantRequests: 2, wantTickets: 1, wantStatus: oncekeystore.StatusApplied},
		// 409: a request with the same key still being processed, so the operation may be
		// under way; the draft's answer proves nothing.
		{name: "409 stays unknown", statuses: []int{409, 201},
			wantType: oncekey.ErrTypeIndeterminate, wantLabel: oncekey.OutcomeUnknown, wantNext: oncekey.NextReconcile,
			wantBodies: 1, wantRequests: 1, wantStatus: oncekeystore.StatusUnknown},
		{name: "429 until the attempts run out", statuses: []int{429},
			wantType: oncekey.ErrTypeNotApplied, wantLabel: oncekey.OutcomeFailed, wantNext: oncekey.NextPoll,
			wantBodies: 3, wantRequests: 3, wantStatus: oncekeystore.StatusReleased},
		{name: "404", statuses: []int{404},
			wantType: oncekey.ErrTypeNotApplied, wantLabel: oncekey.OutcomeFailed, wantNext: oncekey.NextStop,
			wantBodies: 1, wantRequests: 1, wantStatus: oncekeystore.StatusReleased},
		{name: "422, remembered", statuses: []int{422}, policy: oncekey.Policy{RememberFailures: true},
			wantType: oncekey.ErrTypeNotApplied, wantLabel: oncekey.OutcomeFailed, wantNext: oncekey.NextStop,
			wantBodies: 1, wantRequests: 1, wantStatus: oncekeystore.StatusFailed},
		{name: "503 after the request was written", statuses: []int{503},
			wantType: oncekey.ErrTypeIndeterminate, wantLabel: oncekey.OutcomeUnknown, wantNext: oncekey.NextReconcile,
			wantBodies: 1, wantRequests: 1, wantStatus: oncekeystore.StatusUnknown},
		{name: "404 with DisableHTTPProof", statuses: []int{404}, policy: oncekey.Policy{DisableHTTPProof: true},
			wantType: oncekey.ErrTypeIndeterminate, wantLabel: oncekey.OutcomeUnknown, wantNext: oncekey.NextReconcile,
			wantBodies: 1, wantRequests: 1, wantStatus: oncekeystore.StatusUnknown},
		{name: "connection refused with DisableHTTPProof", refused: true, statuses: []int{201}, policy: oncekey.Policy{DisableHTTPProof: true},
			wantType: oncekey.ErrTypeIndeterminate, wantLabel: oncekey.OutcomeUnknown, wantNext: oncekey.NextReconcile,
			wantBodies: 1, wantRequests: 0, wantStatus: oncekeystore.StatusUnknown},
		// A tool nobody classified (a Route's Fallback) is not proven by the transport: its body
		// may have effects the transport does not see.
		{name: "404 under a Route's Fallback", statuses: []int{404}, fallback: true,
			wantType: oncekey.ErrTypeIndeterminate, wantLabel: oncekey.OutcomeUnknown, wantNext: oncekey.NextReconcile,
			wantBodies: 1, wantRequests: 1, wantStatus: oncekeystore.StatusUnknown},
		{name: "connection refused under a Route's Fallback", refused: true, statuses: []int{201}, fallback: true,
			wantType: oncekey.ErrTypeIndeterminate, wantLabel: oncekey.OutcomeUnknown, wantNext: oncekey.NextReconcile,
			wantBodies: 1, wantRequests: 0, wantStatus: oncekeystore.StatusUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			desk := newHelpdesk(t, tc.statuses...)
			desk.retryAfter = tc.retryAfter
			urls := []string{desk.URL}
			if tc.refused {
				urls = []string{closedURL(t), desk.URL}
			}
			tool := newHTTPTickets(urls...)
			p := tc.policy
			p.Effect = oncekey.Effectful
			s := setupSuiteWith(t, tool.ds, p, suiteConfig{
				ticketTool: tool.CreateTicket,
				// An unknown outcome nobody decides ends the call after this long (virtual time).
				opts: func(o *interceptor.Options) { o.EscalationTimeout = time.Hour },
			})
			if tc.fallback {
				require.NoError(t, s.reg.Route(tool.CreateTicket, oncekey.Route{
					Tool: func(json.RawMessage) (string, bool) { return "helpdesk.create", true },
				}))
			}
			start := s.env.Now()
			out := s.run(t, workflowInput{MaxAttempts: 3, Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
			require.Equal(t, tc.wantType, out[0].Type, out[0].Err)
			if tc.wantType == "" {
				require.Equal(t, "T-1", out[0].Ticket.ID)
			} else {
				require.Equal(t, tc.wantLabel, out[0].Label)
				require.Equal(t, tc.wantNext, out[0].Next)
			}
			_, bodies := tool.ds.counts()
			require.Equal(t, tc.wantBodies, bodies, "runs of the tool's body")
			requests, tickets := desk.counts()
			require.Equal(t, tc.wantRequests, requests, "requests that reached the helpdesk")
			require.Equal(t, tc.wantTickets, tickets, "tickets the helpdesk created")
			recs := s.records(t)
			require.Len(t, recs, 1)
			require.Equal(t, tc.wantStatus, recs[0].Status)
			if tc.retryAfter != "" {
				require.GreaterOrEqual(t, s.env.Now().Sub(start), 7*time.Second, "the re-run waited for Retry-After")
			}
		})
	}
}
