// Package failuredoc is the stored failure document: the JSON a record's Failure holds, written
// by the worker (a definite failure, the reason an outcome became unknown) and by a resolution or
// a receipt lookup (a failure decided later), and read by everything that shows one. It is a leaf:
// it imports nothing of this module.
package failuredoc

import (
	"encoding/json"
	"fmt"
	"time"
)

// Doc is the stored form of a failure (Record.Failure). The worker writes Message, Type and
// NonRetryable for a definite failure, and Message, Reason and EffectReference (what the tool
// recorded with oncekey.SetEffectReference before it ended) for an unknown outcome; a resolution
// or a receipt lookup writes Message and ResolvedBy. The JSON names are a stored format: changing
// one is a breaking change.
type Doc struct {
	Message         string `json:"message"`
	Type            string `json:"type,omitempty"`
	NonRetryable    bool   `json:"non_retryable,omitempty"`
	Reason          string `json:"reason,omitempty"`
	EffectReference string `json:"effect_reference,omitempty"`
	ResolvedBy      string `json:"resolved_by,omitempty"`
	// HandOff is set while an Effectful tool's result waits for an asynchronous completion (the
	// body returned activity.ErrResultPending): the pending record's document, kept when the
	// outcome becomes unknown.
	HandOff *HandOff `json:"handoff,omitempty"`
}

// HandOff names the activity attempt whose result was handed off to an asynchronous completion
// (client.CompleteActivity): what settles the record is that attempt's ending in the workflow's
// history. It is written by the worker that ran the body, from its own activity info.
type HandOff struct {
	// Epoch is the record's epoch the hand-off was made at; a document of another epoch is stale.
	Epoch      int64  `json:"epoch"`
	Namespace  string `json:"namespace,omitempty"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	ActivityID string `json:"activity_id"`
	Attempt    int32  `json:"attempt"`
	// Scheduled is when the workflow scheduled the activity (its ActivityTaskScheduled event's
	// time, as the activity's info gives it): a workflow may reuse an activity ID, and this tells
	// the scheduling the hand-off belongs to.
	Scheduled time.Time `json:"scheduled,omitzero"`
	// At is when the body returned (the worker's clock); Deadline is when the attempt times out
	// (its start-to-close or schedule-to-close deadline), after which no completion can arrive.
	At       time.Time `json:"at"`
	Deadline time.Time `json:"deadline"`
}

// Bytes is d's stored form. A document that does not encode (it always does) is stored as its
// quoted message.
func (d Doc) Bytes() []byte {
	b, err := json.Marshal(d)
	if err != nil {
		return []byte(fmt.Sprintf("%q", d.Message))
	}
	return b
}

// Decode is the document stored as b; ok is false when b is not one (an older record's text),
// and d then holds b as its Message.
func Decode(b []byte) (d Doc, ok bool) {
	if json.Unmarshal(b, &d) != nil {
		return Doc{Message: string(b)}, false
	}
	return d, true
}

// Text is the message of a stored failure b: its "message", else its "reason", when b is a JSON
// object; else b as text. Empty b is "".
func Text(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var d struct {
		Message string `json:"message"`
		Reason  string `json:"reason"`
	}
	if json.Unmarshal(b, &d) == nil {
		if d.Message != "" {
			return d.Message
		}
		if d.Reason != "" {
			return d.Reason
		}
	}
	return string(b)
}
