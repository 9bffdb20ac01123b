// Package sealtest has a oncekey.ResultSealer for tests: it binds a result to its record
// without encrypting it, so tests can see what a sealer refuses. It must not be used outside
// tests, and must not import any oncekey package but the root one.
package sealtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/oncekey/oncekey"
)

// Binder is a oncekey.ResultSealer that writes "bind:" + tenant + NUL + key + NUL before the
// plaintext, and opens only what carries the same tenant and key. It does not encrypt.
type Binder struct{}

var _ oncekey.ResultSealer = Binder{}

func header(tenant, key string) []byte { return []byte("bind:" + tenant + "\x00" + key + "\x00") }

// Seal binds plaintext to (tenant, key).
func (Binder) Seal(_ context.Context, tenant, key string, plaintext []byte) ([]byte, error) {
	return append(header(tenant, key), plaintext...), nil
}

// Open returns the plaintext bound to (tenant, key), or an error naming the record it is bound to.
func (Binder) Open(_ context.Context, tenant, key string, sealed []byte) ([]byte, error) {
	h := header(tenant, key)
	if !bytes.HasPrefix(sealed, h) {
		if !bytes.HasPrefix(sealed, []byte("bind:")) {
			return nil, errors.New("sealtest: not sealed by this sealer")
		}
		return nil, fmt.Errorf("sealtest: bound to another record, not (%q, %q)", tenant, key)
	}
	return sealed[len(h):], nil
}
