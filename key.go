package oncekey

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unsafe"

	"github.com/oncekey/oncekey/canonical"
	"github.com/oncekey/oncekey/internal/argsdoc"
	"github.com/oncekey/oncekey/internal/jsondoc"
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
	// FirstActivityID is the activity ID of the first attempt of this call. It differs from
	// ActivityID on a re-run the workflow side scheduled as a new activity after a proven
	// not-applied outcome (see HeaderFirstActivityID); "" means ActivityID. The default step uses
	// it, so every re-run of one call keeps the first attempt's operation key.
	FirstActivityID string
	// StepID is the step ID set with WithStepID, or "" when none was set.
	StepID string
	// Standalone is true for a standalone activity: one a client started with
	// client.ExecuteActivity, outside any workflow. WorkflowID, RunID, StepID and FirstActivityID
	// are then empty, and ActivityID (the caller's stable ID, which Temporal's ID conflict and
	// reuse policies also read) names the intended effect in the key of StepKey and ArgsKey.
	// Under StepKey (the default) the arguments are part of the key too: a start under the same
	// ActivityID with other arguments is another operation, and runs (a second effect). For one
	// operation per ActivityID, key by it and the fields that name the effect (ArgsKey), or by
	// the ActivityID alone (ExplicitKey).
	Standalone bool
	// Tool is the tool the call is for: the activity type, or for an activity type with a Route
	// the tool its Route names (see ActivityType); a call the Route cannot name is never keyed.
	Tool string
	// ActivityType is the activity type the call runs as; "" means Tool. It differs from Tool for
	// an activity type that carries many tools (Registry.Route).
	ActivityType string
	// Args are the activity's arguments after the context, as decoded on the worker (or as passed
	// by the workflow on the workflow side). Hooks (an ExplicitKey function, Policy.Authorize,
	// Policy.Verify) read them; keys and fingerprints read ArgsJSON when it is set.
	Args []any
	// ArgsJSON is the arguments document of the call in canonical JSON (package canonical), taken
	// from the arguments as the workflow scheduled them: the single argument itself, or an array
	// of the arguments when there are several (or none); for a routed tool, the part of it at
	// Route.Args. The interceptor sets it from the HeaderArgs header, so a number that does not
	// fit a float64 (2^53+1) keeps its value even when the activity decodes its input into
	// map[string]any or any. When it is nil, Key and Fingerprint encode Args instead.
	ArgsJSON json.RawMessage
	// canonicalArgs is ArgsJSON when the interceptor made it canonical (argsdoc.MarkCanonical).
	canonicalArgs []byte
	// NexusKey is, for a Nexus operation's synchronous handler (which is not an activity), the key
	// that names the intended effect: the caller's NexusHeaderKey header, or else the Nexus request
	// ID. It is "" for an activity. For a Nexus operation WorkflowID holds it too (ArgsKey reads
	// it there), RunID and ActivityID are empty, and Tool and StepID are the operation's name.
	NexusKey string
}

// Step returns the step ID of the operation as records show it: the explicit one, else
// "<runID>/<activity ID of the call's first attempt>" (FirstActivityID, or ActivityID when that is
// empty), which says where the operation was first claimed; for a standalone activity,
// "activity/<activity ID>". Without an explicit step ID it is not part of the operation key (see
// StepKey).
func (op Operation) Step() string {
	if op.StepID != "" {
		return op.StepID
	}
	if op.Standalone {
		return "activity/" + op.ActivityID
	}
	return op.RunID + "/" + op.firstActivityID()
}

// firstActivityID returns FirstActivityID, or ActivityID when it is empty.
func (op Operation) firstActivityID() string {
	if op.FirstActivityID != "" {
		return op.FirstActivityID
	}
	return op.ActivityID
}

// KeyStrategy derives the operation key's parts for an operation. Use StepKey, ArgsKey or
// ExplicitKey.
type KeyStrategy interface {
	// parts returns the ordered, named parts of the key (namespace and tenant are added by the
	// caller). The first part names the strategy, so two strategies never share a key. a holds
	// the operation and derives its argument documents once (see callArgs).
	parts(a *callArgs) ([]keyPart, error)
	// fields returns argument paths the strategy reads, for checking at registration.
	fields() []string
	// check reports a strategy that can never produce a key, for Registry.Set.
	check() error
}

type stepKey struct{}

