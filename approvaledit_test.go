package oncekey

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The key of an edit is persisted in every record of an edited call. CHANGING IT IS A BREAKING
// CHANGE (docs/compatibility.md): it orphans those records.
func TestEditKeyPinned(t *testing.T) {
	k, err := EditKey("default", "acme", "ok1_0000000000000000000000000000000000000000000000000000000000000000", 1)
	require.NoError(t, err)
	require.Equal(t, "ok1_6e8fa8e7d675b807f3dc4c44cfa2bc1d670dfb1d3508ced85850640ea2f928b7", k)
	k2, err := EditKey("default", "acme", "ok1_0000000000000000000000000000000000000000000000000000000000000000", 2)
	require.NoError(t, err)
	require.NotEqual(t, k, k2, "each episode's edit has a key of its own")
	_, err = EditKey("default", "acme", "ok1_0", 0)
	require.ErrorIs(t, err, ErrNoKey)
}
