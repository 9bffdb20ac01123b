// Package downstream runs the ticketdesk demo's fake downstream services on loopback HTTP: a
// ticket system, an e-mail sender, a payments provider and a customer directory. Each keeps its
// own ledger of the effects it landed (the demo's source of truth) and injects faults
// deterministically from a seed. It must not import oncekey or Temporal packages.
package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Service names, as they appear in fault schedules and reports.
const (
	ServiceTickets   = "tickets"
	ServiceEmail     = "email"
	ServicePayments  = "payments"
	ServiceDirectory = "directory"
)

// HeaderIdempotencyKey is the request header carrying the caller's idempotency key.
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderReplayed is set to "true" on a response served from an earlier effect with the same
// idempotency key.
const HeaderReplayed = "Idempotent-Replayed"

// Customer is one entry of the customer directory.
type Customer struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Email          string `json:"email"`
	Tier           string `json:"tier"`
	RefundsAllowed bool   `json:"refunds_allowed"`
}

// Service is one running fake service.
type Service struct {
	// Name is one of the Service* constants.
	Name string
	// URL is the service's base URL ("http://127.0.0.1:41234").
	URL string
	// Ledger is the service's own record of effects.
	Ledger *Ledger

	srv *http.Server
}

// Set is the four services of one run, each with a fresh ledger.
type Set struct {
	Tickets, Email, Payments, Directory *Service
}

// Start starts the four services on 127.0.0.1 with fresh ledgers and the fault schedule faults.
// The e-mail service deduplicates by Idempotency-Key; the ticket and payments services only
// record the key they received. Close the set when done.
func Start(faults Faults, customers []Customer) (*Set, error) {
	dir := map[string]Customer{}
	for _, c := range customers {
		dir[c.ID] = c
	}
	apis := []*effectAPI{
		{service: ServiceTickets, path: "/tickets", prefix: "TCK", fields: []string{"request_id"}},
		{service: ServiceEmail, path: "/messages", prefix: "MSG", dedupe: true, fields: []string{"request_id", "template"}},
		{service: ServicePayments, path: "/refunds", prefix: "RF", fields: []string{"order_id"}},
	}
	set := &Set{}
	var started []*Service
	fail := func(err error) (*Set, error) {
		for _, s := range started {
			s.close()
		}
		return nil, err
	}
	for _, api := range apis {
		api.faults = faults
		s, err := serve(api.service, api.ledger(), api.handler())
		if err != nil {
			return fail(err)
		}
		started = append(started, s)
	}
	set.Tickets, set.Email, set.Payments = started[0], started[1], started[2]
	dirAPI := &directoryAPI{faults: faults, customers: dir, ledger: newLedger()}
	s, err := serve(ServiceDirectory, dirAPI.ledger, dirAPI.handler())
	if err != nil {
		return fail(err)
	}
	set.Directory = s
	return set, nil
}

// Close stops every service of the set.
func (s *Set) Close() {
	for _, svc := range []*Service{s.Tickets, s.Email, s.Payments, s.Directory} {
		if svc != nil {
			svc.close()
		}
	}
}

// Effectful returns the three services that land effects.
func (s *Set) Effectful() []*Service { return []*Service{s.Tickets, s.Email, s.Payments} }

func serve(name string, l *Ledger, h http.Handler) (*Service, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("downstream: listen for %s: %w", name, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &Service{Name: name, URL: "http://" + ln.Addr().String(), Ledger: l, srv: srv}, nil
}

func (s *Service) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// effectAPI is a resource that lands one effect per POST: POST <path> creates, GET
// <path>?idempotency_key=K finds the effect a key landed, GET <path> lists the ledger.
type effectAPI struct {
	service string
	path    string
	prefix  string
	dedupe  bool
	// fields are the body fields whose values form the business identity.
	fields []string
	faults Faults

	once sync.Once
	l    *Ledger
}

func (a *effectAPI) ledger() *Ledger {
	a.once.Do(func() { a.l = newLedger() })
	return a.l
}

func (a *effectAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+a.path, a.create)
	mux.HandleFunc("GET "+a.path, a.find)
	return mux
}

func (a *effectAPI) identity(body map[string]any) (string, error) {
	parts := make([]string, 0, len(a.fields))
	for _, f := range a.fields {
		v, ok := body[f].(string)
		if !ok || strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("field %q is required", f)
		}
		parts = append(parts, v)
	}
	return strings.Join(parts, "/"), nil
}

func (a *effectAPI) create(w http.ResponseWriter, r *http.Request) {
	l := a.ledger()
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return
	}
	identity, err := a.identity(body)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	key := r.Header.Get(HeaderIdempotencyKey)
	fault := a.faults.For(a.service, identity, l.nextAttempt(identity, key))
	if fault != FaultNone {
		l.countFault(fault)
	}
	switch fault {
	case FaultErrorBeforeCommit:
		writeError(w, http.StatusServiceUnavailable, a.service+" is overloaded; nothing was done, try again")
		return
	case FaultDelay:
		time.Sleep(a.faults.delay())
	}
	e, landed := l.land(a.dedupe, key, func(seq int) Effect {
		id := fmt.Sprintf("%s-%04d", a.prefix, seq)
		out := map[string]any{"id": id, "status": "created"}
		for k, v := range body {
			if _, taken := out[k]; !taken {
				out[k] = v
			}
		}
		b, _ := json.Marshal(out)
		return Effect{ID: id, Identity: identity, IdempotencyKey: key, Body: b, At: time.Now()}
	})
	if fault == FaultLostAfterCommit {
		writeError(w, http.StatusBadGateway, "upstream connection reset while sending the response")
		return
	}
	if !landed {
		w.Header().Set(HeaderReplayed, "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(e.Body)
}

func (a *effectAPI) find(w http.ResponseWriter, r *http.Request) {
	l := a.ledger()
	l.countRead()
	if key := r.URL.Query().Get("idempotency_key"); key != "" {
		e, ok := l.ByKey(key)
		if !ok {
			writeError(w, http.StatusNotFound, "no effect with that idempotency key")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(e.Body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(l.Effects())
}

type directoryAPI struct {
	faults    Faults
	customers map[string]Customer
	ledger    *Ledger
}

func (d *directoryAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /customers/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		d.ledger.countRead()
		fault := d.faults.For(ServiceDirectory, id, d.ledger.nextAttempt(id, ""))
		if fault == FaultErrorBeforeCommit || fault == FaultLostAfterCommit {
			d.ledger.countFault(fault)
			writeError(w, http.StatusServiceUnavailable, "directory is overloaded; try again")
			return
		}
		c, ok := d.customers[id]
		if !ok {
			writeError(w, http.StatusNotFound, "no customer "+id)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
	})
	return mux
}

// APIError is a non-2xx answer of a fake service.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message) }

// ErrNotFound is returned by lookups that find nothing.
var ErrNotFound = errors.New("downstream: not found")

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
