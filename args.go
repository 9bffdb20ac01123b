package oncekey

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/oncekey/oncekey/canonical"
	"github.com/oncekey/oncekey/internal/jsondoc"
	"github.com/oncekey/oncekey/internal/wire"
)

// ArgsMismatchError: the arguments document the workflow sent in the HeaderArgs header is not
// the document of the arguments the tool's body receives, so nothing oncekey would decide from
// it (the operation key, the fingerprint, Policy.Authorize, an approval) is about the call that
// would run. The interceptor refuses the call with it (application error type
// ErrTypeArgsMismatch, non-retryable) before anything is claimed or run.
type ArgsMismatchError struct {
	Tool string
	// Path is where the documents differ, in canonical.Error's path form ("." for the whole
	// document); Reason what differs there. Argument values are not repeated.
	Path, Reason string
}

func (e *ArgsMismatchError) Error() string {
	return fmt.Sprintf("oncekey: %s did not run: the arguments the worker decoded are not the ones the workflow scheduled "+
		"(header %s, at %s: %s); nothing was claimed. The call was scheduled by a workflow worker without oncekey's interceptor, "+
		"or a data converter changes values between the workflow and the worker: run the workflow with worker.Plugin "+
		"(or interceptor.New) and the same data converter as the activity worker",
		e.Tool, wire.HeaderArgs, e.Path, e.Reason)
}

// maxExactFloatInt is 2^53: every integer up to it in magnitude is a float64 exactly.
const maxExactFloatInt = 1 << 53

// ExactArgs returns the canonical arguments document of args (the decoded input the tool's body
// receives, shaped as CanonicalArgs shapes it), made exact by header, the HeaderArgs document the
// workflow side sent (nil: none was sent, and the decoded document is returned as it is).
//
// The header may only make the document exact: where args hold a float (a generic map or
// interface decoded a number into float64) whose value is the float64 rounding of an integer the
// header holds beyond 2^53, the header's integer is kept. Any other difference (a member more or
// less, another string, boolean, type or array length, a number that is neither the same value
// nor its float64 rounding, a header that is not JSON) is an *ArgsMismatchError naming the
// first place it differs. An argument that cannot be encoded exactly is CanonicalArgs' error.
func ExactArgs(tool string, args []any, header []byte) ([]byte, error) {
	doc, err := CanonicalArgs(args)
	if err != nil || header == nil || bytes.Equal(header, doc) {
		// Equal: the header is the decoded document as it is (the workflow side sends canonical
		// JSON), so nothing is to be made exact and nothing parsed again.
		return doc, err
	}
	// Where the documents differ, which of the decoded numbers were floats decides.
	doc, floats, err := canonical.MarshalFloats(argsValue(args))
	if err != nil {
		return nil, fmt.Errorf("oncekey: encode arguments: %w", err)
	}
	mismatch := func(path, reason string) error { return &ArgsMismatchError{Tool: tool, Path: path, Reason: reason} }
	exact, err := canonical.Transform(header)
	if err != nil {
		return nil, mismatch(".", "the header is not a JSON document ("+err.Error()+")")
	}
	if bytes.Equal(exact, doc) {
		return doc, nil
	}
	got, err := jsondoc.Decode(doc)
	if err != nil {
		return nil, err
	}
	sent, err := jsondoc.Decode(exact)
	if err != nil {
		return nil, mismatch(".", "the header is not a JSON document")
	}
	c := argsComparison{floats: floats}
	if path, reason := c.compare(".", got, sent); reason != "" {
		return nil, mismatch(path, reason)
	}
	return exact, nil
}

// argsValue is the value whose document CanonicalArgs encodes for args.
func argsValue(args []any) any {
	switch {
	case len(args) == 1:
		return args[0]
	case args == nil:
		return []any{}
	}
	return args
}

// argsComparison compares a decoded document with a header's; floats are the paths of the
// decoded numbers that were floats.
type argsComparison struct{ floats []string }

// compare returns the first path where sent is not got or an exact form of it, with what
// differs there; reason is "" when they agree.
func (c argsComparison) compare(path string, got, sent any) (at, reason string) {
	switch g := got.(type) {
	case map[string]any:
		s, ok := sent.(map[string]any)
		if !ok {
			return path, "an object in the input, " + kindOf(sent) + " in the header"
		}
		names := make([]string, 0, len(g)+len(s))
		for n := range g {
			names = append(names, n)
		}
		for n := range s {
			if _, ok := g[n]; !ok {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		for _, n := range names {
			gv, inGot := g[n]
			sv, inSent := s[n]
			p := canonical.PathMember(path, n)
			switch {
			case !inGot:
				return p, "a member only the header has"
			case !inSent:
				return p, "a member the header does not have"
			}
			if at, reason := c.compare(p, gv, sv); reason != "" {
				return at, reason
			}
		}
		return "", ""
	case []any:
		s, ok := sent.([]any)
		if !ok {
			return path, "an array in the input, " + kindOf(sent) + " in the header"
		}
		if len(g) != len(s) {
			return path, fmt.Sprintf("%d elements in the input, %d in the header", len(g), len(s))
		}
		for i := range g {
			if at, reason := c.compare(canonical.PathIndex(path, i), g[i], s[i]); reason != "" {
				return at, reason
			}
		}
		return "", ""
	case json.Number:
		s, ok := sent.(json.Number)
		if !ok {
			return path, "a number in the input, " + kindOf(sent) + " in the header"
		}
		if g == s || c.rounded(path, g, s) {
			return "", ""
		}
		return path, "another number"
	}
	if kindOf(got) != kindOf(sent) {
		return path, kindOf(got) + " in the input, " + kindOf(sent) + " in the header"
	}
	if got != sent {
		return path, "another " + kindOf(got)
	}
	return "", ""
}

// rounded reports whether the decoded number got at path is a float whose value is the float64
// rounding of sent, an integer beyond 2^53 in magnitude.
func (c argsComparison) rounded(path string, got, sent json.Number) bool {
	if !slices.Contains(c.floats, path) || strings.ContainsAny(string(sent), ".eE") {
		return false
	}
	exact, ok := new(big.Int).SetString(string(sent), 10)
	if !ok || exact.CmpAbs(big.NewInt(maxExactFloatInt)) <= 0 {
		return false
	}
	s, err := strconv.ParseFloat(string(sent), 64)
	if err != nil {
		return false
	}
	g, err := strconv.ParseFloat(string(got), 64)
	return err == nil && g == s
}

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
