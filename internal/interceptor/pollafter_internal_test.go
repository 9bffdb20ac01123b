package interceptor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

// TestPollAfter: the in_flight wait comes from what the worker knows of the tool (how long it
// usually takes, its lease, the holder's lease left), bounded; not a fixed second (a 20-second
// tool polled every second burns a model's turns).
func TestPollAfter(t *testing.T) {
	t.Parallel()
	p := oncekey.Policy{Lease: 30 * time.Second}
	cases := []struct {
		name                string
		policy              oncekey.Policy
		typical, untilLease time.Duration
		want                time.Duration
	}{
		{"a 20-second tool", p, 20 * time.Second, 25 * time.Second, 20 * time.Second},
		{"nothing observed: a third of the lease", p, 0, 25 * time.Second, 10 * time.Second},
		{"a fast tool: at least a second", p, 5 * time.Millisecond, 25 * time.Second, time.Second},
		{"the holder's lease ends first", p, 20 * time.Second, 3 * time.Second, 3 * time.Second},
		{"at most the lease", p, 10 * time.Minute, 0, 30 * time.Second},
		{"at most a minute", oncekey.Policy{Lease: 10 * time.Minute}, 10 * time.Minute, 0, time.Minute},
		{"a lease already over: not a bound", p, 20 * time.Second, -time.Second, 20 * time.Second},
	}
	for _, c := range cases {
		require.Equal(t, c.want, pollAfter(c.policy, c.typical, c.untilLease), c.name)
	}

	var d durations
	require.Zero(t, d.typical("T"))
	d.observe("T", 20*time.Second)
	require.Equal(t, 20*time.Second, d.typical("T"))
	d.observe("T", 4*time.Second)
	require.Equal(t, 16*time.Second, d.typical("T"), "a running mean")
	require.Zero(t, d.typical("U"), "per tool")
}
