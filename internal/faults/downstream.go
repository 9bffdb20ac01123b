package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// HeaderOperationKey carries the operation key from a tool to the downstream. It is deliberately
// not "Idempotency-Key": Go's http.Transport treats a POST with that header as replayable and
// may send it again by itself after a dropped connection, which would be a second request the
// tool never made.
const HeaderOperationKey = "Operation-Key"

// Point is a place where a caller can be held (and then SIGKILLed by a test).
type Point string

const (
	// PointClaimed: the claim is made and the tool body not yet entered (a worker interceptor
	// inside oncekey's calls it).
	PointClaimed Point = "claimed"
	// PointBody: inside the tool body, before the downstream call.
	PointBody Point = "body"
	// PointBeforeCommit: a create request reached the downstream; nothing is committed. Released,
	// the downstream commits; if the caller goes away first, nothing is committed.
	PointBeforeCommit Point = "before_commit"
	// PointAfterCommit: the downstream committed; the answer is not sent yet.
	PointAfterCommit Point = "after_commit"
	// PointCompleted: Store.Complete recorded the result as applied; Temporal has not heard yet
	// (a store wrapper in the worker calls it).
	PointCompleted Point = "completed"
	// PointTxCommit: a Transactional tool's body returned; its transaction, holding the body's
	// writes, is open and about to get the completion and COMMIT (a store wrapper in the worker
	// calls it).
	PointTxCommit Point = "tx_commit"
)

// Fault is what the downstream does with one create request.
type Fault int

const (
	FaultNone Fault = iota
	// FaultDropAfterCommit commits, then closes the connection without an answer.
	FaultDropAfterCommit
	// FaultRefuseBeforeCommit answers 503 and commits nothing.
	FaultRefuseBeforeCommit
	// FaultMalformed commits, then answers 200 with truncated JSON.
	FaultMalformed
	// FaultIncomplete commits, then answers 200 with a receipt that lacks its ID.
	FaultIncomplete
)

func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "none"
	case FaultDropAfterCommit:
		return "drop_after_commit"
	case FaultRefuseBeforeCommit:
		return "refuse_before_commit"
	case FaultMalformed:
		return "malformed"
	case FaultIncomplete:
		return "incomplete"
	}
	return "Fault(" + strconv.Itoa(int(f)) + ")"
}

// Effect is one effect the downstream committed: its own record, kept apart from anything a tool
// or the executor reports.
type Effect struct {
	Seq       int
	ID        string
	Kind      string // ticket, refund, job
	Key       string // the operation key the request carried
	RequestID string
	At        time.Time
}

// Hit is a caller arriving at an armed Point.
type Hit struct {
	Point     Point
	Key       string
	RequestID string
}

// Hold is an armed Point for one request ID: the first caller to arrive there is reported on
// Hit and held until Release (or until it goes away).
type Hold struct {
	// Hit receives the caller that arrived.
	Hit     <-chan Hit
	hit     chan Hit
	release chan struct{}
	once    sync.Once
}

// Release lets the held caller continue. Safe to call more than once.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

// RandomFaults injects faults into create requests that have no planned fault.
type RandomFaults struct {
	DropAfterCommit    float64 // chance of FaultDropAfterCommit
	RefuseBeforeCommit float64 // chance of FaultRefuseBeforeCommit
	MaxDelay           time.Duration
	Seed               uint64
}

// WorkerEvent is a claimed tool call as a worker's interceptor reported it (okworker.Event,
// without the error value).
type WorkerEvent struct {
	Worker    string `json:"worker"`
	Tool      string `json:"tool"`
	KeyPrefix string `json:"key_prefix"`
	Outcome   string `json:"outcome"`
	ErrType   string `json:"err_type,omitempty"`
}

type job struct {
	receipt   Receipt
	remaining int
}

// Downstream is a fake downstream service on loopback: tickets, refunds and export jobs, an
// authorization service, hooks where callers can be held, and an event sink for workers. It
// counts effects itself.
type Downstream struct {
	srv *http.Server
	url string

	mu       sync.Mutex
	effects  []Effect
	byKey    map[string][]int // effect indexes by operation key
	arrivals map[string]int   // create requests by operation key
	reqs     map[string]int   // create requests by request ID
	bodies   map[string]int   // tool bodies entered (PointBody hooks) by operation key
	inflight map[string]int   // create requests being handled, by operation key
	injected map[Fault]int
	keyReq   map[string]string
	plans    map[string][]Fault
	random   *RandomFaults
	rng      *rand.Rand
	arms     map[Point]map[string]*Hold
	revoked  map[string]bool
	jobs     map[string]*job
	events   []WorkerEvent
}

