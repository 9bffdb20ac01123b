package canonical_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/canonical"
	"github.com/oncekey/oncekey/internal/testing/testenv"
)

// vectorsDir returns the shared test vectors directory (see testenv.VectorsDir).
func vectorsDir(tb testing.TB) string {
	tb.Helper()
	return testenv.VectorsDir(tb)
}

type vectorCase struct {
	Name      string  `json:"name"`
	Input     string  `json:"input"`
	Canonical *string `json:"canonical"`
	Error     bool    `json:"error"`
}

func loadCases(tb testing.TB) []vectorCase {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(vectorsDir(tb), "canonical.json"))
	require.NoError(tb, err)
	var doc struct {
		Cases []vectorCase `json:"cases"`
	}
	require.NoError(tb, json.Unmarshal(b, &doc))
	require.NotEmpty(tb, doc.Cases)
	return doc.Cases
}

// rfcPair is one RFC 8785 input with its expected output (the NFC one where given).
type rfcPair struct {
	name        string
	input, want []byte
}

func loadRFC(tb testing.TB) []rfcPair {
	tb.Helper()
	dir := filepath.Join(vectorsDir(tb), "rfc8785")
	entries, err := os.ReadDir(filepath.Join(dir, "input"))
	require.NoError(tb, err)
	var out []rfcPair
	for _, e := range entries {
		in, err := os.ReadFile(filepath.Join(dir, "input", e.Name()))
		require.NoError(tb, err)
		want, err := os.ReadFile(filepath.Join(dir, "nfc-output", e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			want, err = os.ReadFile(filepath.Join(dir, "output", e.Name()))
		}
		require.NoError(tb, err)
		out = append(out, rfcPair{e.Name(), in, bytes.TrimRight(want, " \t\r\n")})
	}
	require.Len(tb, out, 6)
	return out
}

func TestRFC8785Vectors(t *testing.T) {
	t.Parallel()
	for _, v := range loadRFC(t) {
		t.Run(v.name, func(t *testing.T) {
			got, err := canonical.Transform(v.input)
			require.NoError(t, err)
			require.Equal(t, string(v.want), string(got))
			again, err := canonical.Transform(got)
			require.NoError(t, err)
			require.Equal(t, string(got), string(again), "not idempotent")
		})
	}
}

func TestCanonicalVectors(t *testing.T) {
	t.Parallel()
	cases := loadCases(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			got, err := canonical.Transform([]byte(c.Input))
			if c.Error {
				require.Error(t, err, "got %q", got)
				var ce *canonical.Error
				require.ErrorAs(t, err, &ce)
				return
			}
			require.NotNil(t, c.Canonical, "case has neither canonical nor error")
			require.NoError(t, err)
			require.Equal(t, *c.Canonical, string(got))
		})
	}
}

// TestCanonicalVectorsDigests checks that cases with equal canonical values digest the same and
// cases with different ones do not.
func TestCanonicalVectorsDigests(t *testing.T) {
	t.Parallel()
	byDigest := map[[32]byte]string{}
	for _, c := range loadCases(t) {
		if c.Error {
			continue
		}
		got, err := canonical.Transform([]byte(c.Input))
		require.NoError(t, err)
		d := sha256.Sum256(got)
		if prev, ok := byDigest[d]; ok {
			require.Equal(t, prev, *c.Canonical, "%s digests like a different canonical value", c.Name)
		}
		byDigest[d] = *c.Canonical
	}
}
