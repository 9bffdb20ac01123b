package oncekey_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

func headerKey(id string, fill byte) oncekey.HeaderKey {
	return oncekey.HeaderKey{ID: id, Secret: bytes.Repeat([]byte{fill}, oncekey.MinHeaderKeyBytes)}
}

func headerStatement() oncekey.HeaderStatement {
	return oncekey.HeaderStatement{
		Namespace: "default", WorkflowID: "order-1001", ActivityType: "IssueRefund",
		Tenant: "acme", StepID: "refund", FirstActivityID: "",
		ArgsDigest: sha256.Sum256([]byte(`{"amount":10,"order":"1001"}`)),
	}
}

func unboundReason(t *testing.T, err error) string {
	t.Helper()
	var e *oncekey.UnboundHeadersError
	require.True(t, errors.As(err, &e), "an *UnboundHeadersError, got %v", err)
	return e.Reason
}

// Every member of the statement is bound: a binding made for one statement does not verify for
// the statement with any one member changed.
func TestHeaderBindingCoversEveryMember(t *testing.T) {
	t.Parallel()
	k := headerKey("k1", 1)
	s := headerStatement()
	b := oncekey.BindHeaders(k, &s)
	require.True(t, strings.HasPrefix(b, "k1:"), b)
	require.NoError(t, oncekey.VerifyHeaderBinding([]oncekey.HeaderKey{k}, &s, b))

	for name, change := range map[string]func(*oncekey.HeaderStatement){
		"namespace":         func(s *oncekey.HeaderStatement) { s.Namespace = "other" },
		"workflow ID":       func(s *oncekey.HeaderStatement) { s.WorkflowID = "order-1002" },
		"activity type":     func(s *oncekey.HeaderStatement) { s.ActivityType = "CancelOrder" },
		"tenant":            func(s *oncekey.HeaderStatement) { s.Tenant = "other" },
		"step ID":           func(s *oncekey.HeaderStatement) { s.StepID = "refund-2" },
		"first activity ID": func(s *oncekey.HeaderStatement) { s.FirstActivityID = "5" },
		"arguments": func(s *oncekey.HeaderStatement) {
			s.ArgsDigest = sha256.Sum256([]byte(`{"amount":1000,"order":"1001"}`))
		},
		// The encoding is length-prefixed: moving a byte between members changes it.
		"boundary": func(s *oncekey.HeaderStatement) { s.Tenant, s.StepID = "acmer", "efund" },
	} {
		changed := headerStatement()
		change(&changed)
		err := oncekey.VerifyHeaderBinding([]oncekey.HeaderKey{k}, &changed, b)
		require.Equal(t, oncekey.UnboundMismatch, unboundReason(t, err), name)
	}
}

func TestHeaderBindingKeys(t *testing.T) {
	t.Parallel()
	old, next, stranger := headerKey("old", 1), headerKey("new", 2), headerKey("old", 3)
	s := headerStatement()

	// No binding, a key not listed, a binding of another shape.
	require.Equal(t, oncekey.UnboundNoBinding, unboundReason(t, oncekey.VerifyHeaderBinding([]oncekey.HeaderKey{old}, &s, "")))
	err := oncekey.VerifyHeaderBinding([]oncekey.HeaderKey{old}, &s, oncekey.BindHeaders(next, &s))
	require.Equal(t, oncekey.UnboundUnknownKey, unboundReason(t, err))
	var e *oncekey.UnboundHeadersError
	require.ErrorAs(t, err, &e)
	require.Equal(t, "new", e.KeyID)
	for _, bad := range []string{"old", "old:", "old:" + base64.RawURLEncoding.EncodeToString([]byte("short")), ":abc"} {
		require.Error(t, oncekey.VerifyHeaderBinding([]oncekey.HeaderKey{old}, &s, bad), bad)
	}
	// The same ID with another secret (a key of another deployment) does not verify.
	require.Equal(t, oncekey.UnboundMismatch, unboundReason(t, oncekey.VerifyHeaderBinding([]oncekey.HeaderKey{old}, &s, oncekey.BindHeaders(stranger, &s))))

	// Rotation: the new key listed second verifies what it binds, and the old key still does;
	// once the old key is dropped, what it bound no longer verifies.
	both := []oncekey.HeaderKey{old, next}
	require.NoError(t, oncekey.VerifyHeaderBinding(both, &s, oncekey.BindHeaders(next, &s)))
	require.NoError(t, oncekey.VerifyHeaderBinding(both, &s, oncekey.BindHeaders(old, &s)))
	require.NoError(t, oncekey.VerifyHeaderBinding([]oncekey.HeaderKey{next}, &s, oncekey.BindHeaders(next, &s)))
	require.Equal(t, oncekey.UnboundUnknownKey, unboundReason(t, oncekey.VerifyHeaderBinding([]oncekey.HeaderKey{next}, &s, oncekey.BindHeaders(old, &s))))
}

