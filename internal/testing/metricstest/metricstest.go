// Package metricstest is an in-memory client.MetricsHandler for tests: it keeps every counter's
// sum, every gauge's last value and every timer's recordings by name and tags. (The SDK's own
// capturing handler lives in an internal package that cannot be imported.)
package metricstest

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
)

// Handler records metrics in memory. The zero value is not usable: call New.
type Handler struct {
	s    *state
	tags map[string]string
}

type state struct {
	mu       sync.Mutex
	counters map[string]int64
	gauges   map[string]float64
	timers   map[string][]time.Duration
	tags     map[string]map[string]string // series ID → its tags
}

var _ client.MetricsHandler = (*Handler)(nil)

// New returns an empty Handler.
func New() *Handler {
	return &Handler{s: &state{counters: map[string]int64{}, gauges: map[string]float64{}, timers: map[string][]time.Duration{}, tags: map[string]map[string]string{}}}
}

// ID names a series: the metric name and its tags sorted, "name{k=v,k=v}".
func ID(name string, tags map[string]string) string {
	keys := slices.Sorted(maps.Keys(tags))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+tags[k])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// WithTags implements client.MetricsHandler.
func (h *Handler) WithTags(tags map[string]string) client.MetricsHandler {
	t := maps.Clone(h.tags)
	if t == nil {
		t = map[string]string{}
	}
	maps.Copy(t, tags)
	return &Handler{s: h.s, tags: t}
}

// Counter implements client.MetricsHandler.
func (h *Handler) Counter(name string) client.MetricsCounter {
	return counterFunc(func(d int64) {
		h.record(name, func(s *state, id string) { s.counters[id] += d })
	})
}

// Gauge implements client.MetricsHandler.
func (h *Handler) Gauge(name string) client.MetricsGauge {
	return gaugeFunc(func(v float64) {
		h.record(name, func(s *state, id string) { s.gauges[id] = v })
	})
}

// Timer implements client.MetricsHandler.
func (h *Handler) Timer(name string) client.MetricsTimer {
	return timerFunc(func(d time.Duration) {
		h.record(name, func(s *state, id string) { s.timers[id] = append(s.timers[id], d) })
	})
}

// record runs set on the series of name with h's tags (its ID), under the lock, and keeps the
// series' tags.
func (h *Handler) record(name string, set func(s *state, id string)) {
	id := ID(name, h.tags)
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	h.s.tags[id] = h.tags
	set(h.s, id)
}

// has reports whether the series id carries every tag of want (and maybe others, such as the
// SDK's own activity_type, task_queue and workflow_type).
func (s *state) has(id string, want map[string]string) bool {
	got := s.tags[id]
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// Sum returns the sum of the counters named name whose tags include tags.
func (h *Handler) Sum(name string, tags map[string]string) int64 {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	var n int64
	for id, v := range pick(h.s.counters, name) {
		if h.s.has(id, tags) {
			n += v
		}
	}
	return n
}

// GaugeValue returns the last value of the gauge named name whose tags include tags, and whether one
// was recorded (the first found when several match).
func (h *Handler) GaugeValue(name string, tags map[string]string) (float64, bool) {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	for id, v := range pick(h.s.gauges, name) {
		if h.s.has(id, tags) {
			return v, true
		}
	}
	return 0, false
}

// Records returns the recordings of the timers named name whose tags include tags.
func (h *Handler) Records(name string, tags map[string]string) []time.Duration {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	var out []time.Duration
	for id, v := range pick(h.s.timers, name) {
		if h.s.has(id, tags) {
			out = append(out, v...)
		}
	}
	return out
}

// Counters returns the sums of the counters whose name is name, by series ID.
func (h *Handler) Counters(name string) map[string]int64 {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return pick(h.s.counters, name)
}

// Gauges returns the last values of the gauges whose name is name, by series ID.
func (h *Handler) Gauges(name string) map[string]float64 {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return pick(h.s.gauges, name)
}

// Timers returns the recordings of the timers whose name is name, by series ID.
func (h *Handler) Timers(name string) map[string][]time.Duration {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	out := map[string][]time.Duration{}
	for id, v := range pick(h.s.timers, name) {
		out[id] = slices.Clone(v)
	}
	return out
}

// Names returns the name of every series recorded, tags included, sorted.
func (h *Handler) Names() []string {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	var out []string
	for _, m := range []map[string]bool{keys(h.s.counters), keys(h.s.gauges), keys(h.s.timers)} {
		for k := range m {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

func pick[V any](m map[string]V, name string) map[string]V {
	out := map[string]V{}
	for id, v := range m {
		if strings.HasPrefix(id, name+"{") {
			out[id] = v
		}
	}
	return out
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }
