package downstream

import (
	"encoding/json"
	"sort"
	"sync"
	"time"
)

// Effect is one effect a service landed: a ticket, a message, a refund.
type Effect struct {
	// ID is the service's own reference ("TCK-0007").
	ID string `json:"id"`
	// Identity is the business identity of the operation ("REQ-012" for its ticket): the same
	// identity landing twice is a double effect.
	Identity string `json:"identity"`
	// IdempotencyKey is the Idempotency-Key header the request carried, or "".
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Body is the service's response body for the request that landed the effect.
	Body json.RawMessage `json:"body"`
	At   time.Time       `json:"at"`
}

// Ledger is a service's own record of what it did. It is the source of truth for effects: the
// demo never counts what a caller believes happened.
type Ledger struct {
	mu        sync.Mutex
	effects   []Effect
	byKey     map[string]int // idempotency key -> index of the effect it landed
	attempts  map[string]int // business identity -> requests received
	keys      map[string]int // idempotency key -> requests received
	faults    map[Fault]int
	dedupHits int
	reads     int
}

func newLedger() *Ledger {
	return &Ledger{byKey: map[string]int{}, attempts: map[string]int{}, keys: map[string]int{}, faults: map[Fault]int{}}
}

func (l *Ledger) nextAttempt(identity, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts[identity]++
	if key != "" {
		l.keys[key]++
	}
	return l.attempts[identity]
}

func (l *Ledger) countFault(f Fault) {
	l.mu.Lock()
	l.faults[f]++
	l.mu.Unlock()
}

func (l *Ledger) countRead() {
	l.mu.Lock()
	l.reads++
	l.mu.Unlock()
}

// land records an effect unless dedupe is on and key already landed one; it returns the effect
// and whether it was new.
func (l *Ledger) land(dedupe bool, key string, make func(seq int) Effect) (Effect, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if dedupe && key != "" {
		if i, ok := l.byKey[key]; ok {
			l.dedupHits++
			return l.effects[i], false
		}
	}
	e := make(len(l.effects) + 1)
	l.effects = append(l.effects, e)
	if key != "" {
		if _, ok := l.byKey[key]; !ok {
			l.byKey[key] = len(l.effects) - 1
		}
	}
	return e, true
}

// ByKey returns the first effect landed by a request carrying the Idempotency-Key key.
func (l *Ledger) ByKey(key string) (Effect, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.byKey[key]
	if !ok {
		return Effect{}, false
	}
	return l.effects[i], true
}

// Effects returns every effect landed, in order.
func (l *Ledger) Effects() []Effect {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Effect(nil), l.effects...)
}

// ByIdentity returns how many effects landed per business identity.
func (l *Ledger) ByIdentity() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, e := range l.effects {
		out[e.Identity]++
	}
	return out
}

// Stats is a snapshot of a ledger's counters.
type Stats struct {
	// Effects is the number of effects landed.
	Effects int
	// Identities is the number of distinct business identities that landed at least once.
	Identities int
	// DoubleEffects is the number of surplus effects: for each identity, effects beyond the
	// first.
	DoubleEffects int
	// Doubled lists the identities that landed more than once, sorted.
	Doubled []string
	// Requests is the number of effect requests received (every attempt, faulted or not).
	Requests int
	// MaxPerKey is the most requests received with one Idempotency-Key.
	MaxPerKey int
	// DedupHits is the number of requests answered from an earlier effect with the same key.
	DedupHits int
	// Reads is the number of lookups served.
	Reads int
	// Faults counts the faults injected, by kind.
	Faults map[Fault]int
}

// Stats returns the ledger's counters.
func (l *Ledger) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{Effects: len(l.effects), DedupHits: l.dedupHits, Reads: l.reads, Faults: map[Fault]int{}}
	per := map[string]int{}
	for _, e := range l.effects {
		per[e.Identity]++
	}
	s.Identities = len(per)
	for id, n := range per {
		if n > 1 {
			s.DoubleEffects += n - 1
			s.Doubled = append(s.Doubled, id)
		}
	}
	sort.Strings(s.Doubled)
	for _, n := range l.attempts {
		s.Requests += n
	}
	for _, n := range l.keys {
		s.MaxPerKey = max(s.MaxPerKey, n)
	}
	for f, n := range l.faults {
		s.Faults[f] = n
	}
	return s
}
