package decisionsig_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/decisionsig"
)

// seed is the fixed key of the vectors (ed25519 signatures are deterministic).
var seed = mustHex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func vectorSigner(t *testing.T) *decisionsig.Ed25519Signer {
	t.Helper()
	s, err := decisionsig.NewEd25519Signer(ed25519.NewKeyFromSeed(seed))
	require.NoError(t, err)
	return s
}

func approval() decisionsig.Statement {
	return decisionsig.Statement{
		Kind: decisionsig.Approve, Namespace: "default", Tenant: "acme", OperationKey: "ok1_abc", Tool: "IssueRefund",
		Episode: 2, RequestToken: "tok", Fingerprint: "fp", DecidedBy: "ada", Reason: "ok",
		SignedAt: time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC),
	}
}

// TestStatementVector pins a Statement's canonical JSON: the bytes every signature covers.
// Changing it is a BREAKING CHANGE: every stored signature stops verifying.
func TestStatementVector(t *testing.T) {
	st := approval()
	st.Version = decisionsig.Version
	b, err := st.Bytes()
	require.NoError(t, err)
	require.Equal(t, `{"decided_by":"ada","episode":2,"fingerprint":"fp","kind":"approve","namespace":"default",`+
		`"operation_key":"ok1_abc","reason":"ok","request_token":"tok","signed_at":"2026-12-05T01:02:03Z","tenant":"acme","tool":"IssueRefund","v":1}`, string(b))
}

// TestSignedVector pins the stored form of a signed decision (Signed.Encode) and its key ID.
// Changing it is a BREAKING CHANGE: stored decisions no longer decode or verify.
func TestSignedVector(t *testing.T) {
	s := vectorSigner(t)
	require.Equal(t, "ed25519:21fe31dfa154a261626bf854046fd227", s.KeyID())
	signed, err := decisionsig.Sign(s, approval())
	require.NoError(t, err)
	b, err := signed.Encode()
	require.NoError(t, err)
	require.Equal(t, `{"key_id":"`+s.KeyID()+`","signature":"`+base64.StdEncoding.EncodeToString(signed.Signature)+`","statement":{"decided_by":"ada","episode":2,"fingerprint":"fp","kind":"approve","namespace":"default",`+
		`"operation_key":"ok1_abc","reason":"ok","request_token":"tok","signed_at":"2026-12-05T01:02:03Z","tenant":"acme","tool":"IssueRefund","v":1}}`, string(b))
	require.Equal(t, "cns8Slf4l5bfjsIWY56Pb2mJB4uWyaJwdly3M3VZAbdeqr/wohU0iMUoVe5M3Jj4WL+WQWln/hl6WJ40bymoDQ==", base64.StdEncoding.EncodeToString(signed.Signature))
	back, err := decisionsig.Decode(b)
	require.NoError(t, err)
	require.Equal(t, signed, back)
}

