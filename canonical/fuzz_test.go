package canonical_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"golang.org/x/text/unicode/norm"

	"github.com/oncekey/oncekey/canonical"
)

// seedCorpus adds every vector input (RFC 8785 and canonical.json) and a few extra documents.
func seedCorpus(f *testing.F, add func(data []byte)) {
	dir := vectorsDir(f)
	entries, err := os.ReadDir(filepath.Join(dir, "rfc8785", "input"))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, "rfc8785", "input", e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		add(b)
	}
	for _, c := range loadCases(f) {
		add([]byte(c.Input))
	}
	for _, s := range []string{
		`{"order":{"id":"A-1","items":[{"sku":"x","qty":2,"price":9.99}],"note":null,"rush":true}}`,
		`[1e21,1e-6,1e-7,5e-324,1.7976931348623157e308,-0.0,123456789012345678]`,
		`{"\u00e9":"\u0065\u0301","\ud83d\ude02":[{}],"\uffff":"\u0000"}`,
		`[[[[[]]]],{"a":{"b":{"c":{}}}}]`,
	} {
		add([]byte(s))
	}
}

// pow53 is 2^53: plain integers beyond it are where the exact-integer rule and RFC 8785 part.
var pow53 = new(big.Int).Lsh(big.NewInt(1), 53)

// extensionsApply reports, by reading data with encoding/json (a parser independent of ours),
// whether one of oncekey's extensions to RFC 8785 could change the result: a string or member
// name that is not already NFC, or a plain integer literal beyond ±2^53. valid is false when
// encoding/json does not accept data as exactly one JSON value.
func extensionsApply(data []byte) (apply, valid bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	depth := 0
	started := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return apply, started && depth == 0
		}
		if err != nil {
			return apply, false
		}
		if started && depth == 0 {
			return apply, false // a second top-level value
		}
		started = true
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if !norm.NFC.IsNormalString(v) {
				apply = true
			}
		case json.Number:
			s := string(v)
			if !strings.ContainsAny(s, ".eE") {
				n, ok := new(big.Int).SetString(s, 10)
				if !ok || n.CmpAbs(pow53) > 0 {
					apply = true
				}
			}
		}
	}
}

// FuzzTransformDifferential compares Transform with gowebpki/jcs on inputs where the project's
// extensions do not apply: both must refuse, or both must produce the same bytes.
func FuzzTransformDifferential(f *testing.F) {
	seedCorpus(f, func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, data []byte) {
		apply, valid := extensionsApply(data)
		if apply {
			t.Skip()
		}
		ours, errOurs := canonical.Transform(data)
		theirs, errTheirs := jcs.Transform(data)
		if !valid {
			if errOurs == nil {
				t.Fatalf("accepted what encoding/json refuses: %q -> %q", data, ours)
			}
			return
		}
		if (errOurs == nil) != (errTheirs == nil) {
			t.Fatalf("disagree on %q: ours %q, %v; jcs %q, %v", data, ours, errOurs, theirs, errTheirs)
		}
		if errOurs == nil && !bytes.Equal(ours, theirs) {
			t.Fatalf("disagree on %q:\nours %q\njcs  %q", data, ours, theirs)
		}
	})
}

// FuzzTransformIdempotent checks that an accepted input gives valid, NFC, canonical JSON that
// Transform leaves as it is, and that only JSON is accepted.
func FuzzTransformIdempotent(f *testing.F) {
	seedCorpus(f, func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := canonical.Transform(data)
		if err != nil {
			var ce *canonical.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a *canonical.Error: %T %v", err, err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted what encoding/json refuses: %q", data)
		}
		if !utf8.Valid(out) || !json.Valid(out) {
			t.Fatalf("output is not valid UTF-8 JSON: %q -> %q", data, out)
		}
		// Every string is NFC once decoded. (The JSON text as a whole need not be: in "\n\u0300"
		// the escape's "n" sits next to the combining mark.)
		tree, err := decodeTree(out)
		if err != nil {
			t.Fatalf("output does not decode: %q -> %q: %v", data, out, err)
		}
		var nodes []*any
		collect(&tree, &nodes)
		for _, n := range nodes {
			switch v := (*n).(type) {
			case string:
				if !norm.NFC.IsNormalString(v) {
					t.Fatalf("string %q is not NFC: %q -> %q", v, data, out)
				}
			case object:
				for _, m := range v {
					if !norm.NFC.IsNormalString(m.key) {
						t.Fatalf("member name %q is not NFC: %q -> %q", m.key, data, out)
					}
				}
			}
		}
		again, err := canonical.Transform(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", data, out, again, err)
		}
	})
}

// FuzzTransformEquivalent re-writes an accepted input in an equivalent form — members shuffled,
// whitespace added, strings escaped differently, numbers written another way with the same
// value — and checks that the canonical form does not change.
func FuzzTransformEquivalent(f *testing.F) {
	seedCorpus(f, func(b []byte) { f.Add(b, uint64(7)) })
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		out, err := canonical.Transform(data)
		if err != nil {
			return
		}
		tree, err := decodeTree(data)
		if err != nil {
			t.Fatalf("encoding/json refuses what Transform accepted: %q: %v", data, err)
		}
		w := &writer{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), vary: true}
		w.value(tree)
		got, err := canonical.Transform(w.buf)
		if err != nil {
			t.Fatalf("equivalent form refused: %q (from %q): %v", w.buf, data, err)
		}
		if !bytes.Equal(got, out) {
			t.Fatalf("equivalent forms differ:\n%q -> %q\n%q -> %q", data, out, w.buf, got)
		}
	})
}

// FuzzTransformDistinct changes one value of an accepted input (a string, a number, a literal,
// a member name, an element or member added or removed) and checks that the canonical form
// changes.
func FuzzTransformDistinct(f *testing.F) {
	seedCorpus(f, func(b []byte) { f.Add(b, uint64(11)) })
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		out, err := canonical.Transform(data)
		if err != nil {
			return
		}
		tree, err := decodeTree(data)
		if err != nil {
			t.Fatalf("encoding/json refuses what Transform accepted: %q: %v", data, err)
		}
		rng := rand.New(rand.NewPCG(seed, ^seed))
		var nodes []*any
		collect(&tree, &nodes)
		target := nodes[rng.IntN(len(nodes))]
		what, ok := mutate(target, rng)
		if !ok {
			t.Skip()
		}
		w := &writer{}
		w.value(tree)
		got, err := canonical.Transform(w.buf)
		if err != nil {
			return // e.g. a renamed member now collides with another
		}
		if bytes.Equal(got, out) {
			t.Fatalf("%s did not change the canonical form: %q and %q both -> %q", what, data, w.buf, out)
		}
	})
}

// object is a JSON object with its members in input order.
type object []kv

type kv struct {
	key string
	val any
}

// decodeTree reads data with encoding/json into nil, bool, json.Number, string, []any and object.
func decodeTree(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var read func() (any, error)
	read = func() (any, error) {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch d := tok.(type) {
		case json.Delim:
			if d == '[' {
				arr := []any{}
				for dec.More() {
					v, err := read()
					if err != nil {
						return nil, err
					}
					arr = append(arr, v)
				}
				_, err := dec.Token()
				return arr, err
			}
			obj := object{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := read()
				if err != nil {
					return nil, err
				}
				obj = append(obj, kv{k.(string), v})
			}
			_, err := dec.Token()
			return obj, err
		default:
			return tok, nil
		}
	}
	return read()
}

// writer writes a tree as JSON; with vary, in a randomly chosen equivalent form.
type writer struct {
	buf  []byte
	rng  *rand.Rand
	vary bool
}

func (w *writer) space() {
	if w.vary && w.rng.IntN(3) == 0 {
		w.buf = append(w.buf, " \t\n\r"[w.rng.IntN(4)])
	}
}

