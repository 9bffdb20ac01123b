package interceptor_test

import (
	"sort"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
)

func protoMarshal(ps *commonpb.Payloads) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(ps)
}

func payloadsFrom(b []byte) (*commonpb.Payloads, error) {
	ps := &commonpb.Payloads{}
	return ps, proto.Unmarshal(b, ps)
}

// metricsCapture is a client.MetricsHandler keeping counters and timer observations by name and
// tags.
type metricsCapture struct {
	tags map[string]string
	data *metricsData
}

type metricsData struct {
	mu       sync.Mutex
	counters map[string]int64
	timers   map[string]int
}

func newMetrics() *metricsCapture {
	return &metricsCapture{tags: map[string]string{}, data: &metricsData{counters: map[string]int64{}, timers: map[string]int{}}}
}

func (m *metricsCapture) id(name string) string {
	keys := make([]string, 0, len(m.tags))
	for k := range m.tags {
		if k == "tool" || k == "outcome" {
			keys = append(keys, k+"="+m.tags[k])
		}
	}
	sort.Strings(keys)
	return name + "{" + strings.Join(keys, ",") + "}"
}

func (m *metricsCapture) WithTags(tags map[string]string) client.MetricsHandler {
	n := &metricsCapture{tags: map[string]string{}, data: m.data}
	for k, v := range m.tags {
		n.tags[k] = v
	}
	for k, v := range tags {
		n.tags[k] = v
	}
	return n
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(float64) {}

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

func (m *metricsCapture) Counter(name string) client.MetricsCounter {
	id := m.id(name)
	return counterFunc(func(d int64) {
		m.data.mu.Lock()
		m.data.counters[id] += d
		m.data.mu.Unlock()
	})
}

func (m *metricsCapture) Gauge(name string) client.MetricsGauge { return gaugeFunc(nil) }

func (m *metricsCapture) Timer(name string) client.MetricsTimer {
	id := m.id(name)
	return timerFunc(func(time.Duration) {
		m.data.mu.Lock()
		m.data.timers[id]++
		m.data.mu.Unlock()
	})
}

func (m *metricsCapture) counter(name, tool, outcome string) int64 {
	m.data.mu.Lock()
	defer m.data.mu.Unlock()
	return m.data.counters[name+"{outcome="+outcome+",tool="+tool+"}"]
}

func (m *metricsCapture) timerCount(name, tool string) int {
	m.data.mu.Lock()
	defer m.data.mu.Unlock()
	return m.data.timers[name+"{tool="+tool+"}"]
}
