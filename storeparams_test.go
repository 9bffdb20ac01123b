package oncekey_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
)

func TestPurgeParamsDefaultsAndRest(t *testing.T) {
	t.Parallel()
	var p oncekeystore.PurgeParams
	require.NoError(t, p.Validate())
	require.Equal(t, oncekeystore.DefaultPurgeBatchSize, p.Batch())
	require.Equal(t, 3*time.Millisecond, p.RestAfter(3*time.Millisecond), "by default a purge rests as long as its batch took")

	p.Rest = 2.5
	require.Equal(t, 10*time.Millisecond, p.RestAfter(4*time.Millisecond))
	p.Rest = -1
	require.Zero(t, p.RestAfter(4*time.Millisecond), "a negative Rest turns the pause off")

	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		p.Rest = bad
		var ipe *oncekeystore.InvalidParamsError
		require.True(t, errors.As(p.Validate(), &ipe), "Rest %v", bad)
		require.Equal(t, "Rest", ipe.Field)
	}
}

// A PurgePacer owes the pauses it did not take: one cut short by its context is taken by the
// next Pause, and a negative Rest never pauses.
func TestPurgePacerOwesThePausesItDidNotTake(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	pace := (&oncekeystore.PurgeParams{}).Pacer()
	require.NoError(t, pace.Pause(canceled, 0), "nothing owed, nothing to wait for")
	require.ErrorIs(t, pace.Pause(canceled, 20*time.Millisecond), context.Canceled)
	require.ErrorIs(t, pace.Pause(canceled, 0), context.Canceled, "the pause not taken is still owed")
	start := time.Now()
	require.NoError(t, pace.Pause(context.Background(), 0))
	require.GreaterOrEqual(t, time.Since(start), 15*time.Millisecond, "the owed pause is taken")
	require.NoError(t, pace.Pause(canceled, 0), "and then nothing is owed")

	off := (&oncekeystore.PurgeParams{Rest: -1}).Pacer()
	require.NoError(t, off.Pause(canceled, time.Hour))
}

func TestListCursorRoundTrip(t *testing.T) {
	t.Parallel()
	r := &oncekeystore.Record{Tenant: "acme", OperationKey: "ok1_ab", UpdatedAt: time.UnixMicro(1_700_000_000_123_456)}
	c, err := oncekeystore.ParseListCursor(oncekeystore.NextCursor(r))
	require.NoError(t, err)
	require.Equal(t, r.Tenant, c.Tenant)
	require.Equal(t, r.OperationKey, c.OperationKey)
	require.True(t, c.UpdatedAt.Equal(r.UpdatedAt))
	require.False(t, c.Before(r), "a record is not after its own cursor")
	later := *r
	later.OperationKey = "ok1_ac"
	require.True(t, c.Before(&later))

	_, err = oncekeystore.ParseListCursor("not a cursor")
	var ipe *oncekeystore.InvalidParamsError
	require.True(t, errors.As(err, &ipe))
	require.Equal(t, "Cursor", ipe.Field)
}