// StepKey is the default strategy. With a step ID set (WithStepID) the key is (namespace, tenant,
// workflow ID, step ID): the step names the operation, whatever tool runs at it and whatever its
// arguments (another tool or other arguments at the same step are a fingerprint mismatch, never a
// second effect).
//
// Without a step ID the key is (namespace, tenant, workflow ID, tool, the call's material
// arguments): the canonical JSON of the arguments as the workflow scheduled them (Operation.ArgsJSON)
// without the fields the policy excludes (Policy.Exclude). An identical call is the same operation
// wherever the workflow makes it: proposed again by a model in a later turn, re-run by the
// workflow side's retry loop, after a reset or a workflow retry, after continue-as-new, and in a
// new run under the same workflow ID; it replays the stored result. A call with other material
// arguments is another operation. The trade-off: two identical calls meant as two effects (the
// same e-mail sent twice on purpose) are one, unless the second takes its own step ID. A step ID
// that is empty or only white space is an error wrapping ErrNoKey.
//
// For a Nexus operation's synchronous handler the key is (namespace, tenant, the caller's key or
// the Nexus request ID (Operation.NexusKey), the operation's name, its material input): the
// caller's retries of one operation replay its result, and other input under the same caller
// key is another operation.
//
// For a standalone activity (Operation.Standalone) the key is (namespace, tenant, activity ID,
// tool, the call's material arguments): the caller's activity ID names the intended effect, so a
// second client.ExecuteActivity under the same ID with the same arguments replays, and one with
// other arguments under that ID is another operation, which runs: a second effect under one
// activity ID (a chat turn run again with the model's arguments reworded). Where one activity ID
// must be one effect, use ArgsKey with the fields that name it, or ExplicitKey returning
// Operation.ActivityID. An empty activity ID is an error wrapping ErrNoKey.
func StepKey() KeyStrategy { return stepKey{} }

// keyPart is one named part of an operation key; the name appears in errors only.
type keyPart struct{ name, value string }

func (stepKey) parts(a *callArgs) ([]keyPart, error) {
	op := a.op
	if op.NexusKey != "" {
		material, err := a.material()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoKey, err)
		}
		// The strategy part "nexus" keeps a Nexus operation's keys apart from a workflow's.
		return []keyPart{{"strategy", "nexus"}, {"caller key", op.NexusKey}, {"operation", op.Tool},
			{"arguments", string(material)}}, nil
	}
	if op.StepID != "" {
		return []keyPart{{"strategy", "step"}, {"workflow ID", op.WorkflowID}, {"step ID", op.StepID}}, nil
	}
	material, err := a.material()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoKey, err)
	}
	if op.Standalone {
		// The strategy part "activity" keeps a standalone activity's keys apart from every
		// workflow's, whatever their IDs.
		return []keyPart{{"strategy", "activity"}, {"activity ID", op.ActivityID}, {"tool", op.Tool},
			{"arguments", string(material)}}, nil
	}
	// The strategy part "call" keeps these keys apart from step keys and args keys.
	return []keyPart{{"strategy", "call"}, {"workflow ID", op.WorkflowID}, {"tool", op.Tool},
		{"arguments", string(material)}}, nil
}
func (stepKey) fields() []string { return nil }
func (stepKey) check() error     { return nil }

type argsKey struct{ paths []string }

// ArgsKey keys the operation by (namespace, tenant, workflow ID, tool, the named argument fields):
// two calls with equal values of those fields in one workflow are one effect by declaration. For
// a standalone activity (Operation.Standalone) the activity ID takes the workflow ID's place:
// starts under one activity ID with equal values of the fields are one operation, whatever else
// their arguments say (a repeat with other arguments is refused with a fingerprint mismatch, not
// run), where StepKey makes each set of arguments another operation.
// Fields are dotted JSON paths into the activity's input ("Flight", "order.id"), checked by
// Registry.Set against the input type; for an activity with more than one argument, the first
// segment is the argument's index ("0.Flight"). Values are compared in canonical JSON (see
// package canonical), so 2 and 2.0 are one value and "2" another. The order of fields does not
// matter. A field that is absent, null, or a string that is empty or only white space is an
// error wrapping ErrNoKey: keying on a value nobody filled in would merge unrelated calls.
func ArgsKey(fields ...string) KeyStrategy {
	paths := slices.Clone(fields)
	slices.Sort(paths)
	return argsKey{paths: slices.Compact(paths)}
}

func (k argsKey) check() error {
	if len(k.paths) == 0 {
		return errors.New("ArgsKey needs at least one field")
	}
	return nil
}

