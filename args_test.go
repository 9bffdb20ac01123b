package oncekey_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

type refundArgs struct {
	Order  string `json:"order"`
	Amount int64  `json:"amount"`
}

// ExactArgs: the header may only make the decoded input exact; anything else it says differently
// is refused, naming where.
func TestExactArgs(t *testing.T) {
	const big = 9007199254740993 // 2^53+1: its float64 rounding is 2^53
	cases := []struct {
		name   string
		args   []any
		header string // "" : no header
		want   string // the document; "" when refused
		path   string // where it differs, when refused
	}{
		{name: "no header: the decoded input", args: []any{refundArgs{"X-1", 100}}, want: `{"amount":100,"order":"X-1"}`},
		{name: "the same struct", args: []any{refundArgs{"X-1", 100}}, header: `{"order":"X-1","amount":100}`, want: `{"amount":100,"order":"X-1"}`},
		{name: "generic map: the header's exact integer beyond 2^53", args: []any{map[string]any{"n": float64(big)}},
			header: `{"n":9007199254740993}`, want: `{"n":9007199254740993}`},
		{name: "generic map: a negative one, nested in an array", args: []any{map[string]any{"a": []any{"x", float64(-big)}}},
			header: `{"a":["x",-9007199254740993]}`, want: `{"a":["x",-9007199254740993]}`},
		{name: "generic map: beyond 1e21", args: []any{map[string]any{"n": float64(1e21)}},
			header: `{"n":1000000000000000000000}`, want: `{"n":1000000000000000000000}`},
		{name: "several arguments", args: []any{"a", int64(2)}, header: `["a",2]`, want: `["a",2]`},
		{name: "no arguments", args: nil, header: `[]`, want: `[]`},
		{name: "the header in another spelling (whitespace, member order, escapes)", args: []any{refundArgs{"é", 1}},
			header: " { \"amount\" : 1.0 , \"order\" : \"\\u00e9\" } ", want: `{"amount":1,"order":"é"}`},

		// Hostile headers: the approved call's header with other real input.
		{name: "another amount", args: []any{refundArgs{"Y-1", 99999}}, header: `{"order":"Y-1","amount":100}`, path: ".amount"},
		{name: "another order", args: []any{refundArgs{"Y-1", 100}}, header: `{"order":"X-1","amount":100}`, path: ".order"},
		{name: "a member only the header has", args: []any{map[string]any{"a": "1"}}, header: `{"a":"1","b":"2"}`, path: ".b"},
		{name: "a member the header lacks", args: []any{map[string]any{"a": "1", "b": "2"}}, header: `{"a":"1"}`, path: ".b"},
		{name: "null for a missing member", args: []any{map[string]any{"a": "1"}}, header: `{"a":"1","b":null}`, path: ".b"},
		{name: "a longer array", args: []any{[]any{"a"}}, header: `["a","b"]`, path: "."},
		{name: "a string for a number", args: []any{map[string]any{"n": float64(1)}}, header: `{"n":"1"}`, path: ".n"},
		{name: "an object for an array", args: []any{[]any{}}, header: `{}`, path: "."},
		{name: "another boolean", args: []any{map[string]any{"ok": false}}, header: `{"ok":true}`, path: ".ok"},
		{name: "one argument for two", args: []any{"a", "b"}, header: `"a"`, path: "."},
		{name: "an integer that does not round to the float", args: []any{map[string]any{"n": float64(big)}},
			header: `{"n":9007199254740995}`, path: ".n"},
		{name: "a small integer for another float", args: []any{map[string]any{"n": 1.5}}, header: `{"n":1}`, path: ".n"},
		{name: "an exact int64 is not a float: no rounding allowed", args: []any{map[string]any{"n": int64(1 << 53)}},
			header: `{"n":9007199254740993}`, path: ".n"},
		{name: "a typed int64 field is not a float either", args: []any{refundArgs{"X", 1 << 53}},
			header: `{"order":"X","amount":9007199254740993}`, path: ".amount"},
		{name: "a fraction where the input rounds", args: []any{map[string]any{"n": float64(big)}},
			header: `{"n":9007199254740992.5}`, want: `{"n":9007199254740992}`},
		{name: "the rounding is not allowed at another path", args: []any{map[string]any{"f": float64(big), "i": int64(1 << 53)}},
			header: `{"f":9007199254740992,"i":9007199254740993}`, path: ".i"},
		{name: "not JSON", args: []any{refundArgs{"X-1", 100}}, header: `{"order":`, path: "."},
		{name: "trailing data", args: []any{refundArgs{"X-1", 100}}, header: `{"order":"X-1","amount":100} {}`, path: "."},
		{name: "a duplicate member", args: []any{map[string]any{"a": "1"}}, header: `{"a":"2","a":"1"}`, path: "."},
		{name: "an empty header", args: []any{refundArgs{"X-1", 100}}, header: ` `, path: "."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var header []byte
			if tc.header != "" {
				header = []byte(tc.header)
			} else if tc.name == "an empty header" {
				header = []byte{}
			}
			if tc.header == " " {
				header = []byte(" ")
			}
			got, err := oncekey.ExactArgs("IssueRefund", tc.args, header)
			if tc.path == "" {
				require.NoError(t, err)
				require.Equal(t, tc.want, string(got))
				return
			}
			var m *oncekey.ArgsMismatchError
			require.True(t, errors.As(err, &m), "refused with an ArgsMismatchError, got %v (%s)", err, got)
			require.Equal(t, tc.path, m.Path, m.Error())
			require.Equal(t, "IssueRefund", m.Tool)
			require.Contains(t, m.Error(), "nothing was claimed")
			require.Contains(t, m.Error(), "without oncekey's interceptor")
		})
	}
}

// ExactArgs without a header is CanonicalArgs.
func TestExactArgsWithoutHeaderIsCanonicalArgs(t *testing.T) {
	for _, args := range [][]any{nil, {}, {1}, {"a", map[string]any{"b": json.Number("12345678901234567890")}}} {
		want, err := oncekey.CanonicalArgs(args)
		require.NoError(t, err)
		got, err := oncekey.ExactArgs("T", args, nil)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	}
}
