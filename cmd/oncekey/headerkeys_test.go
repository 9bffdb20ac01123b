package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

// `oncekey keys header-gen` appends keys to a file LoadHeaderKeys reads, the first one first,
// readable by its owner only; it refuses an ID the file has, a bad ID, and no --out.
func TestKeysHeaderGen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "header-keys")
	r := cli(t, nil, "keys", "header-gen", "--id", "deploy-1", "--out", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "appended the header key deploy-1 to "+path+" (first")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	r = cli(t, nil, "keys", "header-gen", "--id", "deploy-2", "--out", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "(last)")
	keys, err := oncekey.LoadHeaderKeys(path)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	require.Equal(t, "deploy-1", keys[0].ID)
	require.Equal(t, "deploy-2", keys[1].ID)
	require.Len(t, keys[0].Secret, oncekey.MinHeaderKeyBytes)
	require.NotEqual(t, keys[0].Secret, keys[1].Secret)

	before, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, args := range [][]string{
		{"--id", "deploy-1", "--out", path},
		{"--id", "bad id", "--out", path},
		{"--id", "", "--out", path},
		{"--id", "deploy-3"},
	} {
		r = cli(t, nil, append([]string{"keys", "header-gen"}, args...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stdout)
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after, "a refused command writes nothing")
}
