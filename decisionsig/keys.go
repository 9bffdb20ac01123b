package decisionsig

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// KeyID returns the ID of a public key: "ed25519:" and the hex of the first 16 bytes of the
// SHA-256 of its 32 bytes. A Signed names its key by it; a TrustList entry is found by it.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(sum[:16])
}

// Signer signs statements with a key the decider holds. Sign returns the ed25519 signature of
// msg (a Statement's Bytes); KeyID names the key (KeyID of its public key). An implementation
// may keep the private key elsewhere (an HSM, an agent); Ed25519Signer keeps it in memory.
type Signer interface {
	KeyID() string
	Sign(msg []byte) ([]byte, error)
}

// Ed25519Signer is a Signer holding an ed25519 private key.
type Ed25519Signer struct {
	key ed25519.PrivateKey
	id  string
}

var _ Signer = (*Ed25519Signer)(nil)

// NewEd25519Signer returns a Signer for key (ed25519.PrivateKeySize bytes).
func NewEd25519Signer(key ed25519.PrivateKey) (*Ed25519Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("decisionsig: an ed25519 private key has %d bytes, not %d", ed25519.PrivateKeySize, len(key))
	}
	return &Ed25519Signer{key: key, id: KeyID(key.Public().(ed25519.PublicKey))}, nil
}

// KeyID returns the ID of the signer's public key.
func (s *Ed25519Signer) KeyID() string { return s.id }

// Public returns the signer's public key.
func (s *Ed25519Signer) Public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// Sign returns the ed25519 signature of msg.
func (s *Ed25519Signer) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.key, msg), nil }

// GenerateKey makes a key pair and returns the private key as PEM (PKCS #8, "PRIVATE KEY",
// what LoadSigner reads) and the public key as the base64 of its 32 bytes (what a TrustList
// file's public_key holds), with its KeyID.
func GenerateKey() (privatePEM []byte, publicB64, keyID string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", "", fmt.Errorf("decisionsig: generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, "", "", fmt.Errorf("decisionsig: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), base64.StdEncoding.EncodeToString(pub), KeyID(pub), nil
}

// ParsePrivateKey reads an ed25519 private key: PEM ("PRIVATE KEY", PKCS #8, as GenerateKey and
// `openssl genpkey -algorithm ed25519` write it), or base64 of its 32-byte seed or 64-byte key.
func ParsePrivateKey(b []byte) (ed25519.PrivateKey, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("decisionsig: private key: %w", err)
		}
		ek, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("decisionsig: private key: a %T, not an ed25519 key", k)
		}
		return ek, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, errors.New("decisionsig: private key: neither PEM nor base64")
	}
	switch len(raw) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(raw), nil
	case ed25519.PrivateKeySize:
		return ed25519.PrivateKey(raw), nil
	}
	return nil, fmt.Errorf("decisionsig: private key: %d bytes, not a 32-byte seed or a 64-byte key", len(raw))
}

// ParsePublicKey reads an ed25519 public key: base64 of its 32 bytes, or PEM ("PUBLIC KEY",
// PKIX).
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	if blk, _ := pem.Decode([]byte(s)); blk != nil {
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("decisionsig: public key: %w", err)
		}
		ek, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("decisionsig: public key: a %T, not an ed25519 key", k)
		}
		return ek, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, errors.New("decisionsig: public key: neither PEM nor base64")
	}
	if len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("decisionsig: public key: %d bytes, not %d", len(raw), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), nil
}

// LoadSigner reads a private key file (ParsePrivateKey's forms) and returns its Signer.
func LoadSigner(path string) (*Ed25519Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("decisionsig: read signing key: %w", err)
	}
	k, err := ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return NewEd25519Signer(k)
}

// Sign signs st with s: it sets st.Version to Version and, when st.SignedAt is zero, st.SignedAt
// to now (UTC, to the second), and returns the Signed statement.
func Sign(s Signer, st Statement) (*Signed, error) {
	if s == nil {
		return nil, errors.New("decisionsig: sign: no signer")
	}
	if !st.Kind.Valid() {
		return nil, fmt.Errorf("decisionsig: sign: unknown kind %q", st.Kind)
	}
	st.Version = Version
	if st.SignedAt.IsZero() {
		st.SignedAt = time.Now()
	}
	st.SignedAt = st.SignedAt.UTC().Truncate(time.Second)
	msg, err := st.Bytes()
	if err != nil {
		return nil, err
	}
	sig, err := s.Sign(msg)
	if err != nil {
		return nil, fmt.Errorf("decisionsig: sign: %w", err)
	}
	return &Signed{Statement: st, KeyID: s.KeyID(), Signature: sig}, nil
}
