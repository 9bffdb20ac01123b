package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Provider is a fake payment provider on loopback. POST /charges creates a charge and honours
// the Idempotency-Key header the way Stripe-style APIs do: the first request with a key creates
// the charge and stores the response under the key; a repeat with the same key and body gets
// that stored response again (header Idempotent-Replayed: true) and creates nothing; a repeat
// with the same key and another body is refused with 422. It counts its own charges.
//
// LoseFirstResponses makes it commit the first N charges and then answer 502 instead of the
// stored response: the charge landed, the caller cannot know.
type Provider struct {
	URL string

	mu       sync.Mutex
	lose     int
	byKey    map[string]*stored
	charges  []ProviderCharge
	requests []string // the Idempotency-Key of every request
	replays  int
	lost     int
	srv      *http.Server
	done     chan struct{}
}

// ProviderCharge is one charge in the provider's own ledger.
type ProviderCharge struct {
	ID             string `json:"id"`
	OrderID        string `json:"order_id"`
	AmountCents    int64  `json:"amount_cents"`
	Currency       string `json:"currency"`
	IdempotencyKey string `json:"-"`
}

// ProviderStats is a snapshot of the provider's counters.
type ProviderStats struct {
	// Requests counts POST /charges requests; Charges the charges created; Replays the requests
	// answered from a stored response; LostResponses the 502s sent after a commit.
	Requests, Charges, Replays, LostResponses int
	// RequestKeys are the Idempotency-Key headers of every request, in order ("" when absent).
	RequestKeys []string
}

type stored struct {
	body   []byte // the request body, to refuse a key reused for another charge
	status int
	resp   []byte
}

// StartProvider listens on 127.0.0.1:0 and serves until Close.
func StartProvider(loseFirstResponses int) (*Provider, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("provider: listen: %w", err)
	}
	p := &Provider{URL: "http://" + ln.Addr().String(), lose: loseFirstResponses, byKey: map[string]*stored{}, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", p.charge)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// Close stops the server.
func (p *Provider) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	<-p.done
}

// Stats returns the provider's counters.
func (p *Provider) Stats() ProviderStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return ProviderStats{Requests: len(p.requests), Charges: len(p.charges), Replays: p.replays, LostResponses: p.lost,
		RequestKeys: append([]string(nil), p.requests...)}
}

func (p *Provider) charge(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	// One lock for the whole request: a concurrent repeat waits and then sees the stored response.
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, key)
	if key != "" {
		if s, ok := p.byKey[key]; ok {
			if !bytes.Equal(s.body, body) {
				http.Error(w, "idempotency key reused with a different request", http.StatusUnprocessableEntity)
				return
			}
			p.replays++
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(s.status)
			_, _ = w.Write(s.resp)
			return
		}
	}
	var req chargeRequest
	if err := json.Unmarshal(body, &req); err != nil || req.OrderID == "" || req.AmountCents <= 0 || req.Currency == "" {
		http.Error(w, "order_id, a positive amount_cents and currency are required", http.StatusBadRequest)
		return
	}
	c := ProviderCharge{ID: fmt.Sprintf("ch_%04d", len(p.charges)+1), OrderID: req.OrderID, AmountCents: req.AmountCents, Currency: req.Currency, IdempotencyKey: key}
	p.charges = append(p.charges, c)
	resp, _ := json.Marshal(c)
	if key != "" {
		p.byKey[key] = &stored{body: body, status: http.StatusCreated, resp: resp}
	}
	if p.lose > 0 {
		// The charge is committed and its response stored; the caller gets a gateway error.
		p.lose--
		p.lost++
		http.Error(w, "upstream connection reset", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(resp)
}

type chargeRequest struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// ProviderError is a non-2xx answer from the provider.
type ProviderError struct {
	Status int
	Body   string
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("provider: %d %s: %s", e.Status, http.StatusText(e.Status), bytes.TrimSpace([]byte(e.Body)))
}

// postCharge sends one charge request with the idempotency key and decodes the charge.
func postCharge(ctx context.Context, hc *http.Client, url, key string, in chargeRequest) (ProviderCharge, bool, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return ProviderCharge{}, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/charges", bytes.NewReader(body))
	if err != nil {
		return ProviderCharge{}, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := hc.Do(req)
	if err != nil {
		return ProviderCharge{}, false, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return ProviderCharge{}, false, err
	}
	if resp.StatusCode != http.StatusCreated {
		return ProviderCharge{}, false, &ProviderError{Status: resp.StatusCode, Body: string(rb)}
	}
	var c ProviderCharge
	if err := json.Unmarshal(rb, &c); err != nil {
		return ProviderCharge{}, false, errors.Join(errors.New("provider: decode charge"), err)
	}
	return c, resp.Header.Get("Idempotent-Replayed") == "true", nil
}