// NewDownstream starts a Downstream on 127.0.0.1 and returns it. Close stops it.
func NewDownstream() (*Downstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faults: downstream listen: %w", err)
	}
	d := &Downstream{
		url:      "http://" + ln.Addr().String(),
		byKey:    map[string][]int{},
		arrivals: map[string]int{},
		reqs:     map[string]int{},
		bodies:   map[string]int{},
		inflight: map[string]int{},
		injected: map[Fault]int{},
		keyReq:   map[string]string{},
		plans:    map[string][]Fault{},
		arms:     map[Point]map[string]*Hold{},
		revoked:  map[string]bool{},
		jobs:     map[string]*job{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tickets", d.create("ticket", false))
	mux.HandleFunc("POST /tickets/upsert", d.create("ticket", true))
	mux.HandleFunc("POST /refunds", d.create("refund", false))
	mux.HandleFunc("POST /jobs", d.create("job", false))
	mux.HandleFunc("GET /receipts", d.receipt)
	mux.HandleFunc("GET /jobs", d.jobStatus)
	mux.HandleFunc("GET /authz", d.authz)
	mux.HandleFunc("POST /hook", d.hook)
	mux.HandleFunc("POST /events", d.event)
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

// URL is the downstream's base URL.
func (d *Downstream) URL() string { return d.url }

// Close stops the server; held callers are cut off.
func (d *Downstream) Close() { _ = d.srv.Close() }

// Plan queues faults for the create requests of requestID, one per request in arrival order.
func (d *Downstream) Plan(requestID string, faults ...Fault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.plans[requestID] = append(d.plans[requestID], faults...)
}

// SetRandom injects random faults into create requests without a planned fault.
func (d *Downstream) SetRandom(r RandomFaults) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.random = &r
	d.rng = rand.New(rand.NewPCG(r.Seed, r.Seed^0x9e3779b97f4a7c15))
}

// Arm holds the first caller that reaches p for requestID. A caller is matched by the request ID
// it sends or, for PointCompleted, by the request ID earlier requests paired with its key.
func (d *Downstream) Arm(p Point, requestID string) *Hold {
	h := &Hold{hit: make(chan Hit, 1), release: make(chan struct{})}
	h.Hit = h.hit
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.arms[p] == nil {
		d.arms[p] = map[string]*Hold{}
	}
	d.arms[p][requestID] = h
	return h
}

// Revoke withdraws the customer's authorization.
func (d *Downstream) Revoke(customer string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.revoked[customer] = true
}

// Effects returns the committed effects in order.
func (d *Downstream) Effects() []Effect {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Effect(nil), d.effects...)
}

// EffectsFor returns the effects committed under key.
func (d *Downstream) EffectsFor(key string) []Effect {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Effect
	for _, i := range d.byKey[key] {
		out = append(out, d.effects[i])
	}
	return out
}

// EffectsByKey returns the number of effects per operation key.
func (d *Downstream) EffectsByKey() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.byKey))
	for k, v := range d.byKey {
		out[k] = len(v)
	}
	return out
}

// Arrivals returns the number of create requests that carried key.
func (d *Downstream) Arrivals(key string) int {
	return d.count(func() map[string]int { return d.arrivals }, key)
}

// RequestArrivals returns the number of create requests that carried requestID.
func (d *Downstream) RequestArrivals(requestID string) int {
	return d.count(func() map[string]int { return d.reqs }, requestID)
}

// InFlight returns the number of create requests under key the downstream is handling now.
func (d *Downstream) InFlight(key string) int {
	return d.count(func() map[string]int { return d.inflight }, key)
}

// count returns m's count for key, read under the lock (m picks one of d's counters).
func (d *Downstream) count(m func() map[string]int, key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return m()[key]
}

// Bodies returns the number of tool bodies entered for key.
func (d *Downstream) Bodies(key string) int {
	return d.count(func() map[string]int { return d.bodies }, key)
}

// Lookup returns the receipt of the first effect committed under key: the downstream's own
// receipt endpoint, as an operator (or a receipt lookup) would query it.
func (d *Downstream) Lookup(key string) (Receipt, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	idx := d.byKey[key]
	if len(idx) == 0 {
		return Receipt{}, false
	}
	return receiptOf(d.effects[idx[0]]), true
}

// Injected returns how many create requests got each fault (FaultNone included).
func (d *Downstream) Injected() map[Fault]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[Fault]int, len(d.injected))
	for k, v := range d.injected {
		out[k] = v
	}
	return out
}

// Events returns the events workers reported.
func (d *Downstream) Events() []WorkerEvent {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]WorkerEvent(nil), d.events...)
}

// CountEvents counts the reported events for which match is true.
func (d *Downstream) CountEvents(match func(WorkerEvent) bool) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, e := range d.events {
		if match(e) {
			n++
		}
	}
	return n
}

func receiptOf(e Effect) Receipt {
	r := Receipt{ID: e.ID, Kind: e.Kind, Seq: e.Seq, Key: e.Key, RequestID: e.RequestID}
	if e.Kind == "job" {
		r.Status = JobRunning
	}
	return r
}

// nextFault returns the fault and delay for the next create request of requestID.
func (d *Downstream) nextFault(requestID string) (f Fault, delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	defer func() { d.injected[f]++ }()
	if q := d.plans[requestID]; len(q) > 0 {
		d.plans[requestID] = q[1:]
		return q[0], 0
	}
	if d.random == nil {
		return FaultNone, 0
	}
	if d.random.MaxDelay > 0 {
		delay = time.Duration(d.rng.Int64N(int64(d.random.MaxDelay)))
	}
	x := d.rng.Float64()
	switch {
	case x < d.random.DropAfterCommit:
		return FaultDropAfterCommit, delay
	case x < d.random.DropAfterCommit+d.random.RefuseBeforeCommit:
		return FaultRefuseBeforeCommit, delay
	}
	return FaultNone, delay
}

