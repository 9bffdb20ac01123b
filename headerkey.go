package oncekey

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// HeaderKey is a deployment key that binds the headers a workflow sets for a claimed call (the
// tenant, the step ID and the first attempt's activity ID, wire's oncekey-tenant,
// oncekey-step-id and oncekey-first-activity-id) to the call they were set for, so that an
// activity worker can tell the headers oncekey's workflow side set from headers anyone who can
// write to the namespace wrote by hand (okworker.Options.HeaderKeys). It is a shared secret:
// every workflow worker and every activity worker of the deployment holds it, and nobody else.
//
// The binding is an HMAC-SHA-256 under Secret of a HeaderStatement, sent in the oncekey-binding
// header as ID, a colon and the MAC in unpadded base64url (BindHeaders, VerifyHeaderBinding).
type HeaderKey struct {
	// ID names the key in the bindings it makes, so that a worker listing several keys (while
	// one rotates) knows which to verify with: 1 to MaxHeaderKeyIDLen characters of A–Z, a–z,
	// 0–9, '.', '_' and '-'. It is not secret.
	ID string
	// Secret is the HMAC key: at least MinHeaderKeyBytes random bytes (`oncekey keys
	// header-gen` makes one).
	Secret []byte
}

// MinHeaderKeyBytes is the shortest HeaderKey.Secret accepted.
const MinHeaderKeyBytes = 32

// MaxHeaderKeyIDLen is the longest HeaderKey.ID accepted.
const MaxHeaderKeyIDLen = 32

// HeaderBindingVersion starts every HeaderStatement's encoding. Changing it, or the encoding,
// is a breaking change: bindings in running workflows' scheduled calls stop verifying (pinned by
// a test).
const HeaderBindingVersion = "oncekey-header-binding-v1"

// Check returns an error saying what is wrong with k (its ID's shape, its secret's length), or
// nil.
func (k HeaderKey) Check() error {
	if !validHeaderKeyID(k.ID) {
		return fmt.Errorf("key ID %q is not 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", k.ID, MaxHeaderKeyIDLen)
	}
	if n := len(k.Secret); n < MinHeaderKeyBytes {
		return fmt.Errorf("key %s has a %d-byte secret; give at least %d random bytes (`oncekey keys header-gen`)", k.ID, n, MinHeaderKeyBytes)
	}
	return nil
}

// CheckHeaderKeys returns an error naming the first bad key of keys (HeaderKey.Check) or the
// first ID listed twice, or nil.
func CheckHeaderKeys(keys []HeaderKey) error {
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		if err := k.Check(); err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
		if seen[k.ID] {
			return fmt.Errorf("[%d]: key ID %s is listed twice", i, k.ID)
		}
		seen[k.ID] = true
	}
	return nil
}

func validHeaderKeyID(id string) bool {
	if id == "" || len(id) > MaxHeaderKeyIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// HeaderStatement is what a header binding says: the call's namespace, workflow ID and
// activity type, the tenant, step ID and first activity ID headers as sent ("" for a header not
// sent), and the SHA-256 of the arguments document sent in the oncekey-args header (canonical
// JSON, as CanonicalArgs and ExactArgs give it). The run ID is not part of it (a reset
// reschedules the call under a new run ID), nor the activity ID (the workflow does not know it
// when it schedules the call).
type HeaderStatement struct {
	Namespace       string
	WorkflowID      string
	ActivityType    string
	Tenant          string
	StepID          string
	FirstActivityID string
	ArgsDigest      [sha256.Size]byte
}

// appendTo appends the statement's encoding: HeaderBindingVersion and each member in the order
// of the struct, each as its byte length (big-endian uint64) and its bytes (appendPart).
func (s *HeaderStatement) appendTo(b []byte) []byte {
	b = appendPart(b, HeaderBindingVersion)
	for _, p := range [...]string{s.Namespace, s.WorkflowID, s.ActivityType, s.Tenant, s.StepID, s.FirstActivityID} {
		b = appendPart(b, p)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(s.ArgsDigest)))
	return append(b, s.ArgsDigest[:]...)
}

// mac returns the HMAC-SHA-256 of s under secret.
func (s *HeaderStatement) mac(secret []byte) [sha256.Size]byte {
	buf := statementBufs.Get().(*[]byte)
	*buf = s.appendTo((*buf)[:0])
	h := macs.get(secret)
	h.Write(*buf)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	macs.put(secret, h)
	statementBufs.Put(buf)
	return sum
}

