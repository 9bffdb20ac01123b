package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// printable returns s as it is safe to print to a terminal: unchanged when it is valid UTF-8 of
// printable characters and spaces, else as a Go-quoted string ("a\r\nb", "\x1b[31m") so control
// characters, format characters (bidi overrides), tabs, newlines and invalid bytes show as
// escapes and cannot move the cursor, colour the terminal or forge a line. A value that starts
// with a double quote is quoted too, so a quoted value is never mistaken for a plain one.
//
// Stored strings (tools, workflow and step IDs, tenants, effect references, notes, resolved-by)
// come from workflows and so, indirectly, from models' tool calls: every human-readable line
// prints them through printable. JSON output needs no such care: encoding/json escapes control
// characters itself.
func printable(s string) string {
	if (s != "" && s[0] == '"') || !plain(s) {
		return strconv.Quote(s)
	}
	return s
}

// plain reports whether s is valid UTF-8 of printable characters and spaces only.
func plain(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || (r != ' ' && !strconv.IsPrint(r)) {
			return false
		}
		i += n
	}
	return true
}

// cell is a table cell: printable(s), or "-" when s is empty.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return printable(s)
}

// printableJSON returns stored JSON for one line of human-readable output: compacted (JSON may
// hold raw newlines and tabs between its tokens), and Go-quoted as printable does if it still
// holds a character that is not plain (JSON strings may hold raw format and C1 control
// characters). A leading double quote is JSON's own and does not make it quoted.
func printableJSON(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) == nil {
		b = buf.Bytes()
	}
	if s := string(b); plain(s) {
		return s
	}
	return strconv.Quote(string(b))
}
