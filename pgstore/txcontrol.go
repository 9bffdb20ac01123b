package pgstore

import "strings"

// endsTx reports whether sql holds a statement that would end the transaction it runs in, and
// returns that statement's first words, upper-cased: COMMIT (with AND CHAIN too), END, ROLLBACK
// or ABORT (ROLLBACK TO a savepoint excepted: it keeps the transaction), PREPARE TRANSACTION. It
// reads the first word of each statement of sql, split at semicolons outside string literals,
// dollar-quoted strings, quoted identifiers and comments, so "commit; begin" and "/* c */ END"
// are found and "SELECT 'commit'" is not; it errs towards finding one (the END of a BEGIN ATOMIC
// function body). A COMMIT inside a procedure or a DO block is refused by Postgres itself within
// a transaction block.
//
// Literals are split as Postgres's lexer splits them: a literal followed by blanks and --
// comments holding a newline and then a quote goes on in the same mode (in E'a' newline 'b\'c',
// the second part is read with escapes too). How a plain '…' literal reads depends on the
// session's standard_conforming_strings, which the body can change (SET, set_config) and which
// endsTx cannot see: rather than refusing each way of changing it, sql is read both ways (a
// backslash in '…' taken literally, then as an escape) and a statement either reading finds is
// reported. The cost is a rare false refusal: a plain literal ending in a backslash followed by a
// literal holding "; commit" or the like.
func endsTx(sql string) (string, bool) {
	if stmt, ok := endsTxReading(sql, false); ok {
		return stmt, true
	}
	return endsTxReading(sql, true)
}

// endsTxReading is endsTx with plain literals read with backslash escapes (escapes, as when
// standard_conforming_strings is off) or without.
func endsTxReading(sql string, escapes bool) (string, bool) {
	start := true // at the start of a statement
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ';':
			start = true
			i++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			i = skipLineComment(sql, i)
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			i = skipBlockComment(sql, i)
		case start && isWordByte(c) && !stringPrefix(sql, i):
			j := identEnd(sql, i)
			word := strings.ToUpper(sql[i:j])
			switch word {
			case "COMMIT", "END", "ABORT":
				return word, true
			case "ROLLBACK":
				// ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name keeps the transaction.
				next, k := nextWord(sql, j)
				if next == "WORK" || next == "TRANSACTION" {
					next, _ = nextWord(sql, k)
				}
				if next != "TO" {
					return word, true
				}
			case "PREPARE":
				if next, _ := nextWord(sql, j); next == "TRANSACTION" {
					return word + " TRANSACTION", true
				}
			}
			start = false
			i = j
		default:
			start = false
			i = skipToken(sql, i, escapes)
		}
	}
	return "", false
}

