package decisionsig

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// Any, in an Entry's Tenants or Tools, matches every tenant or tool.
const Any = "*"

// Entry is one trusted public key and what it may sign.
type Entry struct {
	// ID is KeyID(PublicKey); in a file it may be left out, and when given must be that.
	ID        string
	PublicKey ed25519.PublicKey
	// Tenants and Tools are those whose decisions the key may sign; Any ("*") matches all.
	// Empty: none (an entry must name its scope).
	Tenants []string
	Tools   []string
	// Kinds are the decisions it may sign. Empty: none.
	Kinds []Kind
	// NotBefore and NotAfter bound when the key may be used (zero: unbounded): a decision is
	// verified at the worker's clock, an audit at the statement's SignedAt.
	NotBefore, NotAfter time.Time
	// Revoked: the key signs nothing from now on, and an audit reports its decisions as signed
	// by a revoked key.
	Revoked bool
	// Name is a label for people (who holds the key); it is not checked.
	Name string
}

// entryJSON is an Entry in a trust list file.
type entryJSON struct {
	ID        string    `json:"id,omitempty"`
	Name      string    `json:"name,omitempty"`
	PublicKey string    `json:"public_key"`
	Tenants   []string  `json:"tenants"`
	Tools     []string  `json:"tools"`
	Kinds     []Kind    `json:"kinds"`
	NotBefore time.Time `json:"not_before,omitzero"`
	NotAfter  time.Time `json:"not_after,omitzero"`
	Revoked   bool      `json:"revoked,omitempty"`
}

// ParseTrustList reads a trust list file's JSON: {"keys": [entry, ...]}, each entry with
// public_key (base64 of the 32 bytes, or PEM), tenants, tools and kinds (lists; "*" for every
// tenant or tool), and optionally id (checked against the key), name, not_before and not_after
// (RFC 3339) and revoked. Unknown members, an unknown kind, an entry without scope or two entries
// of one key are errors.
func ParseTrustList(b []byte) ([]Entry, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var doc struct {
		Keys []entryJSON `json:"keys"`
	}
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decisionsig: trust list: %w", err)
	}
	out := make([]Entry, 0, len(doc.Keys))
	for i, j := range doc.Keys {
		pub, err := ParsePublicKey(j.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("decisionsig: trust list: keys[%d]: %w", i, err)
		}
		out = append(out, Entry{ID: j.ID, Name: j.Name, PublicKey: pub, Tenants: j.Tenants, Tools: j.Tools, Kinds: j.Kinds,
			NotBefore: j.NotBefore, NotAfter: j.NotAfter, Revoked: j.Revoked})
	}
	if _, err := index(out); err != nil {
		return nil, err
	}
	return out, nil
}

// index checks entries and returns them by key ID.
func index(entries []Entry) (map[string]Entry, error) {
	m := make(map[string]Entry, len(entries))
	for i, e := range entries {
		if len(e.PublicKey) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("decisionsig: trust list: keys[%d]: no ed25519 public key", i)
		}
		id := KeyID(e.PublicKey)
		if e.ID != "" && e.ID != id {
			return nil, fmt.Errorf("decisionsig: trust list: keys[%d]: id %q is not the key's, %q", i, e.ID, id)
		}
		e.ID = id
		if len(e.Tenants) == 0 || len(e.Tools) == 0 || len(e.Kinds) == 0 {
			return nil, fmt.Errorf("decisionsig: trust list: keys[%d] (%s): name its tenants, tools and kinds (\"*\" for every tenant or tool)", i, id)
		}
		for _, k := range e.Kinds {
			if !k.Valid() {
				return nil, fmt.Errorf("decisionsig: trust list: keys[%d] (%s): unknown kind %q", i, id, k)
			}
		}
		if _, dup := m[id]; dup {
			return nil, fmt.Errorf("decisionsig: trust list: keys[%d]: key %s is listed twice", i, id)
		}
		m[id] = e
	}
	return m, nil
}

// TrustList is the set of public keys a worker accepts decisions from. One made by
// LoadTrustList re-reads its file when the file changes (checked on every Verify: its size,
// modification time and identity), so keys are added, rotated and revoked without a restart;
// a file that no longer reads refuses every decision (ErrUntrusted) until it is fixed. Safe for
// concurrent use.
type TrustList struct {
	path string
	now  func() time.Time

	mu      sync.Mutex
	info    os.FileInfo
	entries map[string]Entry
	loadErr error
}

// NewTrustList returns a TrustList of entries, which never changes.
func NewTrustList(entries ...Entry) (*TrustList, error) {
	m, err := index(entries)
	if err != nil {
		return nil, err
	}
	return &TrustList{entries: m, now: time.Now}, nil
}

