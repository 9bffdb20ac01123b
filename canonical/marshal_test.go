package canonical_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/canonical"
)

type Inner struct {
	A     string `json:"a"`
	Dup   int    // ambiguous with OtherInner.Dup at the same depth: dropped
	Shade string `json:"shade"`
}

type OtherInner struct {
	Dup   int
	Shade string // loses to Inner's tagged "shade"? No: different names ("Shade" vs "shade").
}

type hidden struct {
	Promoted string
}

type Embedding struct {
	Inner
	*OtherInner
	hidden
	Own  string `json:"own,omitempty"`
	Skip string `json:"-"`
	//lint:ignore SA5008 deliberate: encoding/json names this field "-", and Marshal must agree
	Dash    string    `json:"-,"`
	Quoted  int64     `json:"quoted,string"`
	QFloat  float64   `json:",string"`
	QString string    `json:"qs,string"`
	QBool   *bool     `json:"qb,string"`
	Zero    Zeroer    `json:"zero,omitzero"`
	ZeroT   time.Time `json:"zt,omitzero"`
	Empty   []int     `json:"empty,omitempty"`
	//lint:ignore SA5008 deliberate: an invalid name, which encoding/json replaces by the field name
	Bad     string `json:"bad\"name"`
	private string
}

type Zeroer struct{ N int }

func (z Zeroer) IsZero() bool { return z.N < 0 }

type textKey struct{ a, b int }

func (k textKey) MarshalText() ([]byte, error) { return []byte(fmt.Sprintf("%d-%d", k.a, k.b)), nil }

type ptrMarshaler struct{ n int }

func (p *ptrMarshaler) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`{"n":%d}`, p.n)), nil
}

type valueText string

func (v valueText) MarshalText() ([]byte, error) { return []byte("T:" + string(v)), nil }

type holder struct {
	P  ptrMarshaler  // addressable through *holder: MarshalJSON used; not through holder
	PP *ptrMarshaler // always used
}

// TestMarshalMatchesEncodingJSON checks Marshal(v) == Transform(json.Marshal(v)) for values
// without times, NaN or invalid UTF-8, so the json tag rules are encoding/json's.
func TestMarshalMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	yes := true
	n := big.NewInt(0)
	n.SetString("123456789012345678901234567890", 10)
	values := []any{
		nil, true, 0, -1, 2.5, float32(0.1), float32(16777216), float32(1e-7), uint64(math.MaxUint64), int64(math.MinInt64),
		math.MaxFloat64, math.SmallestNonzeroFloat64, 1e21, 1e20, float64(1 << 60), math.Copysign(0, -1),
		"", "é", "e\u0301", "<&>\u2028\x7f\x01", []byte("bytes"), []byte(nil), [3]byte{1, 2, 3},
		[]int{}, []int(nil), map[string]int(nil), map[string]any{}, [0]int{},
		map[int]string{-1: "a", 2: "b"}, map[uint8]bool{7: true}, map[textKey]int{{1, 2}: 3},
		map[valueText]valueText{"k": "v"},
		json.Number("12345678901234567890"), json.Number("1.50"), json.RawMessage(` {"b":1, "a":[ 2.0 ]} `),
		n, (*big.Int)(nil), big.NewFloat(1.5), netip.MustParseAddr("192.0.2.1"),
		&holder{P: ptrMarshaler{1}, PP: &ptrMarshaler{2}}, holder{P: ptrMarshaler{1}},
		Embedding{Inner: Inner{A: "x", Dup: 1, Shade: "s"}, OtherInner: &OtherInner{Dup: 2, Shade: "S"},
			hidden: hidden{"p"}, Own: "o", Skip: "s", Dash: "d", Quoted: 9007199254740993, QFloat: 0.5,
			QString: `a"b`, QBool: &yes, Zero: Zeroer{-1}, Bad: "b", private: "p"},
		Embedding{Zero: Zeroer{0}, Empty: []int{1}},
		[]any{map[string]any{"z": []any{1, "2", nil}}, struct {
			X any `json:"x"`
			Y any
		}{X: &yes}},
	}
	for _, v := range values {
		want, err := json.Marshal(v)
		require.NoError(t, err, "%#v", v)
		wantC, err := canonical.Transform(want)
		require.NoError(t, err, "%s", want)
		got, err := canonical.Marshal(v)
		require.NoError(t, err, "%#v", v)
		require.Equal(t, string(wantC), string(got), "%#v", v)
	}
}

