package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Services are the fake downstream services the tools call, on loopback: a weather service, a
// ticket system and a payment service's refunds. The ticket system and the refunds do not
// deduplicate: each request they take is one more ticket or refund, counted in their ledger.
// They record the operation key a request carries (OperationKeyHeader) and can be asked for the ticket or
// refund made under a key, which is what a person (or a receipt lookup) checks after a lost
// answer.
type Services struct {
	// URL is the base URL ("http://127.0.0.1:41234").
	URL string

	faults Faults
	srv    *http.Server

	mu       sync.Mutex
	tickets  []Ticket
	refunds  []Refund
	byKey    map[string][]byte // "tickets/<key>" or "refunds/<key>" to the answer's body
	requests map[string]int    // per endpoint: "weather", "tickets", "refunds"
	lost     int
	held     chan struct{} // closed when the held ticket request is taken (Faults.HoldTicket)
	holding  bool
	closing  chan struct{}
}

// Faults are the failures the services inject.
type Faults struct {
	// WeatherUnavailable answers the first n weather requests 503, before doing anything.
	WeatherUnavailable int
	// LoseTicketAnswers loses the answer of the first n ticket requests after the ticket was
	// opened: the connection closes with no response.
	LoseTicketAnswers int
	// HoldTicket holds the answer of the first ticket request with this subject after the ticket
	// was opened, until the caller goes away (its worker stops): Held is closed when it begins.
	// "" holds none.
	HoldTicket string
}

// Ticket is a ticket the ticket system opened.
type Ticket struct {
	ID      string `json:"id"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// Refund is a refund the payment service made.
type Refund struct {
	ID          string `json:"id"`
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	Reason      string `json:"reason"`
}

// StartServices serves the services on 127.0.0.1 (a free port) with faults. Close them when done.
func StartServices(faults Faults) (*Services, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("services: listen: %w", err)
	}
	s := &Services{URL: "http://" + ln.Addr().String(), faults: faults, byKey: map[string][]byte{}, requests: map[string]int{},
		held: make(chan struct{}), closing: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /weather", s.weather)
	mux.HandleFunc("POST /tickets", s.openTicket)
	mux.HandleFunc("POST /refunds", s.refund)
	mux.HandleFunc("GET /{kind}/by-key/{key}", s.lookup)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Held is closed when the ticket request Faults.HoldTicket names is taken and its answer held.
func (s *Services) Held() <-chan struct{} { return s.held }

// Close stops the services.
func (s *Services) Close() {
	close(s.closing)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// Ledger is what the services did, by their own count.
type Ledger struct {
	Tickets []Ticket
	Refunds []Refund
	// Requests counts the requests per endpoint ("weather", "tickets", "refunds").
	Requests map[string]int
	// LostAnswers counts the ticket answers lost after the ticket was opened.
	LostAnswers int
}

// Ledger returns a copy of the services' ledger.
func (s *Services) Ledger() Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := make(map[string]int, len(s.requests))
	for k, v := range s.requests {
		req[k] = v
	}
	return Ledger{Tickets: append([]Ticket(nil), s.tickets...), Refunds: append([]Refund(nil), s.refunds...), Requests: req, LostAnswers: s.lost}
}

func (s *Services) weather(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests["weather"]++
	fail := s.requests["weather"] <= s.faults.WeatherUnavailable
	s.mu.Unlock()
	if fail {
		http.Error(w, "weather service unavailable", http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, map[string]string{"city": r.URL.Query().Get("city"), "forecast": "light rain, 12 °C"})
}

func (s *Services) openTicket(w http.ResponseWriter, r *http.Request) {
	var in struct{ Subject, Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Subject == "" {
		http.Error(w, "a ticket needs a subject", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests["tickets"]++
	t := Ticket{ID: fmt.Sprintf("T-%d", len(s.tickets)+1), Subject: in.Subject, Body: in.Body}
	s.tickets = append(s.tickets, t)
	body := s.commit("tickets", r, t)
	lose := s.requests["tickets"] <= s.faults.LoseTicketAnswers
	if lose {
		s.lost++
	}
	hold := !lose && !s.holding && s.faults.HoldTicket != "" && in.Subject == s.faults.HoldTicket
	if hold {
		s.holding = true
		close(s.held)
	}
	s.mu.Unlock()
	switch {
	case lose:
		loseAnswer(w)
	case hold:
		// No answer until the caller is gone.
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
	default:
		writeBody(w, body)
	}
}

func (s *Services) refund(w http.ResponseWriter, r *http.Request) {
	var in struct {
		OrderID     string `json:"order_id"`
		AmountCents int64  `json:"amount_cents"`
		Reason      string `json:"reason"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.OrderID == "" || in.AmountCents <= 0 {
		http.Error(w, "a refund needs an order_id and a positive amount_cents", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests["refunds"]++
	rf := Refund{ID: fmt.Sprintf("R-%d", len(s.refunds)+1), OrderID: in.OrderID, AmountCents: in.AmountCents, Reason: in.Reason}
	s.refunds = append(s.refunds, rf)
	body := s.commit("refunds", r, rf)
	s.mu.Unlock()
	writeBody(w, body)
}

// commit encodes v, the answer of a request of kind, and files it under the request's
// operation key, if it has one. s.mu is held.
func (s *Services) commit(kind string, r *http.Request, v any) []byte {
	body, _ := json.Marshal(v)
	if key := r.Header.Get(OperationKeyHeader); key != "" {
		s.byKey[kind+"/"+key] = body
	}
	return body
}

// lookup answers GET /tickets/by-key/{key} and /refunds/by-key/{key}: the answer of the request
// made under the key, or 404 when no such request was taken.
func (s *Services) lookup(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	body, ok := s.byKey[r.PathValue("kind")+"/"+r.PathValue("key")]
	s.mu.Unlock()
	if !ok {
		http.Error(w, "no request under this key", http.StatusNotFound)
		return
	}
	writeBody(w, body)
}

// loseAnswer closes the connection without a response.
func loseAnswer(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	writeBody(w, b)
}

func writeBody(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n"))
}