func (k argsKey) parts(a *callArgs) ([]keyPart, error) {
	op := a.op
	if err := k.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoKey, err)
	}
	doc, err := a.decoded()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoKey, err)
	}
	out := make([]keyPart, 0, 3+2*len(k.paths))
	if op.Standalone {
		out = append(out, keyPart{"strategy", "activity args"}, keyPart{"activity ID", op.ActivityID}, keyPart{"tool", op.Tool})
	} else {
		out = append(out, keyPart{"strategy", "args"}, keyPart{"workflow ID", op.WorkflowID}, keyPart{"tool", op.Tool})
	}
	for _, p := range k.paths {
		v, ok := jsondoc.Lookup(doc, p)
		if !ok {
			return nil, fmt.Errorf("%w: argument field %q of %s is absent", ErrNoKey, p, op.Tool)
		}
		if s, isString := v.(string); v == nil || isString && blank(s) {
			return nil, fmt.Errorf("%w: argument field %q of %s is empty", ErrNoKey, p, op.Tool)
		}
		b, err := canonical.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: argument field %q of %s: %w", ErrNoKey, p, op.Tool, err)
		}
		out = append(out, keyPart{"field name", p}, keyPart{"field " + p, string(b)})
	}
	return out, nil
}
func (k argsKey) fields() []string { return k.paths }

type explicitKey struct {
	fn func(Operation) (string, error)
}

// ExplicitKey keys the operation by (namespace, tenant, tool, the string fn returns), e.g. a
// business transaction ID. The key is scoped to the tool: two tools that return the same business
// ID (an order ID) are two operations. fn must return the same string for every repeat of one
// intended effect. An error from fn, or a string that is empty or only white space, is an error
// wrapping ErrNoKey (and fn's error).
func ExplicitKey(fn func(Operation) (string, error)) KeyStrategy { return explicitKey{fn: fn} }

func (k explicitKey) check() error {
	if k.fn == nil {
		return errors.New("ExplicitKey function is nil")
	}
	return nil
}

func (k explicitKey) parts(a *callArgs) ([]keyPart, error) {
	op := a.op
	if err := k.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoKey, err)
	}
	s, err := k.fn(op)
	if err != nil {
		return nil, fmt.Errorf("%w: explicit key of %s: %w", ErrNoKey, op.Tool, err)
	}
	return []keyPart{{"strategy", "explicit"}, {"tool", op.Tool}, {"explicit key", s}}, nil
}
func (explicitKey) fields() []string { return nil }

func blank(s string) bool { return strings.TrimFunc(s, unicode.IsSpace) == "" }

// deriveKey returns the printable operation key of the operation a holds under strategy ks.
func deriveKey(ks KeyStrategy, a *callArgs) (string, error) {
	op := a.op
	var parts []keyPart
	var err error
	// Calling each strategy's own method rather than the interface's keeps a on the stack.
	switch k := ks.(type) {
	case stepKey:
		parts, err = k.parts(a)
	case argsKey:
		parts, err = k.parts(a)
	case explicitKey:
		parts, err = k.parts(a)
	case editKey:
		parts, err = k.parts(a)
	default:
		// A strategy embedded in a type of another package: through the interface, on a copy.
		parts, err = ks.parts(newCallArgs(op, a.exclude))
	}
	if err != nil {
		return "", err
	}
	var stack [512]byte
	b := stack[:0]
	for i := -2; i < len(parts); i++ {
		var p keyPart
		switch i {
		case -2:
			p = keyPart{"namespace", op.Namespace}
		case -1:
			p = keyPart{"tenant", op.Tenant}
		default:
			p = parts[i]
		}
		if blank(p.value) {
			return "", fmt.Errorf("%w: the %s of %s is empty", ErrNoKey, p.name, op.Tool)
		}
		b = appendPart(b, p.value)
	}
	sum := sha256.Sum256(b)
	var out [len(KeyPrefix) + 2*sha256.Size]byte
	copy(out[:], KeyPrefix)
	hex.Encode(out[len(KeyPrefix):], sum[:])
	return string(out[:]), nil
}

// appendPart appends one key part in an unambiguous encoding: its byte length as a big-endian
// uint64, then its bytes. A sequence of parts so encoded has one decoding, so ("a:b","c") and
// ("a","b:c") differ.
func appendPart(b []byte, p string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(p)))
	return append(b, p...)
}

// callArgs is one operation with the policy's Exclude list, deriving the operation's argument
// documents the first time its key or fingerprint needs them and keeping them for the other:
// each call's arguments are encoded once, whatever reads them.
type callArgs struct {
	op      Operation
	exclude []string

	doc, mat       []byte
	docErr, matErr error
	haveDoc        bool
	haveMat        bool
}

func newCallArgs(op Operation, exclude []string) *callArgs {
	return &callArgs{op: op, exclude: exclude}
}