func (w *writer) value(v any) {
	w.space()
	switch v := v.(type) {
	case nil:
		w.buf = append(w.buf, "null"...)
	case bool:
		w.buf = strconv.AppendBool(w.buf, v)
	case json.Number:
		w.number(string(v))
	case string:
		w.string(v)
	case []any:
		w.buf = append(w.buf, '[')
		for i, e := range v {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.value(e)
		}
		w.space()
		w.buf = append(w.buf, ']')
	case object:
		order := make([]int, len(v))
		for i := range order {
			order[i] = i
		}
		if w.vary {
			w.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		w.buf = append(w.buf, '{')
		for n, i := range order {
			if n > 0 {
				w.buf = append(w.buf, ',')
			}
			w.space()
			w.string(v[i].key)
			w.space()
			w.buf = append(w.buf, ':')
			w.value(v[i].val)
		}
		w.space()
		w.buf = append(w.buf, '}')
	}
	w.space()
}

func (w *writer) number(s string) {
	if !w.vary {
		w.buf = append(w.buf, s...)
		return
	}
	if strings.ContainsAny(s, ".eE") {
		// Another spelling of the same double.
		f, err := strconv.ParseFloat(s, 64)
		if err == nil && w.rng.IntN(2) == 0 {
			w.buf = strconv.AppendFloat(w.buf, f, 'E', -1, 64)
			return
		}
		w.buf = append(w.buf, s...)
		return
	}
	// A small integer may be written as a fraction or with an exponent: the same double, whose
	// ECMAScript form is the integer again.
	if len(strings.TrimPrefix(s, "-")) <= 15 {
		switch w.rng.IntN(4) {
		case 0:
			w.buf = append(w.buf, s+".0"...)
			return
		case 1:
			w.buf = append(w.buf, s+"e0"...)
			return
		case 2:
			if strings.TrimPrefix(s, "-") != "0" { // "00E-1" is not JSON
				w.buf = append(w.buf, s+"0E-1"...)
				return
			}
		}
	}
	w.buf = append(w.buf, s...)
}

func (w *writer) string(s string) {
	w.buf = append(w.buf, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			if w.vary && w.rng.IntN(2) == 0 {
				w.buf = appendU(w.buf, r, w.rng)
			} else {
				w.buf = append(w.buf, '\\', byte(r))
			}
		case r < 0x20 || w.vary && w.rng.IntN(4) == 0:
			w.buf = appendU(w.buf, r, w.rng)
		case r == '/' && w.vary && w.rng.IntN(2) == 0:
			w.buf = append(w.buf, '\\', '/')
		default:
			w.buf = utf8.AppendRune(w.buf, r)
		}
	}
	w.buf = append(w.buf, '"')
}

// appendU appends r as \u escapes (a surrogate pair above U+FFFF), in random hex case.
func appendU(b []byte, r rune, rng *rand.Rand) []byte {
	one := func(u rune) {
		h := strconv.FormatInt(int64(u)+0x10000, 16)[1:]
		if rng != nil && rng.IntN(2) == 0 {
			h = strings.ToUpper(h)
		}
		b = append(b, `\u`+h...)
	}
	if r > 0xFFFF {
		r -= 0x10000
		one(0xD800 + r>>10)
		one(0xDC00 + r&0x3FF)
		return b
	}
	one(r)
	return b
}

// collect lists pointers to every value slot of the tree, the root included.
func collect(v *any, out *[]*any) {
	*out = append(*out, v)
	switch c := (*v).(type) {
	case []any:
		for i := range c {
			collect(&c[i], out)
		}
	case object:
		for i := range c {
			collect(&c[i].val, out)
		}
	}
}

// mutate changes the value at v so that it means something else, and says what it did.
func mutate(v *any, rng *rand.Rand) (string, bool) {
	switch c := (*v).(type) {
	case nil:
		*v = []any{false, json.Number("0"), "", object{}, []any{}}[rng.IntN(5)]
		return "replacing null", true
	case bool:
		if rng.IntN(2) == 0 {
			*v = !c
			return "flipping a bool", true
		}
		*v = json.Number("1")
		if !c {
			*v = json.Number("0")
		}
		return "a bool to a number", true
	case string:
		switch rng.IntN(3) {
		case 0:
			*v = c + "x"
			return "appending to a string", true
		case 1:
			*v = json.Number("1")
			return "a string to a number", true
		default:
			*v = "x" + c
			return "prepending to a string", true
		}
	case json.Number:
		s := string(c)
		if rng.IntN(4) == 0 {
			*v = s // the same number as a string
			return "a number to a string", true
		}
		if !strings.ContainsAny(s, ".eE") {
			n, _ := new(big.Int).SetString(s, 10)
			*v = json.Number(n.Add(n, big.NewInt(1)).String())
			return "adding 1 to an integer", true
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return "", false
		}
		g := math.Nextafter(f, math.Inf(1))
		if math.IsInf(g, 0) {
			return "", false
		}
		*v = json.Number(strconv.FormatFloat(g, 'e', -1, 64))
		return "moving a double by one ulp", true
	case []any:
		if len(c) > 0 && rng.IntN(2) == 0 {
			*v = c[:len(c)-1]
			return "dropping an element", true
		}
		*v = append(c, nil)
		return "adding an element", true
	case object:
		switch {
		case len(c) > 0 && rng.IntN(3) == 0:
			i := rng.IntN(len(c))
			*v = append(c[:i:i], c[i+1:]...)
			return "dropping a member", true
		case len(c) > 0 && rng.IntN(2) == 0:
			i := rng.IntN(len(c))
			d := append(object(nil), c...)
			d[i].key += "x"
			*v = d
			return "renaming a member", true
		default:
			*v = append(c, kv{"\u0000added", nil})
			return "adding a member", true
		}
	}
	return "", false
}
