// Package shell quotes words for the commands oncekey prints in its messages.
package shell

import "strings"

// Word returns s as one POSIX shell word: as it is when it holds only letters, digits and
// -_.:/@=, else single-quoted, an embedded single quote closing the quotes, escaped and
// reopened; the empty string is a pair of single quotes.
func Word(s string) string {
	if s == "" {
		return "''"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@=", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