// LoadTrustList reads the trust list file at path (ParseTrustList's format) and returns a
// TrustList that re-reads it when it changes. Replace the file by renaming a new one over it,
// so that no reader sees half of it.
func LoadTrustList(path string) (*TrustList, error) {
	t := &TrustList{path: path, now: time.Now}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Path returns the file the list is read from; "" for NewTrustList's.
func (t *TrustList) Path() string { return t.path }

// SetClock sets the clock Verify checks validity with (time.Now by default); for tests.
func (t *TrustList) SetClock(now func() time.Time) { t.now = now }

// reload re-reads the file when it changed since the last read. t.mu is held.
func (t *TrustList) reload() error {
	if t.path == "" {
		return nil
	}
	fi, err := os.Stat(t.path)
	if err == nil && t.info != nil && os.SameFile(fi, t.info) && fi.ModTime().Equal(t.info.ModTime()) && fi.Size() == t.info.Size() {
		return t.loadErr
	}
	if err == nil {
		var b []byte
		if b, err = os.ReadFile(t.path); err == nil {
			var es []Entry
			if es, err = ParseTrustList(b); err == nil {
				t.entries, err = index(es)
			}
		}
	}
	if err != nil {
		t.info, t.entries, t.loadErr = nil, nil, fmt.Errorf("decisionsig: trust list %s: %w", t.path, err)
		return t.loadErr
	}
	t.info, t.loadErr = fi, nil
	return nil
}

// Entries returns the list's entries as last read (re-reading a changed file first), sorted by
// ID.
func (t *TrustList) Entries() ([]Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(t.entries))
	for _, e := range t.entries {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmpString(a.ID, b.ID) })
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// lookup returns the entry of id, re-reading a changed file first.
func (t *TrustList) lookup(id string) (Entry, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return Entry{}, false, err
	}
	e, ok := t.entries[id]
	return e, ok, nil
}

// Verify checks a decision's signature before it is acted on. want is the decision as it came
// and as the worker reads the request it decides (every Statement member but SignedAt; Version
// 0 for any): the signed statement must say exactly that. It returns the entry of the key that
// signed, or an *Error (errors.Is ErrRefused): ReasonUnsigned for a nil s; ReasonUntrusted for
// a key not in the list, revoked, outside its NotBefore/NotAfter at the list's clock, or not
// trusted for want's tenant, tool or kind (or a trust list file that does not read);
// ReasonBadSignature for a signature that does not verify; ReasonMismatch for a statement
// that is not want (a signature replayed onto another request), naming the member.
func (t *TrustList) Verify(s *Signed, want Statement) (Entry, error) {
	return t.verify(s, &want, t.now())
}

// Audit re-verifies a stored decision from its signed statement alone: the signature, and the
// key's trust at the statement's SignedAt for its own tenant, tool and kind. It returns the
// entry of the key; a key revoked since is ReasonUntrusted, with the entry. Comparing the
// statement with the stored decision is the caller's (Mismatch).
func (t *TrustList) Audit(s *Signed) (Entry, error) {
	if s == nil {
		return Entry{}, &Error{Reason: ReasonUnsigned, Detail: "the decision carries no signature"}
	}
	return t.verify(s, nil, s.Statement.SignedAt)
}

// Mismatch returns a ReasonMismatch *Error when the statement of s is not want (every member
// but SignedAt; want's Version only when set), else nil.
func Mismatch(s *Signed, want Statement) error {
	if f := mismatch(s.Statement, want); f != "" {
		return &Error{Reason: ReasonMismatch, KeyID: s.KeyID, Field: f,
			Detail: "the signature was made for another decision than this one"}
	}
	return nil
}

func (t *TrustList) verify(s *Signed, want *Statement, at time.Time) (Entry, error) {
	if s == nil || len(s.Signature) == 0 {
		return Entry{}, &Error{Reason: ReasonUnsigned, Detail: "the decision carries no signature"}
	}
	e, ok, err := t.lookup(s.KeyID)
	if err != nil {
		return Entry{}, &Error{Reason: ReasonUntrusted, KeyID: s.KeyID, Detail: err.Error()}
	}
	if !ok {
		return Entry{}, &Error{Reason: ReasonUntrusted, KeyID: s.KeyID, Detail: "the key is not in the trust list"}
	}
	msg, err := s.Statement.Bytes()
	if err != nil || s.Statement.Version != Version || !ed25519.Verify(e.PublicKey, msg, s.Signature) {
		return e, &Error{Reason: ReasonBadSignature, KeyID: s.KeyID, Detail: "the signature does not verify with the key"}
	}
	st := s.Statement
	if want != nil {
		if err := Mismatch(s, *want); err != nil {
			return e, err
		}
	}
	switch {
	case e.Revoked:
		return e, &Error{Reason: ReasonUntrusted, KeyID: s.KeyID, Detail: "the key is revoked"}
	case !e.NotBefore.IsZero() && at.Before(e.NotBefore):
		return e, &Error{Reason: ReasonUntrusted, KeyID: s.KeyID, Detail: "the key is not valid before " + e.NotBefore.UTC().Format(time.RFC3339)}
	case !e.NotAfter.IsZero() && !at.Before(e.NotAfter):
		return e, &Error{Reason: ReasonUntrusted, KeyID: s.KeyID, Detail: "the key expired at " + e.NotAfter.UTC().Format(time.RFC3339)}
	case !scoped(e.Tenants, st.Tenant):
		return e, &Error{Reason: ReasonUntrusted, KeyID: s.KeyID, Detail: fmt.Sprintf("the key is not trusted for tenant %q", st.Tenant)}
	case !scoped(e.Tools, st.Tool):
		return e, &Error{Reason: ReasonUntrusted, KeyID: s.KeyID, Detail: fmt.Sprintf("the key is not trusted for tool %q", st.Tool)}
	case !slices.Contains(e.Kinds, st.Kind):
		return e, &Error{Reason: ReasonUntrusted, KeyID: s.KeyID, Detail: fmt.Sprintf("the key is not trusted for %s decisions", st.Kind)}
	}
	return e, nil
}

func scoped(list []string, v string) bool {
	return slices.Contains(list, Any) || slices.Contains(list, v)
}
