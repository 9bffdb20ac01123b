package oncekey

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/oncekey/oncekey/canonical"
)

// KeyPrefix starts every printable operation key. The format is "ok1_" followed by 64 lower-case
// hex digits of a SHA-256 digest. Changing it orphans every stored record: it is pinned by a test.
const KeyPrefix = "ok1_"

// Operation is one intended call of a tool, as the key strategies, hooks and errors see it.
type Operation struct {
	Namespace  string
	Tenant     string
	WorkflowID string
	RunID      string
	ActivityID string
	// StepID is the step ID set with WithStepID, or "" when none was set.
	StepID string
	Tool   string
	// Args are the activity's arguments after the context, as decoded on the worker (or as passed
	// by the workflow on the workflow side).
	Args []any
}

// Step returns the step ID of the operation: the explicit one, else "<runID>/<activityID>".
func (op Operation) Step() string {
	if op.StepID != "" {
		return op.StepID
	}
	return op.RunID + "/" + op.ActivityID
}

// KeyStrategy derives the operation key's parts for an operation. Use StepKey, ArgsKey or
// ExplicitKey.
type KeyStrategy interface {
	// parts returns the ordered, named parts of the key (namespace and tenant are added by the
	// caller).
	parts(op Operation) ([]keyPart, error)
	// fields returns argument paths the strategy reads, for checking at registration.
	fields() []string
}

type stepKey struct{}

// StepKey is the default strategy: the key is (namespace, tenant, workflow ID, step ID). Without
// WithStepID the step is "<runID>/<activityID>", safe within a run but new after a reset.
func StepKey() KeyStrategy { return stepKey{} }

// keyPart is one named part of an operation key; the name appears in errors only.
type keyPart struct{ name, value string }

func (stepKey) parts(op Operation) ([]keyPart, error) {
	return []keyPart{{"strategy", "step"}, {"workflow ID", op.WorkflowID}, {"step ID", op.Step()}}, nil
}
func (stepKey) fields() []string { return nil }

type argsKey struct{ paths []string }

// ArgsKey keys the operation by (namespace, tenant, workflow ID, tool, the named argument fields):
// two calls with equal values of those fields in one workflow are one effect by declaration.
// Fields are dotted JSON paths into the activity's input ("Flight", "Order.ID"); for an activity
// with more than one argument, the first segment is the argument's index ("0.Flight").
func ArgsKey(fields ...string) KeyStrategy { return argsKey{paths: append([]string(nil), fields...)} }

func (k argsKey) parts(op Operation) ([]keyPart, error) {
	if len(k.paths) == 0 {
		return nil, fmt.Errorf("%w: ArgsKey needs at least one field", ErrNoKey)
	}
	doc, err := argsDocument(op.Args)
	if err != nil {
		return nil, err
	}
	out := []keyPart{{"strategy", "args"}, {"workflow ID", op.WorkflowID}, {"tool", op.Tool}}
	for _, p := range k.paths {
		v, ok := lookupPath(doc, p)
		if !ok {
			return nil, fmt.Errorf("%w: argument field %q is absent", ErrNoKey, p)
		}
		b, err := canonical.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("oncekey: key field %q: %w", p, err)
		}
		out = append(out, keyPart{"field name", p}, keyPart{"field " + p, string(b)})
	}
	return out, nil
}
func (k argsKey) fields() []string { return k.paths }

type explicitKey struct {
	fn func(Operation) (string, error)
}

// ExplicitKey keys the operation by (namespace, tenant, the string fn returns), e.g. a business
// transaction ID. fn must return the same string for every repeat of one intended effect.
func ExplicitKey(fn func(Operation) (string, error)) KeyStrategy { return explicitKey{fn: fn} }

func (k explicitKey) parts(op Operation) ([]keyPart, error) {
	if k.fn == nil {
		return nil, fmt.Errorf("%w: ExplicitKey function is nil", ErrNoKey)
	}
	s, err := k.fn(op)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoKey, err)
	}
	return []keyPart{{"strategy", "explicit"}, {"explicit key", s}}, nil
}
func (explicitKey) fields() []string { return nil }

// deriveKey returns the printable operation key for op under strategy ks.
func deriveKey(ks KeyStrategy, op Operation) (string, error) {
	parts, err := ks.parts(op)
	if err != nil {
		return "", err
	}
	all := append([]keyPart{{"namespace", op.Namespace}, {"tenant", op.Tenant}}, parts...)
	values := make([]string, len(all))
	for i, p := range all {
		if strings.TrimFunc(p.value, unicode.IsSpace) == "" {
			return "", fmt.Errorf("%w: the %s of tool %q is empty", ErrNoKey, p.name, op.Tool)
		}
		values[i] = p.value
	}
	return KeyPrefix + hex.EncodeToString(digestParts(values)), nil
}

// digestParts hashes parts with an unambiguous encoding: each part is its byte length as a
// big-endian uint64 followed by its bytes, so ("a:b","c") and ("a","b:c") differ.
func digestParts(parts []string) []byte {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return h.Sum(nil)
}

// argsDocument returns the JSON document that argument paths address: the single argument
// itself, or an array of the arguments when there are several.
func argsDocument(args []any) (any, error) {
	var v any = args
	if len(args) == 1 {
		v = args[0]
	}
	b, err := canonical.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("oncekey: encode arguments: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("oncekey: decode arguments: %w", err)
	}
	return doc, nil
}

func lookupPath(doc any, path string) (any, bool) {
	cur := doc
	for _, seg := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func deletePath(doc any, path string) {
	segs := strings.Split(path, ".")
	cur := doc
	for i, seg := range segs {
		last := i == len(segs)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				delete(c, seg)
				return
			}
			cur = c[seg]
		case []any:
			j, err := strconv.Atoi(seg)
			if err != nil || j < 0 || j >= len(c) {
				return
			}
			if last {
				c[j] = nil
				return
			}
			cur = c[j]
		default:
			return
		}
	}
}

// fingerprint returns the hex SHA-256 of canonical JSON {"args":…,"tool":…,"version":…} with the
// excluded fields removed from args.
func fingerprint(tool, version string, exclude []string, args []any) (string, error) {
	doc, err := argsDocument(args)
	if err != nil {
		return "", err
	}
	for _, p := range exclude {
		deletePath(doc, p)
	}
	b, err := canonical.Marshal(map[string]any{"tool": tool, "version": version, "args": doc})
	if err != nil {
		return "", fmt.Errorf("oncekey: fingerprint %s: %w", tool, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