// json returns the canonical JSON of the operation's arguments document: ArgsJSON in canonical
// form when it is set, else the encoding of Args.
func (a *callArgs) json() ([]byte, error) {
	if !a.haveDoc {
		a.haveDoc = true
		a.doc, a.docErr = argsJSON(a.op)
	}
	return a.doc, a.docErr
}

// decoded returns the arguments document that argument paths address (see Operation.ArgsJSON),
// decoded from its canonical JSON with numbers kept as json.Number. Each call decodes anew, so
// a caller may change what it gets.
func (a *callArgs) decoded() (any, error) {
	b, err := a.json()
	if err != nil {
		return nil, err
	}
	return jsondoc.Decode(b)
}

// material returns the canonical JSON of the arguments document without the excluded fields:
// what identifies a call without a step ID, and what its fingerprint digests.
func (a *callArgs) material() ([]byte, error) {
	if a.haveMat {
		return a.mat, a.matErr
	}
	a.haveMat = true
	b, err := a.json()
	if err != nil || len(a.exclude) == 0 {
		a.mat, a.matErr = b, err
		return b, err
	}
	doc, err := a.decoded()
	if err != nil {
		a.matErr = err
		return nil, err
	}
	for _, p := range a.exclude {
		deletePath(doc, p)
	}
	if a.mat, err = canonical.Marshal(doc); err != nil {
		a.matErr = fmt.Errorf("oncekey: encode arguments: %w", err)
	}
	return a.mat, a.matErr
}

func init() {
	argsdoc.MarkCanonical = func(op any) {
		o := op.(*Operation)
		o.canonicalArgs = o.ArgsJSON
	}
}

// argsJSON returns the canonical JSON of op's arguments document: ArgsJSON in canonical form
// when it is set (as it is, when the interceptor made it canonical: argsdoc.MarkCanonical), else
// the encoding of Args.
func argsJSON(op Operation) ([]byte, error) {
	if len(op.ArgsJSON) > 0 && len(op.canonicalArgs) == len(op.ArgsJSON) && unsafe.SliceData(op.canonicalArgs) == unsafe.SliceData(op.ArgsJSON) {
		return op.ArgsJSON, nil
	}
	if op.ArgsJSON != nil {
		b, err := canonical.Transform(op.ArgsJSON)
		if err != nil {
			return nil, fmt.Errorf("oncekey: arguments: %w", err)
		}
		return b, nil
	}
	return CanonicalArgs(op.Args)
}

// CanonicalArgs returns the canonical JSON (package canonical) of the arguments document of args:
// the single argument itself, or an array of the arguments when there are several (or none).
// The workflow side of the interceptor sends it in the HeaderArgs header; tests of key
// functions may call it. An argument that cannot be encoded exactly (NaN, invalid UTF-8, a
// channel…) gives an error wrapping a *canonical.Error that names the field path.
func CanonicalArgs(args []any) ([]byte, error) {
	b, err := canonical.Marshal(argsValue(args))
	if err != nil {
		return nil, fmt.Errorf("oncekey: encode arguments: %w", err)
	}
	return b, nil
}

// deletePath removes the member at path from doc; an array element at the end of a path is set
// to null, so later elements keep their indexes.
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

// KeyedFingerprintPrefix starts a fingerprint made with a deployment secret (KeyedFingerprint):
// "k1_" and 64 lower-case hex digits of an HMAC-SHA-256. A fingerprint without a secret is the 64
// hex digits alone. The format is persisted in every record: it is pinned by a test.
const KeyedFingerprintPrefix = "k1_"

// fingerprint returns the hex SHA-256 of canonical JSON {"args":…,"tool":…,"version":…}, where
// args is the material arguments document (callArgs.material: the arguments minus the excluded
// fields), or with secret set KeyedFingerprintPrefix and the hex HMAC-SHA-256 of the same bytes
// under secret. The encoding is persisted in every record: it is pinned by a test.
func fingerprint(tool, version string, a *callArgs, secret []byte) (string, error) {
	material, err := a.material()
	if err != nil {
		return "", fmt.Errorf("oncekey: fingerprint %s: %w", tool, err)
	}
	doc, err := fingerprintDoc(material, tool, version)
	if err != nil {
		return "", fmt.Errorf("oncekey: fingerprint %s: %w", tool, err)
	}
	if len(secret) > 0 {
		mac := macs.get(secret)
		mac.Write(doc)
		var sum [sha256.Size]byte
		var out [len(KeyedFingerprintPrefix) + 2*sha256.Size]byte
		copy(out[:], KeyedFingerprintPrefix)
		hex.Encode(out[len(KeyedFingerprintPrefix):], mac.Sum(sum[:0]))
		macs.put(secret, mac)
		return string(out[:]), nil
	}
	s := sha256.Sum256(doc)
	var hexed [2 * sha256.Size]byte
	hex.Encode(hexed[:], s[:])
	return string(hexed[:]), nil
}

