package main

import (
	"context"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/oncekey/oncekey"
)

// sealerVersion is the first byte of what Sealer.Seal writes.
const sealerVersion = 1

// Sealer is a oncekey.ResultSealer on AES-256-GCM: it seals each stored result under a random
// 12-byte nonce with the tenant, the operation key and the key ID as additional data, so a
// result moved or copied to another row or tenant does not open there, and it refuses whatever
// it did not seal. Its key is derived (HKDF-SHA-256) from the codec's key, so one secret serves
// both and neither ciphertext is made under the other's key.
//
// What it writes (after oncekey.SealedResultPrefix): a version byte (1), the 8-byte key ID, the
// nonce, and the ciphertext with its 16-byte tag.
type Sealer struct {
	aead  cipher.AEAD
	keyID [8]byte
}

var _ oncekey.ResultSealer = (*Sealer)(nil)

// NewSealer returns a Sealer for a 32-byte key (the same key as NewCodec's).
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("encryption: key is %d bytes, want 32", len(key))
	}
	sub, err := hkdf.Key(sha256.New, key, nil, "oncekey result sealer v1", 32)
	if err != nil {
		return nil, fmt.Errorf("encryption: %w", err)
	}
	aead, err := newGCM(sub)
	if err != nil {
		return nil, err
	}
	s := &Sealer{aead: aead}
	sum := sha256.Sum256(sub)
	copy(s.keyID[:], sum[:8])
	return s, nil
}

// KeyID returns the ID of the sealer's key, in hex.
func (s *Sealer) KeyID() string { return hex.EncodeToString(s.keyID[:]) }

// additionalData binds a ciphertext to its record: each part is length-prefixed, so no two
// (tenant, key) pairs give the same bytes.
func (s *Sealer) additionalData(tenant, operationKey string) []byte {
	ad := []byte("oncekey-result\x00")
	for _, part := range [][]byte{s.keyID[:], []byte(tenant), []byte(operationKey)} {
		ad = binary.BigEndian.AppendUint32(ad, uint32(len(part)))
		ad = append(ad, part...)
	}
	return ad
}

// Seal encrypts plaintext for the record (tenant, operationKey).
func (s *Sealer) Seal(_ context.Context, tenant, operationKey string, plaintext []byte) ([]byte, error) {
	out := make([]byte, 0, 1+len(s.keyID)+s.aead.NonceSize()+len(plaintext)+s.aead.Overhead())
	out = append(out, sealerVersion)
	out = append(out, s.keyID[:]...)
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("encryption: seal: %w", err)
	}
	out = append(out, nonce...)
	return s.aead.Seal(out, nonce, plaintext, s.additionalData(tenant, operationKey)), nil
}

// Open decrypts what Seal sealed for the record (tenant, operationKey). Anything else is an
// error: bytes it did not write, a result sealed under another key, or one sealed for another
// record or tenant (moved or copied between rows) or altered, which GCM cannot tell apart.
func (s *Sealer) Open(_ context.Context, tenant, operationKey string, sealed []byte) ([]byte, error) {
	head := 1 + len(s.keyID) + s.aead.NonceSize()
	if len(sealed) < head+s.aead.Overhead() || sealed[0] != sealerVersion {
		return nil, errors.New("encryption: not sealed by this sealer")
	}
	if id := sealed[1 : 1+len(s.keyID)]; string(id) != string(s.keyID[:]) {
		return nil, fmt.Errorf("encryption: sealed under key %x, this sealer has key %s", id, s.KeyID())
	}
	nonce := sealed[1+len(s.keyID) : head]
	plain, err := s.aead.Open(nil, nonce, sealed[head:], s.additionalData(tenant, operationKey))
	if err != nil {
		return nil, fmt.Errorf("encryption: the result is not sealed for tenant %q, key %s (moved from another row, or altered): %w", tenant, operationKey, err)
	}
	return plain, nil
}
