package canonical

import (
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Transform returns the canonical form of the JSON text jsonText: RFC 8785 (JSON Canonicalization
// Scheme) with oncekey's rules.
//
//   - No insignificant whitespace; object members sorted by the UTF-16 code units of their names;
//     strings escaped the RFC 8785 way (\" \\ \b \f \n \r \t, other controls as \u00xx, all else
//     as UTF-8).
//   - Every string, member names included, is NFC-normalised before it is sorted or written.
//   - A number with a fraction or an exponent is read as an IEEE-754 double and written the
//     ECMAScript way (2.0 → 2, 1E30 → 1e+30, 1e-5 → 0.00001). A plain integer (no fraction, no
//     exponent) is written exactly as given, at any size; -0 is written 0.
//
// Transform returns an *Error, never a silent merge, for: text that is not JSON (ErrSyntax) or has
// data after the value (ErrTrailingData); a member name twice in one object (ErrDuplicateKey) or
// two names that are equal after NFC (ErrNFCCollision); a lone surrogate escape
// (ErrLoneSurrogate); invalid UTF-8 (ErrInvalidUTF8); a number that overflows a double
// (ErrNonFinite); nesting deeper than MaxDepth (ErrTooDeep). Transform(Transform(x)) ==
// Transform(x). The result is a new slice; jsonText is not modified.
func Transform(jsonText []byte) ([]byte, error) {
	return AppendTransform(nil, jsonText)
}

// AppendTransform is Transform appending the canonical form to dst.
func AppendTransform(dst, jsonText []byte) ([]byte, error) {
	p := parserPool.Get().(*parser)
	defer p.release()
	p.in = jsonText
	root, err := p.parseDocument()
	if err != nil {
		return dst, err
	}
	return p.write(slices.Grow(dst, p.outSize()), root), nil
}

// kind is the type of a parsed value.
type kind uint8

const (
	kindNull kind = iota
	kindTrue
	kindFalse
	kindNumber
	kindString
	kindArray
	kindObject
)

// text locates bytes of the canonical form: in the input (verbatim) or in the arena (decoded,
// normalised or reformatted).
type text struct {
	off, end int
	arena    bool
	// escape: the bytes may hold characters the writer must escape. Strings copied verbatim from
	// the input never do (a quote, a backslash or a control character would have ended the
	// fast path).
	escape bool
}

// node is one parsed value. Arrays own kids[lo:hi]; objects own members[lo:hi], sorted.
type node struct {
	kind   kind
	t      text
	lo, hi int
}

type member struct {
	name text // NFC form
	orig text // as decoded, before NFC (equal to name when NFC changed nothing)
	at   int  // input offset of the name, for errors
	val  int  // node index
}

type parser struct {
	in      []byte
	pos     int
	depth   int
	arena   []byte
	scratch []byte // NFC output before it is copied into the arena

	nodes   []node
	kids    []int
	members []member

	// Scratch stacks: children are collected here while their container is open, then moved
	// into kids/members, so each container's children are contiguous.
	kidStack    []int
	memberStack []member

	path    []pathSeg
	pathBuf []text // name of each object segment in path, resolved only when an error is built
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

// release resets p and returns it to the pool, dropping buffers that grew very large.
func (p *parser) release() {
	const keep = 1 << 20
	p.in = nil
	p.pos, p.depth = 0, 0
	if cap(p.arena) > keep || cap(p.nodes) > keep/32 {
		*p = parser{}
	} else {
		p.arena = p.arena[:0]
		p.nodes = p.nodes[:0]
		p.kids = p.kids[:0]
		p.members = p.members[:0]
		p.kidStack = p.kidStack[:0]
		p.memberStack = p.memberStack[:0]
		p.path = p.path[:0]
		p.pathBuf = p.pathBuf[:0]
	}
	parserPool.Put(p)
}

func (p *parser) bytesOf(t text) []byte {
	if t.arena {
		return p.arena[t.off:t.end]
	}
	return p.in[t.off:t.end]
}

// errAt builds an *Error at offset at with the current path.
func (p *parser) errAt(kind error, at int, detail string) *Error {
	segs := make([]pathSeg, len(p.path))
	for i, s := range p.path {
		if !s.isIdx {
			s.name = string(p.bytesOf(p.pathBuf[i]))
		}
		segs[i] = s
	}
	return &Error{Kind: kind, Path: formatPath(segs), Offset: at, Detail: detail}
}

func (p *parser) syntaxErr(what string) *Error {
	if p.pos >= len(p.in) {
		return p.errAt(ErrSyntax, p.pos, "unexpected end of JSON input, want "+what)
	}
	c := p.in[p.pos]
	var got string
	if c < utf8.RuneSelf {
		got = strconv.QuoteRune(rune(c))
	} else {
		got = "byte 0x" + strconv.FormatUint(uint64(c), 16)
	}
	return p.errAt(ErrSyntax, p.pos, "invalid character "+got+", want "+what)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) parseDocument() (int, error) {
	p.skipSpace()
	root, err := p.parseValue()
	if err != nil {
		return 0, err
	}
	p.skipSpace()
	if p.pos < len(p.in) {
		return 0, p.errAt(ErrTrailingData, p.pos, "data after the top-level value")
	}
	return root, nil
}

func (p *parser) addNode(n node) int {
	p.nodes = append(p.nodes, n)
	return len(p.nodes) - 1
}

// parseValue parses one value at p.pos (whitespace already skipped) and returns its node index.
func (p *parser) parseValue() (int, error) {
	if p.pos >= len(p.in) {
		return 0, p.syntaxErr("a value")
	}
	switch c := p.in[p.pos]; c {
	case '{':
		return p.parseObject()
	case '[':
		return p.parseArray()
	case '"':
		t, _, err := p.parseString()
		if err != nil {
			return 0, err
		}
		return p.addNode(node{kind: kindString, t: t}), nil
	case 't':
		return p.literal("true", kindTrue)
	case 'f':
		return p.literal("false", kindFalse)
	case 'n':
		return p.literal("null", kindNull)
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return p.parseNumber()
		}
		return 0, p.syntaxErr("a value")
	}
}

func (p *parser) literal(word string, k kind) (int, error) {
	if len(p.in)-p.pos < len(word) || string(p.in[p.pos:p.pos+len(word)]) != word {
		return 0, p.syntaxErr("a value")
	}
	p.pos += len(word)
	return p.addNode(node{kind: k}), nil
}

func (p *parser) parseNumber() (int, error) {
	start := p.pos
	end, integer, ok := scanNumber(p.in, start)
	if !ok {
		p.pos = end
		return 0, p.syntaxErr("a digit")
	}
	p.pos = end
	if end < len(p.in) {
		switch p.in[end] {
		case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '.', 'e', 'E', '+', '-':
			return 0, p.syntaxErr("the end of a number")
		}
	}
	if integer {
		if end-start == 2 && p.in[start] == '-' && p.in[start+1] == '0' {
			start++ // -0 is 0
		}
		return p.addNode(node{kind: kindNumber, t: text{off: start, end: end}}), nil
	}
	f, err := strconv.ParseFloat(string(p.in[start:end]), 64)
	if err != nil {
		return 0, p.errAt(ErrNonFinite, start, "number "+clip(p.in[start:end])+" is out of the range of a double")
	}
	off := len(p.arena)
	p.arena, _ = AppendFloat(p.arena, f) // finite: ParseFloat returned no error
	return p.addNode(node{kind: kindNumber, t: text{off: off, end: len(p.arena), arena: true}}), nil
}

// clip quotes b for an error message, cut to 32 bytes.
func clip(b []byte) string {
	if len(b) > 32 {
		return strconv.Quote(string(b[:32])) + "…"
	}
	return strconv.Quote(string(b))
}

// parseString parses the string starting at the quote at p.pos. It returns where its NFC form
// lies, and where its decoded form before NFC lies (the same text when NFC changed nothing).
func (p *parser) parseString() (t, orig text, err error) {
	start := p.pos + 1
	i := start
	ascii := true
	for i < len(p.in) {
		c := p.in[i]
		if c == '"' {
			p.pos = i + 1
			t = text{off: start, end: i}
			if ascii {
				return t, t, nil
			}
			if !utf8.Valid(p.in[start:i]) {
				return t, t, p.invalidUTF8(start, i)
			}
			return p.nfc(t)
		}
		if c == '\\' {
			return p.parseEscapedString(start, i, ascii)
		}
		if c < 0x20 {
			p.pos = i
			return t, t, p.syntaxErr("an escape for a control character in a string")
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		i++
	}
	p.pos = i
	return t, t, p.syntaxErr(`the closing quote of a string`)
}

// parseEscapedString decodes a string with escapes into the arena; in[start:i] has none.
func (p *parser) parseEscapedString(start, i int, ascii bool) (t, orig text, err error) {
	off := len(p.arena)
	p.arena = append(p.arena, p.in[start:i]...)
	for {
		if i >= len(p.in) {
			p.pos = i
			return t, t, p.syntaxErr("the closing quote of a string")
		}
		c := p.in[i]
		switch {
		case c == '"':
			p.pos = i + 1
			t = text{off: off, end: len(p.arena), arena: true, escape: true}
			if ascii {
				return t, t, nil
			}
			if !utf8.Valid(p.arena[off:]) {
				return t, t, p.invalidUTF8(start, i)
			}
			return p.nfc(t)
		case c < 0x20:
			p.pos = i
			return t, t, p.syntaxErr("an escape for a control character in a string")
		case c != '\\':
			j := i + 1
			for j < len(p.in) && p.in[j] >= 0x20 && p.in[j] != '"' && p.in[j] != '\\' {
				j++
			}
			for _, d := range p.in[i:j] {
				if d >= utf8.RuneSelf {
					ascii = false
					break
				}
			}
			p.arena = append(p.arena, p.in[i:j]...)
			i = j
			continue
		}
		// An escape.
		if i+1 >= len(p.in) {
			p.pos = i + 1
			return t, t, p.syntaxErr("an escape character")
		}
		esc := p.in[i+1]
		switch esc {
		case '"', '\\', '/':
			p.arena = append(p.arena, esc)
		case 'b':
			p.arena = append(p.arena, '\b')
		case 'f':
			p.arena = append(p.arena, '\f')
		case 'n':
			p.arena = append(p.arena, '\n')
		case 'r':
			p.arena = append(p.arena, '\r')
		case 't':
			p.arena = append(p.arena, '\t')
		case 'u':
			r, ok := hex4(p.in, i+2)
			if !ok {
				p.pos = i + 2
				return t, t, p.syntaxErr("four hex digits after \\u")
			}
			if 0xDC00 <= r && r <= 0xDFFF {
				return t, t, p.errAt(ErrLoneSurrogate, i, "lone low surrogate \\u"+string(p.in[i+2:i+6]))
			}
			if 0xD800 <= r && r <= 0xDBFF {
				var lo rune
				if i+7 < len(p.in) && p.in[i+6] == '\\' && p.in[i+7] == 'u' {
					lo, ok = hex4(p.in, i+8)
				} else {
					ok = false
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return t, t, p.errAt(ErrLoneSurrogate, i, "lone high surrogate \\u"+string(p.in[i+2:i+6]))
				}
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				i += 6
			}
			if r >= utf8.RuneSelf {
				ascii = false
			}
			p.arena = utf8.AppendRune(p.arena, r)
			i += 4
		default:
			p.pos = i + 1
			return t, t, p.syntaxErr("an escape character")
		}
		i += 2
	}
}

// hex4 reads four hex digits at in[i:].
func hex4(in []byte, i int) (rune, bool) {
	if i+4 > len(in) {
		return 0, false
	}
	var r rune
	for _, c := range in[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// invalidUTF8 reports the first invalid UTF-8 sequence in in[start:end].
func (p *parser) invalidUTF8(start, end int) *Error {
	i := start
	for i < end {
		r, size := utf8.DecodeRune(p.in[i:end])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		i += size
	}
	return p.errAt(ErrInvalidUTF8, i, "invalid UTF-8 in a string")
}

// nfc returns the NFC form of the valid UTF-8 string at t, normalising into the arena when needed.
func (p *parser) nfc(t text) (text, text, error) {
	b := p.bytesOf(t)
	if norm.NFC.QuickSpan(b) == len(b) {
		return t, t, nil
	}
	// norm's Append normalises the concatenation of its arguments, so the string is normalised
	// into an empty scratch buffer, never appended to the arena (whose tail is other text).
	p.scratch = norm.NFC.Append(p.scratch[:0], b...)
	if string(p.scratch) == string(b) {
		return t, t, nil
	}
	off := len(p.arena)
	p.arena = append(p.arena, p.scratch...)
	return text{off: off, end: len(p.arena), arena: true, escape: t.escape}, t, nil
}

func (p *parser) enter(at int) error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errAt(ErrTooDeep, at, "arrays and objects nested deeper than "+strconv.Itoa(MaxDepth))
	}
	return nil
}

// open skips the opening byte of the array or object at p.pos (entered already) and the space
// after it, and reports whether the container is empty: close follows, and is skipped too.
func (p *parser) open(close byte) (empty bool) {
	p.pos++
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == close {
		p.pos++
		return true
	}
	return false
}

// element parses the value of an array element or object member, with seg (and the member's
// name as written, orig) on the path while it does, so that errors inside it name where it is.
func (p *parser) element(seg pathSeg, orig text) (int, error) {
	p.path = append(p.path, seg)
	p.pathBuf = append(p.pathBuf, orig)
	v, err := p.parseValue()
	if err != nil {
		return 0, err
	}
	p.path = p.path[:len(p.path)-1]
	p.pathBuf = p.pathBuf[:len(p.pathBuf)-1]
	return v, nil
}

// next skips the space after an element and then a comma and the space after it (more: another
// element follows) or the container's closing byte close (more false); ok is false when neither
// follows.
func (p *parser) next(close byte) (more, ok bool) {
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ',' {
		p.pos++
		p.skipSpace()
		return true, true
	}
	if p.pos < len(p.in) && p.in[p.pos] == close {
		p.pos++
		return false, true
	}
	return false, false
}

func (p *parser) parseArray() (int, error) {
	if err := p.enter(p.pos); err != nil {
		return 0, err
	}
	base := len(p.kidStack)
	if !p.open(']') {
		for {
			v, err := p.element(pathSeg{isIdx: true, index: len(p.kidStack) - base}, text{})
			if err != nil {
				return 0, err
			}
			p.kidStack = append(p.kidStack, v)
			if more, ok := p.next(']'); !ok {
				return 0, p.syntaxErr(`"," or "]" after an array element`)
			} else if !more {
				break
			}
		}
	}
	p.depth--
	lo := len(p.kids)
	p.kids = append(p.kids, p.kidStack[base:]...)
	p.kidStack = p.kidStack[:base]
	return p.addNode(node{kind: kindArray, lo: lo, hi: len(p.kids)}), nil
}

func (p *parser) parseObject() (int, error) {
	if err := p.enter(p.pos); err != nil {
		return 0, err
	}
	base := len(p.memberStack)
	if !p.open('}') {
		for {
			if p.pos >= len(p.in) || p.in[p.pos] != '"' {
				return 0, p.syntaxErr("a string for an object member name")
			}
			at := p.pos
			name, orig, err := p.parseString()
			if err != nil {
				return 0, err
			}
			p.skipSpace()
			if p.pos >= len(p.in) || p.in[p.pos] != ':' {
				return 0, p.syntaxErr(`":" after an object member name`)
			}
			p.pos++
			p.skipSpace()
			v, err := p.element(pathSeg{}, orig)
			if err != nil {
				return 0, err
			}
			p.memberStack = append(p.memberStack, member{name: name, orig: orig, at: at, val: v})
			if more, ok := p.next('}'); !ok {
				return 0, p.syntaxErr(`"," or "}" after an object member`)
			} else if !more {
				break
			}
		}
	}
	p.depth--
	ms := p.memberStack[base:]
	if err := p.sortMembers(ms); err != nil {
		return 0, err
	}
	lo := len(p.members)
	p.members = append(p.members, ms...)
	p.memberStack = p.memberStack[:base]
	return p.addNode(node{kind: kindObject, lo: lo, hi: len(p.members)}), nil
}

// sortMembers sorts ms by the UTF-16 code units of their NFC names and refuses equal names.
func (p *parser) sortMembers(ms []member) error {
	if len(ms) < 2 {
		return nil
	}
	sorted := true
	for i := 1; i < len(ms); i++ {
		if compareUTF16(p.bytesOf(ms[i-1].name), p.bytesOf(ms[i].name)) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return nil
	}
	slices.SortFunc(ms, func(a, b member) int {
		return compareUTF16(p.bytesOf(a.name), p.bytesOf(b.name))
	})
	for i := 1; i < len(ms); i++ {
		a, b := ms[i-1], ms[i]
		if string(p.bytesOf(a.name)) != string(p.bytesOf(b.name)) {
			continue
		}
		later := max(a.at, b.at)
		name := string(p.bytesOf(a.name))
		if string(p.bytesOf(a.orig)) == string(p.bytesOf(b.orig)) {
			return p.errAt(ErrDuplicateKey, later, "duplicate key "+strconv.Quote(name))
		}
		return p.errAt(ErrNFCCollision, later, "keys "+strconv.Quote(string(p.bytesOf(a.orig)))+
			" and "+strconv.Quote(string(p.bytesOf(b.orig)))+" are both "+strconv.Quote(name)+" after NFC")
	}
	return nil
}

// compareUTF16 compares two valid UTF-8 strings by their UTF-16 code units, as RFC 8785 §3.2.3
// sorts member names. Byte order of UTF-8 is code point order, which agrees with UTF-16 order
// except that U+E000..U+FFFF sort after the supplementary planes (their surrogates, 0xD800..
// 0xDFFF, are smaller).
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return int(a[i]) - int(b[i])
	}
	// Back up to the first byte of the rune holding the difference; the prefix is shared.
	for i > 0 && a[i]&0xC0 == 0x80 {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	return int(utf16Rank(ra)) - int(utf16Rank(rb))
}

// utf16Rank maps a rune to a number ordered like its UTF-16 encoding.
func utf16Rank(r rune) rune {
	if r >= 0xE000 && r <= 0xFFFF {
		return r + 0x200000 // above every supplementary code point (max 0x10FFFF)
	}
	return r
}

// outSize estimates the canonical form's length.
func (p *parser) outSize() int { return len(p.in) + 16 }

// write appends the canonical form of node n.
func (p *parser) write(b []byte, n int) []byte {
	nd := &p.nodes[n]
	switch nd.kind {
	case kindNull:
		return append(b, "null"...)
	case kindTrue:
		return append(b, "true"...)
	case kindFalse:
		return append(b, "false"...)
	case kindNumber:
		return append(b, p.bytesOf(nd.t)...)
	case kindString:
		return p.writeString(b, nd.t)
	case kindArray:
		b = append(b, '[')
		for i, k := range p.kids[nd.lo:nd.hi] {
			if i > 0 {
				b = append(b, ',')
			}
			b = p.write(b, k)
		}
		return append(b, ']')
	default:
		b = append(b, '{')
		for i := nd.lo; i < nd.hi; i++ {
			if i > nd.lo {
				b = append(b, ',')
			}
			m := &p.members[i]
			b = p.writeString(b, m.name)
			b = append(b, ':')
			b = p.write(b, m.val)
		}
		return append(b, '}')
	}
}

const hexDigits = "0123456789abcdef"

// writeString appends the string at t quoted and escaped the RFC 8785 way.
func (p *parser) writeString(b []byte, t text) []byte {
	s := p.bytesOf(t)
	b = append(b, '"')
	if !t.escape {
		b = append(b, s...)
		return append(b, '"')
	}
	return append(appendEscaped(b, s), '"')
}

// appendEscaped appends s (valid UTF-8) with the RFC 8785 escapes and without quotes.
func appendEscaped(b, s []byte) []byte {
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[run:i]...)
		run = i + 1
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
	}
	return append(b, s[run:]...)
}
