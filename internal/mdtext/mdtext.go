// Package mdtext writes text from workflows (a summary, who decided, a workflow ID) into the
// Markdown the Temporal UI renders (a workflow's summary, details and current details) so that it
// shows as itself. It must not import any oncekey package.
package mdtext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// active are the ASCII punctuation characters that start or end a Markdown construct inside a
// line (emphasis, code, links, images, raw HTML, entities, tables, strikethrough); Text escapes
// them with a backslash, which CommonMark allows before any ASCII punctuation.
const active = "\\`*_[]()!<>|~&"

// Text returns s as inline Markdown that renders as s on one line: the characters of active are
// backslash-escaped (an underscore between two ASCII letters or digits is left as it is), and control characters (line breaks among them), format characters
// (bidirectional overrides among them), other unprintable characters and invalid UTF-8 bytes are
// written as visible escapes (\n, \x1b, \u202e, \xff), so that text cannot forge a line, a link,
// an image, emphasis, HTML or a command in a code span.
func Text(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\\n`)
		case r == '\r':
			b.WriteString(`\\r`)
		case r == '\t':
			b.WriteString(`\\t`)
		case r == '_' && i > 0 && i+1 < len(s) && wordByte(s[i-1]) && wordByte(s[i+1]):
			// An underscore inside a word (create_ticket) starts no emphasis: left as it is.
			b.WriteByte('_')
		case r < 0x80 && strings.ContainsRune(active, r):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, `\\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\\U%08x`, r)
		}
		i += n
	}
	return b.String()
}

// wordByte reports whether c is an ASCII letter or digit.
func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Call names a tool call in Markdown: "<tool>, step <step> of workflow <id>", or "<tool> in
// workflow <id> (no step ID)" for a call without a step ID, each value through Text.
func Call(tool, stepID, workflowID string) string {
	tool, stepID, workflowID = Text(tool), Text(stepID), Text(workflowID)
	if stepID == "" {
		return fmt.Sprintf("%s in workflow %s (no step ID)", tool, workflowID)
	}
	return fmt.Sprintf("%s, step %s of workflow %s", tool, stepID, workflowID)
}
