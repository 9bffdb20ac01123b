package oncekey_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
)

func TestSetEffectReference(t *testing.T) {
	t.Parallel()
	ctx, read := oncekey.ContextWithEffectReference(context.Background())
	require.NoError(t, oncekey.SetEffectReference(ctx, "TCK-0001"))
	require.NoError(t, oncekey.SetEffectReference(ctx, "ch_3MmlLrLkdIwHu7ix0snN0B15"), "a later call replaces the reference")

	long := strings.Repeat("x", oncekey.MaxEffectReferenceBytes+1)
	for _, bad := range []string{long, "T-\xff", "T-\x001"} {
		err := oncekey.SetEffectReference(ctx, bad)
		var inv *oncekey.InvalidEffectReferenceError
		require.ErrorAs(t, err, &inv, "%q", bad)
		require.Equal(t, len(bad), inv.Len)
	}
	require.NoError(t, oncekey.SetEffectReference(ctx, strings.Repeat("é", oncekey.MaxEffectReferenceBytes/2)), "the limit is in bytes")
	require.NoError(t, oncekey.SetEffectReference(ctx, "ch_3MmlLrLkdIwHu7ix0snN0B15"))
	require.Equal(t, "ch_3MmlLrLkdIwHu7ix0snN0B15", read(), "a refused reference recorded nothing")

	err := oncekey.SetEffectReference(ctx, "late")
	require.ErrorIs(t, err, oncekey.ErrNotClaimed, "after the body returned")
	require.Equal(t, "ch_3MmlLrLkdIwHu7ix0snN0B15", read())

	cleared, readCleared := oncekey.ContextWithEffectReference(context.Background())
	require.NoError(t, oncekey.SetEffectReference(cleared, "TCK-0002"))
	require.NoError(t, oncekey.SetEffectReference(cleared, ""))
	require.Empty(t, readCleared(), `"" clears it`)
}

func TestSetEffectReferenceOutsideAClaimedTool(t *testing.T) {
	t.Parallel()
	err := oncekey.SetEffectReference(context.Background(), "TCK-0001")
	require.ErrorIs(t, err, oncekey.ErrNotClaimed)
	var inv *oncekey.InvalidEffectReferenceError
	require.False(t, errors.As(err, &inv))
	// Only the operation key, as a test of a tool might set it: still no holder.
	err = oncekey.SetEffectReference(oncekey.ContextWithOperationKey(context.Background(), "ok1_x"), "TCK-0001")
	require.ErrorIs(t, err, oncekey.ErrNotClaimed)
}

func TestSetEffectReferenceConcurrent(t *testing.T) {
	t.Parallel()
	ctx, read := oncekey.ContextWithEffectReference(context.Background())
	var wg sync.WaitGroup
	for _, ref := range []string{"a", "b", "c", "d"} {
		wg.Go(func() { _ = oncekey.SetEffectReference(ctx, ref) })
	}
	wg.Wait()
	require.Contains(t, []string{"a", "b", "c", "d"}, read())
}