// trust returns a trust list of s's key for tenants acme, tools IssueRefund and kinds.
func entry(pub ed25519.PublicKey, kinds ...decisionsig.Kind) decisionsig.Entry {
	if len(kinds) == 0 {
		kinds = []decisionsig.Kind{decisionsig.Approve, decisionsig.Deny}
	}
	return decisionsig.Entry{PublicKey: pub, Tenants: []string{"acme"}, Tools: []string{"IssueRefund"}, Kinds: kinds}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	s := vectorSigner(t)
	tl, err := decisionsig.NewTrustList(entry(s.Public()))
	require.NoError(t, err)
	want := approval()
	want.SignedAt = time.Time{}
	good, err := decisionsig.Sign(s, approval())
	require.NoError(t, err)

	e, err := tl.Verify(good, want)
	require.NoError(t, err)
	require.Equal(t, s.KeyID(), e.ID)

	refused := func(t *testing.T, err error, reason error, field string) {
		t.Helper()
		require.ErrorIs(t, err, decisionsig.ErrRefused)
		require.ErrorIs(t, err, reason)
		var de *decisionsig.Error
		require.ErrorAs(t, err, &de)
		require.Equal(t, field, de.Field)
	}
	t.Run("unsigned", func(t *testing.T) {
		_, err := tl.Verify(nil, want)
		refused(t, err, decisionsig.ErrUnsigned, "")
	})
	t.Run("bad signature", func(t *testing.T) {
		forged := *good
		forged.Statement.Reason = "changed after signing"
		_, err := tl.Verify(&forged, want)
		refused(t, err, decisionsig.ErrBadSignature, "")
	})
	t.Run("unknown key", func(t *testing.T) {
		_, priv, _ := ed25519.GenerateKey(nil)
		other, _ := decisionsig.NewEd25519Signer(priv)
		sig, err := decisionsig.Sign(other, approval())
		require.NoError(t, err)
		_, err = tl.Verify(sig, want)
		refused(t, err, decisionsig.ErrUntrusted, "")
	})
	t.Run("replayed onto another request", func(t *testing.T) {
		for _, change := range []func(*decisionsig.Statement) string{
			func(st *decisionsig.Statement) string { st.RequestToken = "other"; return "request_token" },
			func(st *decisionsig.Statement) string { st.Episode = 3; return "episode" },
			func(st *decisionsig.Statement) string { st.OperationKey = "ok1_def"; return "operation_key" },
			func(st *decisionsig.Statement) string { st.Fingerprint = "fp2"; return "fingerprint" },
			func(st *decisionsig.Statement) string { st.DecidedBy = "mallory"; return "decided_by" },
			func(st *decisionsig.Statement) string { st.Kind = decisionsig.Deny; return "kind" },
		} {
			other := want
			field := change(&other)
			_, err := tl.Verify(good, other)
			refused(t, err, decisionsig.ErrMismatch, field)
		}
	})
	t.Run("out of scope", func(t *testing.T) {
		for _, change := range []func(*decisionsig.Statement){
			func(st *decisionsig.Statement) { st.Tenant = "globex" },
			func(st *decisionsig.Statement) { st.Tool = "DeleteAccount" },
			func(st *decisionsig.Statement) { st.Kind = decisionsig.Resolve },
		} {
			st := approval()
			change(&st)
			sig, err := decisionsig.Sign(s, st)
			require.NoError(t, err)
			w := st
			w.SignedAt = time.Time{}
			_, err = tl.Verify(sig, w)
			refused(t, err, decisionsig.ErrUntrusted, "")
		}
	})
	t.Run("validity", func(t *testing.T) {
		e := entry(s.Public())
		e.NotAfter = time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
		tl, err := decisionsig.NewTrustList(e)
		require.NoError(t, err)
		tl.SetClock(func() time.Time { return e.NotAfter.Add(time.Second) })
		_, err = tl.Verify(good, want)
		refused(t, err, decisionsig.ErrUntrusted, "")
		tl.SetClock(func() time.Time { return e.NotAfter.Add(-time.Second) })
		_, err = tl.Verify(good, want)
		require.NoError(t, err)
	})
}

