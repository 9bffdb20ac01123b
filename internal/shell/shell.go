// Package shell quotes words for the commands oncekey prints in its messages, so that a value
// from a workflow (a tenant, a workflow ID, a step ID, a schema) pasted into a shell is one
// argument and runs nothing. It must not import any oncekey package.
package shell

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Word returns s as one shell word that a pasted command passes as exactly s:
//   - as it is when it holds only ASCII letters, digits and -_.:/@=;
//   - single-quoted (POSIX), an embedded single quote closing the quotes, escaped and reopened,
//     when every character is printable and none is a backtick, a dollar sign or a backslash;
//   - otherwise in ANSI-C quotes ($'…', bash, zsh, ksh and POSIX.1-2024 sh), with every control
//     character, format character (bidirectional overrides among them), other unprintable
//     character, backtick, dollar sign, backslash, single quote and invalid UTF-8 byte escaped
//     (\xHH, \uHHHH, \UHHHHHHHH), so the printed word holds nothing a terminal or a Markdown code
//     span acts on.
//
// The empty string is a pair of single quotes.
func Word(s string) string {
	if s == "" {
		return "''"
	}
	plain, quotable := true, true
	for i, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@=", r) {
			continue
		}
		plain = false
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				quotable = false // an invalid byte
				break
			}
		}
		if r == '`' || r == '$' || r == '\\' || !unicode.IsPrint(r) {
			quotable = false
			break
		}
	}
	switch {
	case plain:
		return s
	case quotable:
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return ansiC(s)
}

// ansiC returns s in $'…' quotes with everything but printable characters (other than ` $ \ ')
// escaped.
func ansiC(s string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '`' || r == '$' || r == '\\' || r == '\'':
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += n
	}
	b.WriteString("'")
	return b.String()
}
