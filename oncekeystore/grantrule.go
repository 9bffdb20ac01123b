package oncekeystore

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"unicode"

	"github.com/oncekey/oncekey/internal/jsondoc"
)

// MaxGrantRuleBytes is the longest grant rule: 500 bytes.
const MaxGrantRuleBytes = 500

// GrantRule is a parsed grant rule (Grant.Rule): comparisons of the call's arguments with
// literals, all of which must hold, joined by "and":
//
//	amount <= 100
//	amount <= 100 and currency == "EUR" and order.express == false
//
// The left side is a dotted JSON path into the arguments document the tool's body receives (its
// canonical JSON, Operation.ArgsJSON; digits index a list: items.0.sku); the right side a JSON
// literal: a number, a string in double quotes (JSON escapes), true, false or null. The operators
// are == and != for every literal, and <, <=, >, >= for numbers, compared exactly (not as
// floats). A comparison with an absent path, or with a value of another kind than the literal
// (a string "100" against 100), is false: a rule never covers a call it cannot read.
type GrantRule struct {
	conds []grantCond
}

type grantCond struct {
	path string
	op   string
	lit  any // json.Number, string, bool or nil
}

// ParseGrantRule parses s; "" is the rule that covers every call (nil, nil). Bad syntax is an
// error saying where and what is expected.
func ParseGrantRule(s string) (*GrantRule, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	if len(s) > MaxGrantRuleBytes {
		return nil, fmt.Errorf("the rule is %d bytes, more than %d", len(s), MaxGrantRuleBytes)
	}
	p := &ruleParser{s: s}
	r := &GrantRule{}
	for {
		c, err := p.cond()
		if err != nil {
			return nil, err
		}
		r.conds = append(r.conds, c)
		p.space()
		if p.i == len(p.s) {
			return r, nil
		}
		if w := p.word(); w != "and" {
			return nil, fmt.Errorf("at byte %d: want \"and\" or the end of the rule, found %q", p.i-len(w), p.rest())
		}
	}
}

type ruleParser struct {
	s string
	i int
}

func (p *ruleParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *ruleParser) rest() string {
	r := p.s[p.i:]
	if len(r) > 20 {
		r = r[:20] + "…"
	}
	return r
}

// word reads a path or keyword: letters, digits, '_', '-' and '.'.
func (p *ruleParser) word() string {
	p.space()
	start := p.i
	for p.i < len(p.s) {
		c := rune(p.s[p.i])
		if c >= 0x80 || !(unicode.IsLetter(c) || unicode.IsDigit(c) || c == '_' || c == '-' || c == '.') {
			break
		}
		p.i++
	}
	return p.s[start:p.i]
}

func (p *ruleParser) cond() (grantCond, error) {
	at := p.i
	path := p.word()
	if path == "" {
		return grantCond{}, fmt.Errorf("at byte %d: want a dotted path of the arguments (amount, order.id), found %q", at, p.rest())
	}
	for _, seg := range strings.Split(path, ".") {
		if seg == "" {
			return grantCond{}, fmt.Errorf("at byte %d: the path %q has an empty segment", at, path)
		}
	}
	p.space()
	var op string
	for _, o := range []string{"==", "!=", "<=", ">=", "<", ">"} {
		if strings.HasPrefix(p.s[p.i:], o) {
			op = o
			break
		}
	}
	if op == "" {
		return grantCond{}, fmt.Errorf("at byte %d: want ==, !=, <, <=, > or >= after %s, found %q", p.i, path, p.rest())
	}
	p.i += len(op)
	p.space()
	at = p.i
	dec := json.NewDecoder(strings.NewReader(p.s[p.i:]))
	dec.UseNumber()
	var lit any
	if err := dec.Decode(&lit); err != nil {
		return grantCond{}, fmt.Errorf("at byte %d: want a JSON literal (a number, a \"string\", true, false or null), found %q", at, p.rest())
	}
	p.i += int(dec.InputOffset())
	switch lit.(type) {
	case json.Number, string, bool, nil:
	default:
		return grantCond{}, fmt.Errorf("at byte %d: want a number, a string, true, false or null, not an object or a list", at)
	}
	if _, isNum := lit.(json.Number); !isNum && op != "==" && op != "!=" {
		return grantCond{}, fmt.Errorf("at byte %d: %s compares numbers only; use == or != for %s", at, op, p.s[at:p.i])
	}
	if p.i < len(p.s) && p.s[p.i] != ' ' && p.s[p.i] != '\t' {
		return grantCond{}, fmt.Errorf("at byte %d: want a space after the literal, found %q", p.i, p.rest())
	}
	return grantCond{path: path, op: op, lit: lit}, nil
}

// Match reports whether the arguments document args (canonical JSON, Operation.ArgsJSON)
// satisfies every comparison of r. A nil rule matches every call; a document that does not
// decode matches none.
func (r *GrantRule) Match(args []byte) bool {
	if r == nil {
		return true
	}
	doc, err := jsondoc.Decode(args)
	if err != nil {
		return false
	}
	for _, c := range r.conds {
		v, ok := jsondoc.Lookup(doc, c.path)
		if !ok || !c.holds(v) {
			return false
		}
	}
	return true
}

func (c grantCond) holds(v any) bool {
	switch lit := c.lit.(type) {
	case json.Number:
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		a, aok := new(big.Rat).SetString(n.String())
		b, bok := new(big.Rat).SetString(lit.String())
		if !aok || !bok {
			return false
		}
		cmp := a.Cmp(b)
		switch c.op {
		case "==":
			return cmp == 0
		case "!=":
			return cmp != 0
		case "<":
			return cmp < 0
		case "<=":
			return cmp <= 0
		case ">":
			return cmp > 0
		case ">=":
			return cmp >= 0
		}
		return false
	case string, bool, nil:
		if reflect.TypeOf(v) != reflect.TypeOf(c.lit) {
			return false
		}
		return (v == c.lit) == (c.op == "==")
	}
	return false
}

// CheckTypes checks every comparison of r against the type fieldType gives for its path (the
// path split at dots): every path must name a field (fieldType's error otherwise), and every
// literal can be a value there (a number for an integer or float field, a string for a string or
// text-marshalled field, true or false for a bool; null for any). A field whose type has its own
// MarshalJSON, or is an interface, takes any literal; a nil type takes any literal.
func (r *GrantRule) CheckTypes(fieldType func(path []string) (reflect.Type, error)) error {
	for _, c := range r.conds {
		t, err := fieldType(strings.Split(c.path, "."))
		if err != nil {
			return fmt.Errorf("%s: %v", c.path, err)
		}
		if t != nil && !literalFits(t, c.lit) {
			return fmt.Errorf("%s is a %s, which never equals or compares with %v", c.path, t, litText(c.lit))
		}
	}
	return nil
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func litText(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	if v == nil {
		return "null"
	}
	return fmt.Sprint(v)
}

// literalFits reports whether a JSON literal can be the value of a field of type t.
func literalFits(t reflect.Type, lit any) bool {
	if t.Kind() == reflect.Interface || t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType) {
		return true
	}
	if lit == nil {
		return true // a pointer, slice, map, or a field its type encodes as null
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch lit.(type) {
	case json.Number:
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
			return true
		}
	case string:
		return t.Kind() == reflect.String || t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)
	case bool:
		return t.Kind() == reflect.Bool
	}
	return false
}
