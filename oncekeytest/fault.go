package oncekeytest

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
)

// Fault is what the kit does to one call instead of (or besides) letting it run. Faults are
// injected at the tool boundary, around the tool's function; the workflow and the tool's code
// are never changed.
type Fault int

const (
	// NoFault lets the call run.
	NoFault Fault = iota

	// FailBeforeBody ends the attempt with an error just before the tool's body would run (after
	// oncekey claimed the call): nothing reached the downstream. An Effectful tool's outcome is
	// then unknown to oncekey, and the kit, as the receipt lookup, settles it not applied.
	FailBeforeBody

	// Stall hangs the attempt before anything of it runs, past its start-to-close timeout: the
	// workflow sees the activity time out and nothing was claimed or sent. On the test
	// environment the kit ends the attempt at once with the timeout failure Temporal reports; on a
	// server it waits, and the server times the attempt out after its StartToCloseTimeout.
	Stall

	// LoseAnswer runs the call (oncekey's claim, the body, the stored result) and loses its
	// answer on the way back: the effect happened and the workflow sees the attempt time out, as
	// when a worker's response never reaches the server. The attempt ends as for Stall.
	LoseAnswer

	// CrashMidBody runs the tool's body (its downstream acts) and kills the attempt before the
	// body's result is handed back: the result is lost and the attempt ends in error, as one
	// whose worker died ends in a timeout. An Effectful tool's outcome is unknown; the kit, as
	// the receipt lookup, settles it applied with the result the body returned (not applied
	// when the body returned an error).
	CrashMidBody

	// Repropose schedules the call again once its answer has reached the workflow, as a model
	// that proposes the same tool call twice: the workflow's code is unchanged, and the repeat's
	// answer is the one the workflow gets. Decided per call (Call.Attempt 0).
	Repropose

	// Reset runs the workflow again from before the call after the run has ended: on a dev
	// server, a reset of the workflow (client.ResetWorkflowExecution) to the workflow task that
	// scheduled the call; on the test environment, which cannot reset, a new run under the same
	// workflow ID, as Rerun. Decided per call (Call.Attempt 0).
	Reset

	// Rerun runs the workflow again under the same workflow ID with the same input after the run
	// has ended (a client that started it twice, a retried start). Decided per call
	// (Call.Attempt 0).
	Rerun

	faultCount // the number of faults
)

// String returns the fault's name: "none", "fail_before_body", "stall", "lose_answer",
// "crash_mid_body", "repropose", "reset" or "rerun".
func (f Fault) String() string {
	switch f {
	case NoFault:
		return "none"
	case FailBeforeBody:
		return "fail_before_body"
	case Stall:
		return "stall"
	case LoseAnswer:
		return "lose_answer"
	case CrashMidBody:
		return "crash_mid_body"
	case Repropose:
		return "repropose"
	case Reset:
		return "reset"
	case Rerun:
		return "rerun"
	}
	return "Fault(" + strconv.Itoa(int(f)) + ")"
}

// attemptFault reports whether f is decided per attempt (injected around one activity attempt)
// rather than per call.
func (f Fault) attemptFault() bool {
	return f == FailBeforeBody || f == Stall || f == LoseAnswer || f == CrashMidBody
}

// Call is one tool call as a Plan sees it.
type Call struct {
	// WorkflowID is the workflow's ID.
	WorkflowID string
	// Execution counts the kit's ExecuteWorkflow calls, from 1: the workflow's place in the test,
	// which a Mix draws by (a test's workflow IDs carry its name).
	Execution int
	// Tool is the tool's name: the activity type, or the name its Route gives it.
	Tool string
	// N counts the calls of Tool in the workflow's run, from 1, in the order the workflow
	// scheduled them. A repeat the kit injects (Repropose) has its call's N.
	N int
	// Attempt is 0 when the Plan is asked about the call as the workflow schedules it (Repropose,
	// Reset, Rerun), and counts the call's activity attempts from 1 when it is asked about one
	// attempt (FailBeforeBody, Stall, LoseAnswer, CrashMidBody). Attempts go on counting across
	// every attempt of the call: Temporal's retries, oncekey's re-runs, repeats and later runs of
	// the workflow.
	Attempt int
	// Pass is 1 for the workflow's first run and counts the runs after a Reset or Rerun.
	Pass int
}