func TestMarshalExactIntegers(t *testing.T) {
	t.Parallel()
	huge, _ := new(big.Int).SetString("-98765432109876543210987654321", 10)
	cases := map[string]any{
		"18446744073709551615":           uint64(math.MaxUint64),
		"-9223372036854775808":           int64(math.MinInt64),
		"9007199254740993":               int64(9007199254740993),
		"-98765432109876543210987654321": huge,
		"123456789012345678901234567890": json.Number("123456789012345678901234567890"),
		`{"n":9007199254740993}`:         map[string]any{"n": json.Number("9007199254740993")},
	}
	for want, v := range cases {
		got, err := canonical.Marshal(v)
		require.NoError(t, err)
		require.Equal(t, want, string(got))
	}
}

func TestMarshalEquivalences(t *testing.T) {
	t.Parallel()
	type pair struct {
		name string
		a, b any
		same bool
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	instant := time.Date(2024, 3, 31, 1, 30, 0, 123456789, time.UTC)
	pairs := []pair{
		{"int 2 vs float64 2.0", 2, 2.0, true},
		{"int 2 vs json.Number 2.0", 2, json.Number("2.0"), true},
		{"uint8 vs float32", uint8(3), float32(3), true},
		{"bool true vs int 1", true, 1, false},
		{"string 1 vs int 1", "1", 1, false},
		{"null vs false", nil, false, false},
		{"NFC vs NFD", "café", "cafe\u0301", true},
		{"NFC vs NFD key", map[string]int{"é": 1}, map[string]int{"e\u0301": 1}, true},
		{"2^53+1 vs 2^53", int64(9007199254740993), int64(9007199254740992), false},
		{"2^53+1 number vs 2^53", json.Number("9007199254740993"), json.Number("9007199254740992"), false},
		{"instant in two zones", instant, instant.In(berlin), true},
		{"instant in two zones, pointer", &instant, ptr(instant.In(time.FixedZone("X", -7*3600))), true},
		{"instant with monotonic reading", time.Now().Round(0).Truncate(time.Second), time.Now().Truncate(time.Second).UTC(), false},
		{"time map keys", map[time.Time]int{instant: 1}, map[time.Time]int{instant.In(berlin): 1}, true},
		{"nanosecond apart", instant, instant.Add(time.Nanosecond), false},
		{"struct vs map", struct{ A, B int }{1, 2}, map[string]int{"B": 2, "A": 1}, true},
		{"array order", []int{1, 2}, []int{2, 1}, false},
	}
	for _, p := range pairs {
		a, err := canonical.Marshal(p.a)
		require.NoError(t, err, p.name)
		b, err := canonical.Marshal(p.b)
		require.NoError(t, err, p.name)
		if p.name == "instant with monotonic reading" {
			continue // only checks that a monotonic reading encodes
		}
		if p.same {
			require.Equal(t, string(a), string(b), p.name)
		} else {
			require.NotEqual(t, string(a), string(b), p.name)
		}
	}
	got, err := canonical.Marshal(map[string]time.Time{"at": instant.In(berlin)})
	require.NoError(t, err)
	require.Equal(t, `{"at":"2024-03-31T01:30:00.123456789Z"}`, string(got))
}

func ptr[T any](v T) *T { return &v }

type failing struct{}

func (failing) MarshalJSON() ([]byte, error) { return nil, errors.New("boom") }

type badJSON struct{}

func (badJSON) MarshalJSON() ([]byte, error) { return []byte(`{"a":1,"a":2}`), nil }

type badText struct{}

func (badText) MarshalText() ([]byte, error) { return []byte("\xff"), nil }

type cyclic struct {
	Next *cyclic
}

func TestMarshalErrors(t *testing.T) {
	t.Parallel()
	type Item struct{ Price float64 }
	type Order struct{ Items []Item }
	type Req struct {
		Order Order
		Tags  map[string]string `json:"tags"`
	}
	loop := &cyclic{}
	loop.Next = loop
	var selfRef any
	selfRef = &selfRef
	cases := []struct {
		v    any
		kind error
		msg  string
	}{
		{Req{Order: Order{Items: []Item{{1}, {2}, {math.NaN()}}}}, canonical.ErrNonFinite,
			"canonical: .Order.Items[2].Price: NaN cannot be encoded"},
		{[]float64{math.Inf(-1)}, canonical.ErrNonFinite, "canonical: [0]: -Inf cannot be encoded"},
		{map[string]float32{"x": float32(math.Inf(1))}, canonical.ErrNonFinite, "canonical: .x: +Inf cannot be encoded"},
		{Req{Tags: map[string]string{"a b": "ok\xff"}}, canonical.ErrInvalidUTF8, `canonical: .tags.["a b"]: string "ok\xff" is not valid UTF-8`},
		{map[string]int{"\xfe": 1}, canonical.ErrInvalidUTF8, `canonical: .: map key "\xfe" is not valid UTF-8`},
		{struct{ C chan int }{make(chan int)}, canonical.ErrUnsupported, "canonical: .C: a chan int cannot be encoded"},
		{[]any{func() {}}, canonical.ErrUnsupported, "canonical: [0]: a func() cannot be encoded"},
		{map[string]any{"z": complex(1, 2)}, canonical.ErrUnsupported, "canonical: .z: a complex128 cannot be encoded"},
		{map[[2]int]int{{1, 2}: 3}, canonical.ErrUnsupported, "canonical: .: a map with [2]int keys cannot be encoded"},
		{loop, canonical.ErrTooDeep, ""},
		{selfRef, canonical.ErrTooDeep, ""},
		{map[string]any{"f": failing{}}, canonical.ErrMarshaler, "canonical: .f: MarshalJSON of canonical_test.failing failed: boom"},
		{[]any{badJSON{}}, canonical.ErrDuplicateKey, `canonical: [0]: MarshalJSON of canonical_test.badJSON returned bad JSON: duplicate key "a"`},
		{struct{ T badText }{}, canonical.ErrInvalidUTF8, "canonical: .T: MarshalText of canonical_test.badText returned invalid UTF-8"},
		{map[string]int{"é": 1, "e\u0301": 2}, canonical.ErrNFCCollision, ""},
		{json.Number("1e"), canonical.ErrSyntax, `canonical: .: json.Number "1e" is not a JSON number`},
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), canonical.ErrMarshaler, ""},
	}
	for _, c := range cases {
		_, err := canonical.Marshal(c.v)
		require.Error(t, err, "%#v", c.v)
		require.ErrorIs(t, err, c.kind, "%v", err)
		var ce *canonical.Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, -1, ce.Offset, "%v", err)
		if c.msg != "" {
			require.Equal(t, c.msg, err.Error())
		}
		require.True(t, strings.HasPrefix(err.Error(), "canonical: "), err.Error())
	}
}