// macs keeps HMAC-SHA-256 states keyed with each deployment secret the process fingerprints
// with (one, or a few while a secret rotates), for reuse: setting one up costs more than the
// digest of a small document.
var macs macPools

type macPools struct{ m sync.Map } // string(secret) → *sync.Pool of hash.Hash

func (p *macPools) pool(secret []byte) *sync.Pool {
	if v, ok := p.m.Load(string(secret)); ok {
		return v.(*sync.Pool)
	}
	key := string(secret)
	v, _ := p.m.LoadOrStore(key, &sync.Pool{New: func() any { return hmac.New(sha256.New, []byte(key)) }})
	return v.(*sync.Pool)
}

func (p *macPools) get(secret []byte) hash.Hash { return p.pool(secret).Get().(hash.Hash) }

func (p *macPools) put(secret []byte, h hash.Hash) {
	h.Reset()
	p.pool(secret).Put(h)
}

// fingerprintDoc returns the canonical JSON of {"args": material, "tool": tool, "version":
// version}, material being canonical JSON already: the members are written in their canonical
// order, material as it is, so nothing is parsed again.
func fingerprintDoc(material []byte, tool, version string) ([]byte, error) {
	doc := make([]byte, 0, len(material)+len(tool)+len(version)+len(`{"args":,"tool":"","version":""}`))
	doc = append(doc, `{"args":`...)
	doc = append(doc, material...)
	doc = append(doc, `,"tool":`...)
	doc, err := appendCanonicalString(doc, tool)
	if err != nil {
		return nil, err
	}
	doc = append(doc, `,"version":`...)
	if doc, err = appendCanonicalString(doc, version); err != nil {
		return nil, err
	}
	return append(doc, '}'), nil
}

// appendCanonicalString appends s as a canonical JSON string: quoted as it is when it is
// printable ASCII without a quote or backslash (a tool name, a version), else as
// canonical.Marshal encodes it.
func appendCanonicalString(dst []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			b, err := canonical.Marshal(s)
			return append(dst, b...), err
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"'), nil
}

// Identity is what a record holds about which call made it: the operation key, and the
// fingerprint and Policy.Version it was claimed with.
type Identity struct {
	Key         string
	Fingerprint string
	Version     string
}

// Identities returns the identity of op under p (Key, and KeyedFingerprint with secret), then for
// each of p.Previous in order the identity the call had under that older version: op's arguments
// document mapped by its Args, keyed and fingerprinted under its Version with p's Key and
// Exclude. An older identity equal to one before it is left out. It returns the errors of Key and
// KeyedFingerprint for the current identity; an older version whose mapping or derivation fails
// is left out (the call cannot be that older operation). The arguments are encoded once for the
// key and the fingerprint (Key then KeyedFingerprint encode them twice).
func Identities(p Policy, op Operation, secret []byte) ([]Identity, error) {
	a := newCallArgs(op, p.Exclude)
	key, err := deriveKey(p.keyStrategy(), a)
	if err != nil {
		return nil, err
	}
	fp, err := fingerprint(op.Tool, p.Version, a, secret)
	if err != nil {
		return nil, err
	}
	out := []Identity{{Key: key, Fingerprint: fp, Version: p.Version}}
	if len(p.Previous) == 0 {
		return out, nil
	}
	doc, err := a.json()
	if err != nil {
		return nil, err
	}
	for _, v := range p.Previous {
		id, ok := olderIdentity(p, op, doc, v, secret)
		if ok && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// olderIdentity returns the identity of op under the older version v, given op's arguments
// document doc; false when v's mapping fails or gives a document without a key.
func olderIdentity(p Policy, op Operation, doc json.RawMessage, v PreviousVersion, secret []byte) (Identity, bool) {
	if v.Args != nil {
		mapped, err := v.Args(slices.Clone(doc))
		if err != nil {
			return Identity{}, false
		}
		doc = mapped
	}
	op.ArgsJSON = doc
	a := newCallArgs(op, p.Exclude)
	key, err := deriveKey(p.keyStrategy(), a)
	if err != nil {
		return Identity{}, false
	}
	fp, err := fingerprint(op.Tool, v.Version, a, secret)
	if err != nil {
		return Identity{}, false
	}
	return Identity{Key: key, Fingerprint: fp, Version: v.Version}, true
}
