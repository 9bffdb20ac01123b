package canonical

import (
	"errors"
	"strconv"
	"strings"
)

// Error kinds. Every error Transform and Marshal return for bad input is an *Error whose Kind is
// one of these; test with errors.Is (errors.Is(err, canonical.ErrDuplicateKey)) or get the
// position with errors.As.
var (
	// ErrSyntax: the text is not JSON (RFC 8259): a bad token, a missing comma or colon, a raw
	// control character inside a string, an unterminated value.
	ErrSyntax = errors.New("invalid JSON")
	// ErrTrailingData: a complete JSON value is followed by more than whitespace.
	ErrTrailingData = errors.New("data after the JSON value")
	// ErrDuplicateKey: an object has the same member name twice (after unescaping).
	ErrDuplicateKey = errors.New("duplicate object key")
	// ErrNFCCollision: two member names of an object differ as written but are equal after NFC
	// normalisation, so the canonical form could not keep both.
	ErrNFCCollision = errors.New("object keys equal after NFC normalisation")
	// ErrLoneSurrogate: a \u escape names half of a UTF-16 surrogate pair without the other half.
	ErrLoneSurrogate = errors.New("lone surrogate escape")
	// ErrInvalidUTF8: a string (in the text, or a Go string or map key given to Marshal) is not
	// valid UTF-8.
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	// ErrNonFinite: a number is NaN or infinite, or a fraction/exponent number overflows an
	// IEEE-754 double.
	ErrNonFinite = errors.New("number is not finite")
	// ErrTooDeep: arrays and objects are nested deeper than MaxDepth, or Marshal met a cycle.
	ErrTooDeep = errors.New("nested too deep")
	// ErrUnsupported: Marshal met a value JSON has no exact form for: a channel, a function, a
	// complex number, an unsafe pointer, a map whose key type is not a string, an integer or an
	// encoding.TextMarshaler.
	ErrUnsupported = errors.New("value cannot be encoded")
	// ErrMarshaler: a json.Marshaler or encoding.TextMarshaler failed, or a MarshalJSON method
	// returned text that is not canonicalisable JSON. Cause holds the method's error.
	ErrMarshaler = errors.New("marshaler failed")
)

// MaxDepth is how deeply arrays and objects may nest (the same bound encoding/json uses).
const MaxDepth = 10000

// Error is the error Transform and Marshal return for input they cannot encode canonically.
//
// Path is a jq-style path of the offending value: "." for the top-level value, ".Order.Items[2]"
// for a member and an element, `.["a b"]` for a member name that is not a plain identifier.
// Marshal paths use the JSON names of struct fields, which are the Go names unless a json tag
// renames them. Offset is the byte offset into the JSON text given to Transform, or -1 for an
// error found while walking a Go value in Marshal.
type Error struct {
	Kind   error  // one of the Err… kinds above
	Path   string // where, as a jq-style path
	Offset int    // byte offset into the JSON text, or -1
	Detail string // what, e.g. `duplicate key "a"`; defaults to Kind's text
	Cause  error  // the underlying error, e.g. from a MarshalJSON method; may be nil
}

// Error returns "canonical: <path>: <detail>", with the byte offset when it is known.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("canonical: ")
	if e.Path == "" {
		b.WriteString(".")
	} else {
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	if e.Detail != "" {
		b.WriteString(e.Detail)
	} else if e.Kind != nil {
		b.WriteString(e.Kind.Error())
	}
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	if e.Offset >= 0 {
		b.WriteString(" (byte ")
		b.WriteString(strconv.Itoa(e.Offset))
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the error's Kind and, when there is one, its Cause.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Kind, e.Cause}
	}
	return []error{e.Kind}
}

// pathSeg is one step of a path: a member name or an array index.
type pathSeg struct {
	name  string
	index int
	isIdx bool
}

// formatPath renders segments in jq style.
func formatPath(segs []pathSeg) string {
	if len(segs) == 0 {
		return "."
	}
	var b strings.Builder
	for _, s := range segs {
		appendSeg(&b, s)
	}
	return b.String()
}

func appendSeg(b *strings.Builder, s pathSeg) {
	if s.isIdx {
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(s.index))
		b.WriteByte(']')
		return
	}
	if isIdent(s.name) {
		b.WriteByte('.')
		b.WriteString(s.name)
		return
	}
	b.WriteString(".[")
	b.WriteString(strconv.Quote(s.name))
	b.WriteByte(']')
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// PathMember returns path, in Error.Path's form ("." for the document itself), followed by the
// member name; PathIndex the same followed by the array index. They name the places of a
// document as MarshalFloats and errors do.
func PathMember(path, name string) string { return extendPath(path, pathSeg{name: name}) }

// PathIndex returns path followed by the array index i (see PathMember).
func PathIndex(path string, i int) string { return extendPath(path, pathSeg{index: i, isIdx: true}) }

func extendPath(path string, s pathSeg) string {
	var b strings.Builder
	if path != "." {
		b.WriteString(path)
	}
	appendSeg(&b, s)
	return b.String()
}