func TestStructField(t *testing.T) {
	t.Parallel()
	typ := func(v any) string {
		return fmt.Sprint(v)
	}
	et := ptr(Embedding{})
	for name, want := range map[string]string{
		"a": "string", "shade": "string", "Shade": "string", "Promoted": "string", "own": "string",
		"-": "string", "quoted": "int64", "QFloat": "float64", "qb": "bool", "bad\"name": "",
		"Bad": "string", "Dup": "", "Skip": "", "private": "", "A": "",
	} {
		got, ok := canonical.StructField(reflectType(et), name)
		if want == "" {
			require.False(t, ok, name)
			continue
		}
		require.True(t, ok, name)
		require.Equal(t, want, typ(got), name)
	}
}

func reflectType(v any) reflect.Type { return reflect.TypeOf(v) }

func TestStructFieldOmittable(t *testing.T) {
	t.Parallel()
	type in struct {
		Empty   map[string]any `json:"empty,omitempty"`
		Zero    time.Time      `json:"zero,omitzero"`
		Always  map[string]any `json:"always"`
		Renamed string         `json:",omitempty"`
	}
	for name, want := range map[string]bool{"empty": true, "zero": true, "Renamed": true, "always": false, "nope": false} {
		require.Equal(t, want, canonical.StructFieldOmittable(reflect.TypeFor[*in](), name), name)
	}
	require.False(t, canonical.StructFieldOmittable(reflect.TypeFor[map[string]any](), "empty"), "not a struct")
}

