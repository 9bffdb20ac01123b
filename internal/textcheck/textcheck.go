// Package textcheck holds the one rule for the text a record stores (a tenant, a note, an
// effect reference, ...).
package textcheck

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Problem says what keeps s from being stored as record text, or "" when nothing does: more
// than limit bytes (limit 0: no limit), not valid UTF-8, or a NUL byte, which Postgres text
// cannot hold.
func Problem(s string, limit int) string {
	switch {
	case limit > 0 && len(s) > limit:
		return fmt.Sprintf("is %d bytes, over the %d-byte limit", len(s), limit)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}