// TestHeaderBindingPinned pins the binding of one statement under one key. CHANGING IT IS A
// BREAKING CHANGE (docs/compatibility.md): the calls running workflows have scheduled carry
// bindings in this format, and workers of two versions verify each other's.
func TestHeaderBindingPinned(t *testing.T) {
	t.Parallel()
	s := headerStatement()
	require.Equal(t, "oncekey-header-binding-v1", oncekey.HeaderBindingVersion)
	require.Equal(t, "k1:"+headerBindingPinned, oncekey.BindHeaders(headerKey("k1", 1), &s))
}

// headerBindingPinned was computed apart from the code (Python's hmac over the length-prefixed parts).
const headerBindingPinned = "Fy4a_hcUHJ-oiUQOXAZxb9jT92_cqwv6caOnToiNetc"

func TestHeaderKeyChecks(t *testing.T) {
	t.Parallel()
	require.NoError(t, oncekey.CheckHeaderKeys(nil))
	require.NoError(t, oncekey.CheckHeaderKeys([]oncekey.HeaderKey{headerKey("a.b_c-1", 1), headerKey("B", 2)}))
	for name, keys := range map[string][]oncekey.HeaderKey{
		"short secret": {{ID: "k", Secret: make([]byte, oncekey.MinHeaderKeyBytes-1)}},
		"empty ID":     {headerKey("", 1)},
		"ID with ':'":  {headerKey("a:b", 1)},
		"ID too long":  {headerKey(strings.Repeat("a", oncekey.MaxHeaderKeyIDLen+1), 1)},
		"duplicate ID": {headerKey("k", 1), headerKey("k", 2)},
	} {
		require.Error(t, oncekey.CheckHeaderKeys(keys), name)
	}
}

func TestLoadHeaderKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	s1, s2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 40)
	keys, err := oncekey.LoadHeaderKeys(write("keys", "# header keys\n\nnew "+base64.StdEncoding.EncodeToString(s2)+
		"\n  old\t"+base64.RawStdEncoding.EncodeToString(s1)+"  \n"))
	require.NoError(t, err)
	require.Equal(t, []oncekey.HeaderKey{{ID: "new", Secret: s2}, {ID: "old", Secret: s1}}, keys)

	for name, text := range map[string]string{
		"empty":        "# nothing\n",
		"one field":    "k1\n",
		"not base64":   "k1 !!!\n",
		"short secret": "k1 " + base64.StdEncoding.EncodeToString(make([]byte, 16)) + "\n",
		"duplicate":    "k1 " + base64.StdEncoding.EncodeToString(s1) + "\nk1 " + base64.StdEncoding.EncodeToString(s2) + "\n",
	} {
		_, err := oncekey.LoadHeaderKeys(write(strings.ReplaceAll(name, " ", "-"), text))
		require.Error(t, err, name)
	}
	_, err = oncekey.LoadHeaderKeys(filepath.Join(dir, "missing"))
	require.Error(t, err)
}
