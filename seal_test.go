package oncekey_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/testing/sealtest"
)

// The prefix of a sealed stored result is part of the stored format: changing it is a breaking
// change (stored results would read as plain and be refused).
func TestSealedResultPrefixIsPinned(t *testing.T) {
	require.Equal(t, "oksealed1:", oncekey.SealedResultPrefix)
}

func TestSealAndOpenResult(t *testing.T) {
	ctx := context.Background()
	s := sealtest.Binder{}
	plain := []byte("\x0a\x05hello")

	stored, err := oncekey.SealResult(ctx, s, "t1", "ok1_a", plain)
	require.NoError(t, err)
	require.True(t, oncekey.IsSealedResult(stored))
	got, err := oncekey.OpenResult(ctx, s, "t1", "ok1_a", stored)
	require.NoError(t, err)
	require.Equal(t, plain, got)

	// Another row, another tenant: refused by the sealer, with the record named.
	for _, at := range [][2]string{{"t1", "ok1_b"}, {"t2", "ok1_a"}} {
		_, err := oncekey.OpenResult(ctx, s, at[0], at[1], stored)
		var se *oncekey.ResultSealError
		require.ErrorAs(t, err, &se)
		require.Equal(t, "open", se.Op)
		require.Contains(t, err.Error(), "sealed for another record or tenant")
		require.Contains(t, err.Error(), at[1])
	}

	// Plain bytes with a sealer: refused, not passed through.
	_, err = oncekey.OpenResult(ctx, s, "t1", "ok1_a", plain)
	require.ErrorIs(t, err, oncekey.ErrResultNotSealed)
	require.Contains(t, err.Error(), "written around the sealer")

	// A sealed result without a sealer: refused, saying what to configure.
	_, err = oncekey.OpenResult(ctx, nil, "t1", "ok1_a", stored)
	require.ErrorIs(t, err, oncekey.ErrNoResultSealer)
	require.Contains(t, err.Error(), "ResultSealer")

	// Without a sealer, plain results are what they were; no result stays no result.
	got, err = oncekey.OpenResult(ctx, nil, "t1", "ok1_a", plain)
	require.NoError(t, err)
	require.Equal(t, plain, got)
	none, err := oncekey.SealResult(ctx, s, "t1", "ok1_a", nil)
	require.NoError(t, err)
	require.Nil(t, none)
	none, err = oncekey.OpenResult(ctx, s, "t1", "ok1_a", nil)
	require.NoError(t, err)
	require.Empty(t, none)
}

type failingSealer struct{ sealtest.Binder }

func (failingSealer) Seal(context.Context, string, string, []byte) ([]byte, error) {
	return nil, errors.New("key service down")
}

func TestSealResultError(t *testing.T) {
	_, err := oncekey.SealResult(context.Background(), failingSealer{}, "t1", "ok1_a", []byte("x"))
	var se *oncekey.ResultSealError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "seal", se.Op)
	require.Contains(t, err.Error(), "key service down")
}
