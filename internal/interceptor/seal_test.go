package interceptor_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/interceptor"
	"github.com/oncekey/oncekey/internal/testing/sealtest"
	"github.com/oncekey/oncekey/memstore"
	"github.com/oncekey/oncekey/oncekeystore"
)

// sealedSuite is a suite whose store is shared (so a second worker, with or without a sealer,
// sees the first one's records) and whose interceptor has sealer (nil: none).
func sealedSuite(t *testing.T, shared *memstore.Store, ds *downstream, sealer oncekey.ResultSealer) *suiteEnv {
	t.Helper()
	return setupSuiteWith(t, ds, oncekey.Policy{Effect: oncekey.Effectful}, suiteConfig{
		store: func(oncekeystore.Store) oncekeystore.Store { return shared },
		opts:  func(o *interceptor.Options) { o.ResultSealer = sealer },
	})
}

func storedResult(t *testing.T, s *memstore.Store) []byte {
	t.Helper()
	res, err := s.List(context.Background(), &oncekeystore.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	require.Equal(t, oncekeystore.StatusApplied, res.Records[0].Status)
	return res.Records[0].Result
}

// With a ResultSealer the stored result is sealed (behind oncekey.SealedResultPrefix) and a
// repeat replays it, opened: one effect downstream.
func TestSealedResultReplays(t *testing.T) {
	shared := memstore.New(nil)
	ds := newDownstream()
	s := sealedSuite(t, shared, ds, sealtest.Binder{})
	out := s.run(t, workflowInput{Calls: []stepCall{
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
		{StepID: "create_ticket", Tool: "CreateTicket", Req: req1},
	}})
	require.Empty(t, out[0].Err)
	require.Empty(t, out[1].Err)
	require.Equal(t, "T-1", out[0].Ticket.ID)
	require.Equal(t, out[0].Ticket, out[1].Ticket)
	effects, bodies := ds.counts()
	require.Equal(t, 1, effects)
	require.Equal(t, 1, bodies)
	stored := storedResult(t, shared)
	require.True(t, oncekey.IsSealedResult(stored), "%q", stored)
	require.True(t, bytes.Contains(stored, []byte("bind:")), "the sealer's output follows the prefix")
}

// A sealed result read by a worker without the sealer, and a plain result read by a worker with
// one, are refused with a non-retryable oncekey.Config error that says what to configure; the
// tool does not run again.
func TestSealedResultWithoutTheSealerAndPlainWithIt(t *testing.T) {
	for _, c := range []struct {
		name          string
		write, read   oncekey.ResultSealer
		want, wantErr string
	}{
		{"sealed, read without a sealer", sealtest.Binder{}, nil, "has no ResultSealer", "give every worker of the deployment the ResultSealer"},
		{"plain, read with a sealer", nil, sealtest.Binder{}, "is not sealed", "written around the sealer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			shared := memstore.New(nil)
			first := newDownstream()
			out := sealedSuite(t, shared, first, c.write).run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
			require.Empty(t, out[0].Err)
			before := storedResult(t, shared)

			second := newDownstream()
			out = sealedSuite(t, shared, second, c.read).run(t, workflowInput{Calls: []stepCall{{StepID: "create_ticket", Tool: "CreateTicket", Req: req1}}})
			require.Equal(t, oncekey.ErrTypeConfig, out[0].Type, out[0].Err)
			require.Contains(t, out[0].Detail, c.want)
			require.Contains(t, out[0].Detail, c.wantErr)
			effects, bodies := second.counts()
			require.Zero(t, effects, "never a second effect")
			require.Zero(t, bodies)
			require.Equal(t, before, storedResult(t, shared), "the record is unchanged")
		})
	}
}
