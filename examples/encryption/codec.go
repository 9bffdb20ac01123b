package main

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Metadata of an encrypted payload.
const (
	// EncodingEncrypted is the "encoding" metadata value of a payload Codec encrypted.
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID names the key a payload was encrypted with (the first 8 bytes of the key's
	// SHA-256, in hex), so a reader with the wrong key fails clearly instead of with garbage.
	MetadataKeyID = "encryption-key-id"
)

// Codec is a converter.PayloadCodec that encrypts every payload with AES-256-GCM: the whole
// payload (metadata and data) is marshalled and sealed under a random 12-byte nonce, with the
// key ID as additional data. Install it in the client's data converter; oncekey then stores
// results as the ciphertext the codec produced.
type Codec struct {
	aead  cipher.AEAD
	keyID string
}

var _ converter.PayloadCodec = (*Codec)(nil)

// NewCodec returns a Codec for a 32-byte key.
func NewCodec(key []byte) (*Codec, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("encryption: key is %d bytes, want 32", len(key))
	}
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(key)
	return &Codec{aead: aead, keyID: hex.EncodeToString(sum[:8])}, nil
}

// newGCM returns AES-256-GCM under a 32-byte key.
func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("encryption: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("encryption: %w", err)
	}
	return aead, nil
}

// KeyFromEnv returns the key in the environment variable name (32 bytes in standard base64,
// e.g. from `openssl rand -base64 32`), or a fresh random key and generated=true when it is unset.
func KeyFromEnv(getenv func(string) string, name string) (key []byte, generated bool, err error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, false, err
		}
		return key, true, nil
	}
	key, err = base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, false, fmt.Errorf("encryption: %s is not base64: %w", name, err)
	}
	if len(key) != 32 {
		return nil, false, fmt.Errorf("encryption: %s holds %d bytes, want 32 (openssl rand -base64 32)", name, len(key))
	}
	return key, false, nil
}

// KeyID returns the ID written into MetadataKeyID.
func (c *Codec) KeyID() string { return c.keyID }

// Encode encrypts each payload.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("encryption: encode: %w", err)
		}
		nonce := make([]byte, c.aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("encryption: encode: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(EncodingEncrypted),
				MetadataKeyID:              []byte(c.keyID),
			},
			Data: c.aead.Seal(nonce, nonce, plain, []byte(c.keyID)),
		}
	}
	return out, nil
}

// Decode decrypts each payload Encode produced. A payload that is not encrypted (a plain one
// written around the codec, into the store or the history) is refused rather than passed
// through: a codec that takes plain payloads lets anyone who can write one choose what the
// workflow reads. A payload sealed under another key, or altered, is an error too.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc != EncodingEncrypted {
			return nil, fmt.Errorf("encryption: decode: refusing a payload that is not encrypted (encoding %q)", enc)
		}
		if id := string(p.GetMetadata()[MetadataKeyID]); id != c.keyID {
			return nil, fmt.Errorf("encryption: decode: payload sealed with key %s, this codec has key %s", id, c.keyID)
		}
		n := c.aead.NonceSize()
		if len(p.Data) < n {
			return nil, errors.New("encryption: decode: payload too short")
		}
		plain, err := c.aead.Open(nil, p.Data[:n], p.Data[n:], []byte(c.keyID))
		if err != nil {
			return nil, fmt.Errorf("encryption: decode: %w", err)
		}
		var dec commonpb.Payload
		if err := proto.Unmarshal(plain, &dec); err != nil {
			return nil, fmt.Errorf("encryption: decode: %w", err)
		}
		out[i] = &dec
	}
	return out, nil
}