// TestMarshalGenericMatchesReflection: Marshal writes the values encoding/json decodes into an
// interface (map[string]any, []any, string, float64, bool, nil) without reflection; the same
// values under named types, which go through reflection, give the same bytes, float paths and
// errors.
func TestMarshalGenericMatchesReflection(t *testing.T) {
	t.Parallel()
	type namedMap map[string]any
	type namedSlice []any
	cyclic := map[string]any{"self": nil}
	cyclic["self"] = cyclic
	deep := any("leaf")
	for range canonical.MaxDepth + 2 {
		deep = map[string]any{"d": deep}
	}
	cases := []any{
		map[string]any{"subject": "Printer on fire", "priority": 2.0, "tags": []any{"a", true, nil, 1.5, json.Number("12345678901234567890")},
			"nested": map[string]any{"é": "e\u0301", "z": []any{}, "m": map[string]any{}}, "when": time.Unix(0, 0), "n": nil},
		[]any{1e21, 0.1, math.Copysign(0, -1), "\u2028<&>", map[string]any{"b": 1.0, "a": []any{[]any{2.0}}}},
		map[string]any{"bad": math.NaN()},
		map[string]any{"x": []any{1.0, math.Inf(1)}},
		map[string]any{"ok\xff": 1.0},
		[]any{"fine", "bad\xfe"},
		map[string]any{"f": func() {}},
		cyclic,
		deep,
		map[string]any{"é": 1.0, "e\u0301": 2.0},
		map[string]any(nil),
		[]any(nil),
	}
	// named rewraps every map[string]any and []any in v under a named type, so that Marshal takes
	// the reflection path for all of it; a cycle is left as it is.
	var named func(v any, depth int) any
	named = func(v any, depth int) any {
		if depth > 3*canonical.MaxDepth {
			return v
		}
		switch x := v.(type) {
		case map[string]any:
			if x == nil {
				return namedMap(nil)
			}
			out := namedMap{}
			for k, e := range x {
				out[k] = named(e, depth+1)
			}
			return out
		case []any:
			if x == nil {
				return namedSlice(nil)
			}
			out := make(namedSlice, len(x))
			for i, e := range x {
				out[i] = named(e, depth+1)
			}
			return out
		}
		return v
	}
	for i, v := range cases {
		got, gotFloats, gotErr := canonical.MarshalFloats(v)
		want, wantFloats, wantErr := canonical.MarshalFloats(named(v, 0))
		if wantErr != nil {
			require.Error(t, gotErr, "case %d", i)
			var g, w *canonical.Error
			require.ErrorAs(t, gotErr, &g)
			require.ErrorAs(t, wantErr, &w)
			require.Equal(t, w.Kind, g.Kind, "case %d: %v / %v", i, gotErr, wantErr)
			if !errors.Is(wantErr, canonical.ErrTooDeep) && !errors.Is(wantErr, canonical.ErrNFCCollision) {
				// A cycle's path is as long as the depth reached, and the keys an NFC collision names
				// come in the map's order; every other error names the same place.
				require.Equal(t, wantErr.Error(), gotErr.Error(), "case %d", i)
			}
			continue
		}
		require.NoError(t, gotErr, "case %d", i)
		require.Equal(t, string(want), string(got), "case %d", i)
		slices.Sort(gotFloats)
		slices.Sort(wantFloats)
		require.Equal(t, wantFloats, gotFloats, "case %d", i)
	}
}