// nextWord returns the word after position i of sql (skipping blanks and comments), upper-cased,
// and the position after it.
func nextWord(sql string, i int) (string, int) {
	for i < len(sql) {
		switch c := sql[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			i = skipLineComment(sql, i)
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			i = skipBlockComment(sql, i)
		default:
			j := identEnd(sql, i)
			return strings.ToUpper(sql[i:j]), j
		}
	}
	return "", i
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// identEnd returns the position after the identifier or keyword starting at i (letters, digits,
// _ and $ after its first byte, as Postgres reads one).
func identEnd(sql string, i int) int {
	j := i
	for j < len(sql) && (isWordByte(sql[j]) || j > i && (sql[j] >= '0' && sql[j] <= '9' || sql[j] == '$')) {
		j++
	}
	return j
}

// stringPrefix reports whether the word at i opens a literal: E'…', B'…', X'…' or U&'….
func stringPrefix(sql string, i int) bool {
	switch sql[i] {
	case 'e', 'E', 'b', 'B', 'x', 'X':
		return i+1 < len(sql) && sql[i+1] == '\''
	case 'u', 'U':
		return strings.HasPrefix(sql[i+1:], "&'")
	}
	return false
}

// skipLineComment returns the position of the line end (\n or \r, as for Postgres) or of the end
// of sql after the -- comment starting at i.
func skipLineComment(sql string, i int) int {
	for i < len(sql) && sql[i] != '\n' && sql[i] != '\r' {
		i++
	}
	return i
}

// skipBlockComment returns the position after the (nested) comment starting at i.
func skipBlockComment(sql string, i int) int {
	depth := 0
	for i < len(sql) {
		switch {
		case strings.HasPrefix(sql[i:], "/*"):
			depth++
			i += 2
		case strings.HasPrefix(sql[i:], "*/"):
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return i
}

// How the bytes of a literal read (Postgres's lexer states).
const (
	litPlain   = iota // '…', U&'…' with standard_conforming_strings on: '' is a quote
	litEscapes        // E'…', and '…' with it off: '' is a quote, a backslash escapes the next byte
	litBits           // B'…', X'…': a quote ends it
)

// skipToken returns the position after the token starting at i that is not a word at the start
// of a statement: a literal ('…', read with backslash escapes when escapes; E'…', B'…', X'…',
// U&'…'), a quoted identifier, a dollar-quoted string, a word (with its quote prefix) or one
// other byte.
func skipToken(sql string, i int, escapes bool) int {
	c := sql[i]
	switch {
	case c == '\'':
		if escapes {
			return skipLiteral(sql, i, litEscapes)
		}
		return skipLiteral(sql, i, litPlain)
	case c == '"':
		return skipIdent(sql, i)
	case stringPrefix(sql, i):
		switch c {
		case 'e', 'E':
			return skipLiteral(sql, i+1, litEscapes)
		case 'b', 'B', 'x', 'X':
			return skipLiteral(sql, i+1, litBits)
		}
		// U&'…' is refused by Postgres when standard_conforming_strings is off.
		return skipLiteral(sql, i+2, litPlain)
	case c == '$':
		// $tag$…$tag$ (tag empty or a word not starting with a digit); $1 is a parameter.
		j := i + 1
		for j < len(sql) && (isWordByte(sql[j]) || j > i+1 && sql[j] >= '0' && sql[j] <= '9') {
			j++
		}
		if j < len(sql) && sql[j] == '$' {
			tag := sql[i : j+1]
			if k := strings.Index(sql[j+1:], tag); k >= 0 {
				return j + 1 + k + len(tag)
			}
			return len(sql)
		}
		return i + 1
	case isWordByte(c) || c >= '0' && c <= '9':
		j := i
		for j < len(sql) && (isWordByte(sql[j]) || sql[j] >= '0' && sql[j] <= '9' || sql[j] == '$') {
			j++
		}
		return j
	}
	return i + 1
}

// skipIdent returns the position after the quoted identifier opened at i ("" stands for ").
func skipIdent(sql string, i int) int {
	for j := i + 1; j < len(sql); j++ {
		if sql[j] == '"' {
			if j+1 < len(sql) && sql[j+1] == '"' {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(sql)
}

// skipLiteral returns the position after the literal opened by the quote at i, read in mode
// (litPlain, litEscapes, litBits), with the continuations Postgres joins to it in that mode.
func skipLiteral(sql string, i int, mode int) int {
	for j := i + 1; j < len(sql); j++ {
		switch {
		case mode == litEscapes && sql[j] == '\\':
			j++
		case sql[j] == '\'':
			if mode != litBits && j+1 < len(sql) && sql[j+1] == '\'' {
				j++
				continue
			}
			k, ok := continuation(sql, j+1)
			if !ok {
				return j + 1
			}
			j = k // the continuation's opening quote
		}
	}
	return len(sql)
}

// continuation reports whether a literal that closed just before i goes on (Postgres's
// quotecontinue): blanks and -- comments holding at least one line end, then a quote; before the
// first line end only spaces, tabs, form feeds and a comment count. It returns the quote's
// position.
func continuation(sql string, i int) (int, bool) {
	newline := false
	for i < len(sql) {
		switch c := sql[i]; {
		case c == '\n' || c == '\r':
			newline = true
			i++
		case c == ' ' || c == '\t' || c == '\f' || c == '\v' && newline:
			i++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			i = skipLineComment(sql, i)
		case c == '\'' && newline:
			return i, true
		default:
			return i, false
		}
	}
	return i, false
}