// A Plan chooses the fault each call and each attempt meets. It is asked once per call with
// Attempt 0, for a per-call fault, and once per activity attempt, for a per-attempt fault; an
// answer of the other kind is ignored. It must be deterministic: the same Call, the same Fault.
type Plan interface {
	Fault(c Call) Fault
}

// Step is one fault of a Script.
type Step struct {
	// Tool is the tool's name. Required.
	Tool string
	// Call is the call's N; 0 means every call of the tool.
	Call int
	// Attempt is the attempt a per-attempt fault hits. Defaults to 1.
	Attempt int
	// Fault is the fault.
	Fault Fault
	// Pass is the run it applies to. Defaults to 1, the first.
	Pass int
}

// Script is a fixed Plan: each Step names the call (and, for a per-attempt fault, the attempt)
// it hits. A call no Step names runs as it is. The first matching Step wins.
type Script []Step

// Fault returns the fault of the first Step that names c.
func (s Script) Fault(c Call) Fault {
	for _, st := range s {
		pass := st.Pass
		if pass == 0 {
			pass = 1
		}
		if st.Tool != c.Tool || (st.Call != 0 && st.Call != c.N) || pass != c.Pass {
			continue
		}
		if st.Fault.attemptFault() {
			attempt := st.Attempt
			if attempt == 0 {
				attempt = 1
			}
			if c.Attempt != attempt {
				continue
			}
		} else if c.Attempt != 0 {
			continue
		}
		return st.Fault
	}
	return NoFault
}

// Mix is a seeded random Plan, like the one `make demo` injects: each first attempt of a call
// meets a per-attempt fault with AttemptPercent chance, and each call of the first run a per-call
// fault with CallPercent chance, both drawn evenly from Faults. The draw depends only on (Seed,
// Call.Execution, tool, N, attempt), so two runs of the same test meet the same faults.
type Mix struct {
	// Seed selects the faults.
	Seed int64
	// AttemptPercent is the chance, in percent, that a call's first attempt meets a per-attempt
	// fault. Defaults to 50; negative means never.
	AttemptPercent int
	// CallPercent is the chance, in percent, that a call of the first run meets a per-call fault.
	// Defaults to 25; negative means never.
	CallPercent int
	// Faults are the faults drawn from. Defaults to every fault.
	Faults []Fault
}

// RandomMix returns the default Mix for seed: every fault, half of the first attempts and a
// quarter of the calls faulted.
func RandomMix(seed int64) Mix { return Mix{Seed: seed} }

// Fault draws c's fault.
func (m Mix) Fault(c Call) Fault {
	perAttempt := c.Attempt > 0
	var pool []Fault
	faults := m.Faults
	if len(faults) == 0 {
		for f := FailBeforeBody; f < faultCount; f++ {
			faults = append(faults, f)
		}
	}
	for _, f := range faults {
		if f.attemptFault() == perAttempt && f != NoFault {
			pool = append(pool, f)
		}
	}
	percent := m.CallPercent
	if perAttempt {
		percent = m.AttemptPercent
	}
	switch {
	case len(pool) == 0, percent < 0, perAttempt && c.Attempt != 1, !perAttempt && c.Pass != 1:
		return NoFault
	case percent == 0 && perAttempt:
		percent = 50
	case percent == 0:
		percent = 25
	}
	roll := draw(m.Seed, c)
	if int(roll%100) >= percent {
		return NoFault
	}
	return pool[(roll/100)%uint64(len(pool))]
}

// draw hashes the seed and the call's identity into a number: each part is written as its
// length and its bytes, so no two identities hash alike by concatenation.
func draw(seed int64, c Call) uint64 {
	h := sha256.New()
	for _, part := range []string{strconv.FormatInt(seed, 10), strconv.Itoa(c.Execution), c.Tool, strconv.Itoa(c.N), strconv.Itoa(c.Attempt)} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// planFunc adapts a function to Plan.
type planFunc func(Call) Fault

func (f planFunc) Fault(c Call) Fault { return f(c) }

// PlanFunc returns a Plan that asks f.
func PlanFunc(f func(Call) Fault) Plan { return planFunc(f) }

func (c Call) String() string {
	s := fmt.Sprintf("%s call %d", c.Tool, c.N)
	if c.Attempt > 0 {
		s += fmt.Sprintf(" attempt %d", c.Attempt)
	}
	if c.Pass > 1 {
		s += fmt.Sprintf(" (run %d)", c.Pass)
	}
	return s
}
