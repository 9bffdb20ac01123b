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
func endsTx(sql string) (string, bool) {
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
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			i = skipBlockComment(sql, i)
		case start && isWordByte(c):
			j := i
			for j < len(sql) && isWordByte(sql[j]) {
				j++
			}
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
			i = skipToken(sql, i)
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
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			i = skipBlockComment(sql, i)
		default:
			j := i
			for j < len(sql) && isWordByte(sql[j]) {
				j++
			}
			return strings.ToUpper(sql[i:j]), j
		}
	}
	return "", i
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
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

// skipToken returns the position after the token starting at i that is not a word at the start
// of a statement: a string literal ('…', E'…' with backslash escapes), a quoted identifier, a
// dollar-quoted string, a word (with its quote prefix) or one other byte.
func skipToken(sql string, i int) int {
	c := sql[i]
	switch {
	case c == '\'':
		return skipQuoted(sql, i, '\'', false)
	case c == '"':
		return skipQuoted(sql, i, '"', false)
	case (c == 'e' || c == 'E') && i+1 < len(sql) && sql[i+1] == '\'':
		return skipQuoted(sql, i+1, '\'', true)
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

// skipQuoted returns the position after the literal or identifier opened by quote at i. A doubled
// quote stands for itself; with backslash, a backslash escapes the next byte.
func skipQuoted(sql string, i int, quote byte, backslash bool) int {
	for j := i + 1; j < len(sql); j++ {
		switch {
		case backslash && sql[j] == '\\':
			j++
		case sql[j] == quote:
			if j+1 < len(sql) && sql[j+1] == quote {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(sql)
}
