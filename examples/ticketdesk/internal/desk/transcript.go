package desk

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/oncekey/oncekey"
)

// Kinds of a call in a conversation, as the transcript and the report name them.
const (
	// KindFirst is the first call of a tool with these material arguments.
	KindFirst = "first"
	// KindReproposal is a call the model proposed again: the same tool and the same material
	// arguments (all but the excluded free text, trace_id) as an earlier call of the request.
	KindReproposal = "reproposal"
	// KindChanged is an effectful tool proposed again with other material arguments: a new
	// operation.
	KindChanged = "changed_arguments"
)

// classify names each call's kind, in order.
func classify(calls []Call) []string {
	seen := map[string]bool{}
	tools := map[string]bool{}
	kinds := make([]string, len(calls))
	for i, c := range calls {
		id := c.Tool + "\x00" + material(json.RawMessage(c.Arguments))
		switch {
		case seen[id]:
			kinds[i] = KindReproposal
		case tools[c.Tool] && c.Tool != ToolLookupCustomer:
			kinds[i] = KindChanged
		default:
			kinds[i] = KindFirst
		}
		seen[id], tools[c.Tool] = true, true
	}
	return kinds
}

// transcriptLine is one line of a request's JSONL transcript: one message the model saw (or
// wrote), with each tool result's label beside the text the model read.
type transcriptLine struct {
	Index int    `json:"i"`
	Turn  int    `json:"turn,omitempty"`
	Role  string `json:"role"`
	// Content is the message's content: for a tool message, exactly what the model read.
	Content   string     `json:"content,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// The tool message's call, its label and its kind (first, reproposal, changed_arguments).
	ToolCallID      string          `json:"tool_call_id,omitempty"`
	Tool            string          `json:"tool,omitempty"`
	Status          oncekey.Outcome `json:"status,omitempty"`
	Replayed        bool            `json:"replayed,omitempty"`
	Kind            string          `json:"kind,omitempty"`
	OperationKey    string          `json:"operation_key,omitempty"`
	EffectReference string          `json:"effect_reference,omitempty"`
}

// WriteTranscript writes res's conversation to w as JSONL, one message a line, in order.
func WriteTranscript(w io.Writer, res AgentResult) error {
	kinds := classify(res.Calls)
	byID := map[string]int{}
	for i, c := range res.Calls {
		byID[c.ID] = i
	}
	enc := json.NewEncoder(w)
	turn := 0
	for i, m := range res.Messages {
		l := transcriptLine{Index: i, Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls}
		switch m.Role {
		case "assistant":
			turn++
			l.Turn = turn
		case "tool":
			l.Turn = turn
			l.ToolCallID = m.ToolCallID
			if j, ok := byID[m.ToolCallID]; ok {
				c := res.Calls[j]
				l.Tool, l.Status, l.Replayed, l.Kind = c.Tool, c.Outcome.Status, c.Outcome.Replayed, kinds[j]
				l.OperationKey, l.EffectReference = c.Outcome.OperationKey, c.Outcome.EffectReference
			}
		}
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return nil
}

// writeTranscripts writes one file per request, dir/<request ID>.jsonl.
func writeTranscripts(dir string, results []AgentResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("desk: transcripts: %w", err)
	}
	for _, r := range results {
		f, err := os.Create(filepath.Join(dir, fileName(r.RequestID)+".jsonl"))
		if err != nil {
			return fmt.Errorf("desk: transcripts: %w", err)
		}
		werr := WriteTranscript(f, r)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("desk: transcript of %s: %w", r.RequestID, werr)
		}
	}
	return nil
}

// fileName keeps letters, digits, '.', '-' and '_' of id and turns anything else into '_', so a
// request ID cannot name a path outside the directory.
func fileName(id string) string {
	b := []byte(id)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && i > 0
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}