// statementBufs keeps the buffers statements are encoded into, for reuse: the verification is
// on every claimed call's path when HeaderKeys are set.
var statementBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// macLen is the length of a MAC in a binding: 32 bytes in unpadded base64url.
var macLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// BindHeaders returns the oncekey-binding header value of s under k: k.ID, ':', and the
// HMAC-SHA-256 of s's encoding under k.Secret in unpadded base64url.
func BindHeaders(k HeaderKey, s *HeaderStatement) string {
	sum := s.mac(k.Secret)
	return k.ID + ":" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// Reasons of an UnboundHeadersError (and the reason tag of metrics.HeadersRefused).
const (
	// UnboundNoBinding: the call carries no oncekey-binding header.
	UnboundNoBinding = "unbound"
	// UnboundUnknownKey: the binding names a key the worker does not list, or is not of the
	// form ID:MAC.
	UnboundUnknownKey = "unknown_key"
	// UnboundMismatch: the binding names a key the worker lists and does not verify: it was
	// made for other headers, another call (workflow, activity type, arguments, namespace), or
	// under another secret.
	UnboundMismatch = "mismatch"
)

// VerifyHeaderBinding returns nil when binding (an oncekey-binding header value) is the
// binding of s under the key of keys its ID names; otherwise an *UnboundHeadersError whose
// Reason says why (UnboundNoBinding for "", UnboundUnknownKey, UnboundMismatch) and whose KeyID
// is the ID the binding names. Tool and WorkflowID are left for the caller to set.
func VerifyHeaderBinding(keys []HeaderKey, s *HeaderStatement, binding string) error {
	if binding == "" {
		return &UnboundHeadersError{Reason: UnboundNoBinding}
	}
	id, got, ok := strings.Cut(binding, ":")
	if !ok || !validHeaderKeyID(id) {
		return &UnboundHeadersError{Reason: UnboundUnknownKey}
	}
	for i := range keys {
		if keys[i].ID != id {
			continue
		}
		if len(got) != macLen {
			return &UnboundHeadersError{KeyID: id, Reason: UnboundMismatch}
		}
		sum := s.mac(keys[i].Secret)
		// The encodings are compared (in constant time), each in an array on the stack.
		var want, sent [64]byte
		base64.RawURLEncoding.Encode(want[:macLen], sum[:])
		copy(sent[:], got)
		if !hmac.Equal(want[:macLen], sent[:macLen]) {
			return &UnboundHeadersError{KeyID: id, Reason: UnboundMismatch}
		}
		return nil
	}
	return &UnboundHeadersError{KeyID: id, Reason: UnboundUnknownKey}
}

// UnboundHeadersError: a call of a claimed tool carries a tenant, step ID or first activity ID
// header, and the worker has okworker.Options.HeaderKeys, and the call's oncekey-binding header
// is missing or does not verify under a key the worker lists (Reason: UnboundNoBinding,
// UnboundUnknownKey, UnboundMismatch). Nothing was claimed or run; the interceptor fails the call
// non-retryably with application error type ErrTypeUnboundHeaders.
type UnboundHeadersError struct {
	Tool       string
	WorkflowID string
	// KeyID is the key the binding names; "" when it names none.
	KeyID  string
	Reason string
}

func (e *UnboundHeadersError) Error() string {
	key := ""
	if e.KeyID != "" {
		key = ", key " + e.KeyID
	}
	return fmt.Sprintf("oncekey: %s (workflow %s) did not run: its tenant, step ID or first activity ID headers are not bound by a key this worker lists "+
		"(okworker.Options.HeaderKeys: %s%s); nothing was claimed. The workflow worker that scheduled it lacks okworker.Options.HeaderKeys, "+
		"or holds a key this worker does not list; or the call was scheduled by a workflow outside the deployment",
		e.Tool, e.WorkflowID, e.Reason, key)
}

// LoadHeaderKeys reads the header keys in the file at path: one key a line, its ID, blanks, and
// its secret in standard base64 (padded or not); blank lines and lines starting with '#' are
// skipped. The first key is the one a workflow worker binds with; every key verifies. Each key
// is checked (HeaderKey.Check), and IDs must differ. A file with no key is an error.
func LoadHeaderKeys(path string) ([]HeaderKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("oncekey: header keys: %w", err)
	}
	keys, err := ParseHeaderKeys(b)
	if err != nil {
		return nil, fmt.Errorf("oncekey: header keys %s: %w", path, err)
	}
	return keys, nil
}

// ParseHeaderKeys parses what LoadHeaderKeys reads from a file.
func ParseHeaderKeys(b []byte) ([]HeaderKey, error) {
	var keys []HeaderKey
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want an ID and a base64 secret, got %d fields", n, len(f))
		}
		secret, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil {
			secret, err = base64.RawStdEncoding.DecodeString(f[1])
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: the secret of %s is not base64", n, f[0])
		}
		keys = append(keys, HeaderKey{ID: f[0], Secret: secret})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no key in the file")
	}
	if err := CheckHeaderKeys(keys); err != nil {
		return nil, err
	}
	return keys, nil
}
