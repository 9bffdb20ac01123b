// Package failuredoc is the stored failure document: the JSON a record's Failure holds, written
// by the worker (a definite failure, the reason an outcome became unknown) and by a resolution or
// a receipt lookup (a failure decided later), and read by everything that shows one. It is a leaf:
// it imports nothing of this module.
package failuredoc

import (
	"encoding/json"
	"fmt"
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
