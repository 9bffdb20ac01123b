package downstream

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"
)

// Fault is what a fake service does to one request instead of (or besides) serving it.
type Fault int

const (
	// FaultNone serves the request normally.
	FaultNone Fault = iota
	// FaultDelay serves the request after a pause (shorter than any caller timeout).
	FaultDelay
	// FaultErrorBeforeCommit answers 503 without landing anything: the caller may safely try
	// again.
	FaultErrorBeforeCommit
	// FaultLostAfterCommit lands the effect, then answers 502 as if the response had been lost
	// on the way back: the caller cannot tell whether the effect landed.
	FaultLostAfterCommit
)

// String returns the fault's name as the report prints it.
func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "none"
	case FaultDelay:
		return "delay"
	case FaultErrorBeforeCommit:
		return "error_before_commit"
	case FaultLostAfterCommit:
		return "lost_after_commit"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Faults decides, deterministically from Seed, which fault a request meets. The decision depends
// only on (seed, service, business identity, attempt number at that service), so two runs that
// send the same requests in any interleaving meet the same faults.
type Faults struct {
	// Seed selects the fault schedule.
	Seed int64
	// LostPercent, ErrorPercent and DelayPercent are the chances, in percent, that a faulty
	// attempt loses its response after commit, fails before commit, or is delayed.
	LostPercent, ErrorPercent, DelayPercent int
	// Delay is the pause of FaultDelay. Defaults to 300ms.
	Delay time.Duration
	// FaultyAttempts is how many attempts per business identity may meet a fault; later attempts
	// are always served. Defaults to 2.
	FaultyAttempts int
}

// DefaultFaults returns the demo's fault mix for seed: a lost response on 20% of first
// attempts, an error before commit on 12%, a delay on 10%.
func DefaultFaults(seed int64) Faults {
	return Faults{Seed: seed, LostPercent: 20, ErrorPercent: 12, DelayPercent: 10, Delay: 300 * time.Millisecond, FaultyAttempts: 2}
}

// NoFaults returns a schedule that never injects a fault.
func NoFaults() Faults { return Faults{} }

// For returns the fault for the attempt-th request (1-based) carrying identity at service. The
// chances halve on each attempt after the first.
func (f Faults) For(service, identity string, attempt int) Fault {
	limit := f.FaultyAttempts
	if limit == 0 {
		limit = 2
	}
	if attempt < 1 || attempt > limit {
		return FaultNone
	}
	h := sha256.New()
	for _, part := range []string{strconv.FormatInt(f.Seed, 10), service, identity, strconv.Itoa(attempt)} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	roll := int(binary.BigEndian.Uint64(h.Sum(nil)[:8]) % 100)
	scale := 1 << (attempt - 1)
	lost, errp, delay := f.LostPercent/scale, f.ErrorPercent/scale, f.DelayPercent/scale
	switch {
	case roll < lost:
		return FaultLostAfterCommit
	case roll < lost+errp:
		return FaultErrorBeforeCommit
	case roll < lost+errp+delay:
		return FaultDelay
	}
	return FaultNone
}

func (f Faults) delay() time.Duration {
	if f.Delay <= 0 {
		return 300 * time.Millisecond
	}
	return f.Delay
}
