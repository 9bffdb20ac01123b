package canonical

import (
	"math"
	"strconv"
)

// AppendFloat appends the canonical form of f to b: the ECMAScript Number::toString form that
// RFC 8785 §3.2.2.3 prescribes (shortest round-trip digits; fixed notation from 1e-6 up to but
// not including 1e21, exponent notation outside it; -0 as 0). It reports false, appending
// nothing, for NaN and ±Inf, which JSON cannot carry.
func AppendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	if f == 0 {
		return append(b, '0'), true
	}
	abs := math.Abs(f)
	if abs >= 1e-6 && abs < 1e21 {
		return strconv.AppendFloat(b, f, 'f', -1, 64), true
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'e', -1, 64)
	// Go writes at least two exponent digits ("1e-07"); ECMAScript writes no leading zero.
	for i := len(b) - 1; i > start; i-- {
		if b[i] == 'e' {
			if i+3 < len(b) && b[i+2] == '0' {
				copy(b[i+2:], b[i+3:])
				b = b[:len(b)-1]
			}
			break
		}
	}
	return b, true
}

// scanNumber scans an RFC 8259 number starting at in[pos] and returns the index after it and
// whether it is a plain integer (no fraction, no exponent). ok is false when the text at pos is
// not a number.
func scanNumber(in []byte, pos int) (end int, integer, ok bool) {
	i := pos
	if i < len(in) && in[i] == '-' {
		i++
	}
	if i >= len(in) {
		return i, false, false
	}
	switch c := in[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i++
		for i < len(in) && '0' <= in[i] && in[i] <= '9' {
			i++
		}
	default:
		return i, false, false
	}
	integer = true
	if i < len(in) && in[i] == '.' {
		integer = false
		if i, ok = digits(in, i+1); !ok {
			return i, false, false
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		integer = false
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i, ok = digits(in, i); !ok {
			return i, false, false
		}
	}
	return i, integer, true
}

// digits scans the run of decimal digits at in[i:] and returns the index after it; ok is false
// when there is none.
func digits(in []byte, i int) (end int, ok bool) {
	d := i
	for i < len(in) && '0' <= in[i] && in[i] <= '9' {
		i++
	}
	return i, i > d
}