// hold holds the caller if p is armed for its request: armed reports whether it was, released
// whether the test let it go on (false: the caller went away).
func (d *Downstream) hold(ctx context.Context, p Point, key, requestID string) (armed, released bool) {
	d.mu.Lock()
	if requestID == "" {
		requestID = d.keyReq[key]
	} else if key != "" {
		d.keyReq[key] = requestID
	}
	h := d.arms[p][requestID]
	if h != nil {
		delete(d.arms[p], requestID)
	}
	d.mu.Unlock()
	if h == nil {
		return false, false
	}
	h.hit <- Hit{Point: p, Key: key, RequestID: requestID}
	select {
	case <-h.release:
		return true, true
	case <-ctx.Done():
		return true, false
	}
}

func (d *Downstream) commit(kind, key string, in Request, dedupe bool) (Effect, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if dedupe {
		if idx := d.byKey[key]; len(idx) > 0 {
			return d.effects[idx[0]], false
		}
	}
	seq := len(d.effects) + 1
	prefix := map[string]string{"ticket": "T", "refund": "R", "job": "J"}[kind]
	e := Effect{Seq: seq, ID: fmt.Sprintf("%s-%d", prefix, seq), Kind: kind, Key: key, RequestID: in.RequestID, At: time.Now()}
	d.effects = append(d.effects, e)
	d.byKey[key] = append(d.byKey[key], seq-1)
	if kind == "job" {
		d.jobs[key] = &job{receipt: receiptOf(e), remaining: in.Polls}
	}
	return e, true
}

func (d *Downstream) create(kind string, dedupe bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(HeaderOperationKey)
		var in Request
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || key == "" || in.RequestID == "" {
			http.Error(w, "want a JSON request with request_id and an "+HeaderOperationKey+" header", http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		d.arrivals[key]++
		d.reqs[in.RequestID]++
		d.inflight[key]++
		d.keyReq[key] = in.RequestID
		d.mu.Unlock()
		defer func() {
			d.mu.Lock()
			d.inflight[key]--
			d.mu.Unlock()
		}()
		fault, delay := d.nextFault(in.RequestID)
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		if armed, released := d.hold(r.Context(), PointBeforeCommit, key, in.RequestID); armed && !released {
			return // the caller went away before anything was committed
		}
		if fault == FaultRefuseBeforeCommit {
			http.Error(w, `{"error":"service unavailable; nothing was committed"}`, http.StatusServiceUnavailable)
			return
		}
		e, _ := d.commit(kind, key, in, dedupe)
		if armed, released := d.hold(r.Context(), PointAfterCommit, key, in.RequestID); armed && !released {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		rec := receiptOf(e)
		switch fault {
		case FaultDropAfterCommit:
			// Abort the response: the server closes the connection without an answer.
			panic(http.ErrAbortHandler)
		case FaultMalformed:
			b, _ := json.Marshal(rec)
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(b[:len(b)/2])
			return
		case FaultIncomplete:
			rec.ID = ""
			w.WriteHeader(http.StatusOK)
			_ = json.NewEncoder(w).Encode(rec)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(rec)
	}
}

func (d *Downstream) receipt(w http.ResponseWriter, r *http.Request) {
	rec, ok := d.Lookup(r.URL.Query().Get("key"))
	if !ok {
		http.Error(w, "no effect under that key", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rec)
}

// jobStatus answers a poll for the job submitted under key. Each poll (without peek=1) brings
// the job one step closer to done.
func (d *Downstream) jobStatus(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	peek := r.URL.Query().Get("peek") == "1"
	d.mu.Lock()
	j := d.jobs[key]
	var rec Receipt
	if j != nil {
		if !peek && j.remaining > 0 {
			j.remaining--
		}
		rec = j.receipt
		if j.remaining <= 0 {
			rec.Status = JobDone
		}
	}
	d.mu.Unlock()
	if j == nil {
		http.Error(w, "no job under that key", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rec)
}

func (d *Downstream) authz(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	revoked := d.revoked[r.URL.Query().Get("customer")]
	d.mu.Unlock()
	if revoked {
		http.Error(w, "authorization revoked", http.StatusForbidden)
		return
	}
	_, _ = w.Write([]byte(`{"allowed":true}`))
}

func (d *Downstream) hook(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, key, req := Point(q.Get("point")), q.Get("key"), q.Get("req")
	if p == PointBody && key != "" {
		d.mu.Lock()
		d.bodies[key]++
		d.mu.Unlock()
	}
	if armed, released := d.hold(r.Context(), p, key, req); armed && !released {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (d *Downstream) event(w http.ResponseWriter, r *http.Request) {
	var e WorkerEvent
	if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	d.events = append(d.events, e)
	d.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// Keys returns the operation keys under which something was committed, sorted.
func (d *Downstream) Keys() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.byKey))
}