func writeList(t *testing.T, path string, entries ...string) {
	t.Helper()
	tmp := path + ".tmp"
	doc := `{"keys":[`
	for i, e := range entries {
		if i > 0 {
			doc += ","
		}
		doc += e
	}
	require.NoError(t, os.WriteFile(tmp, []byte(doc+`]}`), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// TestTrustListFileReload: a key is added, revoked and rotated by rewriting the file, without
// making a new TrustList; a file that stops reading refuses everything.
func TestTrustListFileReload(t *testing.T) {
	t.Parallel()
	s := vectorSigner(t)
	pub := base64.StdEncoding.EncodeToString(s.Public())
	path := filepath.Join(t.TempDir(), "trust.json")
	writeList(t, path)
	tl, err := decisionsig.LoadTrustList(path)
	require.NoError(t, err)
	sig, err := decisionsig.Sign(s, approval())
	require.NoError(t, err)
	want := approval()
	want.SignedAt = time.Time{}

	_, err = tl.Verify(sig, want)
	require.ErrorIs(t, err, decisionsig.ErrUntrusted)

	writeList(t, path, fmt.Sprintf(`{"id":%q,"name":"ada","public_key":%q,"tenants":["acme"],"tools":["*"],"kinds":["approve"]}`, s.KeyID(), pub))
	_, err = tl.Verify(sig, want)
	require.NoError(t, err)

	writeList(t, path, fmt.Sprintf(`{"public_key":%q,"tenants":["acme"],"tools":["*"],"kinds":["approve"],"revoked":true}`, pub))
	_, err = tl.Verify(sig, want)
	require.ErrorIs(t, err, decisionsig.ErrUntrusted)
	require.ErrorContains(t, err, "revoked")

	require.NoError(t, os.WriteFile(path, []byte(`{"keys":[`), 0o600))
	_, err = tl.Verify(sig, want)
	require.ErrorIs(t, err, decisionsig.ErrUntrusted)

	writeList(t, path, fmt.Sprintf(`{"public_key":%q,"tenants":["acme"],"tools":["IssueRefund"],"kinds":["approve"]}`, pub))
	_, err = tl.Verify(sig, want)
	require.NoError(t, err)
}

func TestParseTrustListRefuses(t *testing.T) {
	t.Parallel()
	pub := base64.StdEncoding.EncodeToString(vectorSigner(t).Public())
	for name, doc := range map[string]string{
		"unknown member": `{"keys":[{"public_key":"` + pub + `","tenants":["a"],"tools":["*"],"kinds":["approve"],"tenant":"a"}]}`,
		"no scope":       `{"keys":[{"public_key":"` + pub + `","tools":["*"],"kinds":["approve"]}]}`,
		"unknown kind":   `{"keys":[{"public_key":"` + pub + `","tenants":["a"],"tools":["*"],"kinds":["approve_all"]}]}`,
		"wrong id":       `{"keys":[{"id":"ed25519:00","public_key":"` + pub + `","tenants":["a"],"tools":["*"],"kinds":["approve"]}]}`,
		"short key":      `{"keys":[{"public_key":"AAAA","tenants":["a"],"tools":["*"],"kinds":["approve"]}]}`,
		"twice": `{"keys":[{"public_key":"` + pub + `","tenants":["a"],"tools":["*"],"kinds":["approve"]},` +
			`{"public_key":"` + pub + `","tenants":["b"],"tools":["*"],"kinds":["approve"]}]}`,
	} {
		_, err := decisionsig.ParseTrustList([]byte(doc))
		require.Error(t, err, name)
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	privPEM, pubB64, id, err := decisionsig.GenerateKey()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), privPEM, 0o600))
	s, err := decisionsig.LoadSigner(filepath.Join(dir, "key.pem"))
	require.NoError(t, err)
	require.Equal(t, id, s.KeyID())
	pub, err := decisionsig.ParsePublicKey(pubB64)
	require.NoError(t, err)
	require.Equal(t, s.Public(), pub)

	// The raw base64 forms: a 32-byte seed and a 64-byte key.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "seed"), []byte(base64.StdEncoding.EncodeToString(seed)+"\n"), 0o600))
	fromSeed, err := decisionsig.LoadSigner(filepath.Join(dir, "seed"))
	require.NoError(t, err)
	require.Equal(t, vectorSigner(t).KeyID(), fromSeed.KeyID())
	k, err := decisionsig.ParsePrivateKey([]byte(base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(seed))))
	require.NoError(t, err)
	require.Equal(t, ed25519.NewKeyFromSeed(seed), k)

	_, err = decisionsig.ParsePrivateKey([]byte("not a key"))
	require.Error(t, err)
	_, err = decisionsig.LoadSigner(filepath.Join(dir, "missing"))
	require.Error(t, err)
}

func TestDigest(t *testing.T) {
	t.Parallel()
	a, err := decisionsig.Digest([]byte(`{"b":1, "a":"x"}`))
	require.NoError(t, err)
	b, err := decisionsig.Digest([]byte(`{"a":"x","b":1}`))
	require.NoError(t, err)
	require.Equal(t, a, b)
	require.Len(t, a, 64)
	empty, err := decisionsig.Digest(nil)
	require.NoError(t, err)
	require.Empty(t, empty)
	_, err = decisionsig.Digest([]byte(`{`))
	require.Error(t, err)
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	s, err := decisionsig.Decode(nil)
	require.NoError(t, err)
	require.Nil(t, s)
	_, err = decisionsig.Decode([]byte(`{"statement":{},"key_id":"k","signature":"","extra":1}`))
	require.True(t, errors.Is(err, decisionsig.ErrBadSignature))
}
