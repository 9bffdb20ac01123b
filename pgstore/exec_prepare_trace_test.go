package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// prepareCounter is a pgx tracer that also implements pgx.PrepareTracer, as OpenTelemetry's
// otelpgx and pgx's own tracelog do (otelpgx opens a "prepare" span for every TracePrepareStart,
// tracelog logs every TracePrepareEnd).
type prepareCounter struct {
	queries, prepares, alreadyPrepared atomic.Int64
}

func (c *prepareCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.queries.Add(1)
	return ctx
}
func (c *prepareCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *prepareCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	c.prepares.Add(1)
	return ctx
}
func (c *prepareCounter) TracePrepareEnd(_ context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	if d.AlreadyPrepared {
		c.alreadyPrepared.Add(1)
	}
}

// A statement already prepared on a connection is not prepared again for every call: a
// PrepareTracer on the pool sees a prepare only the first time a connection runs a statement,
// as it does for pgx's own statement cache, not one per store call.
func TestPrepareTracedOncePerConnection(t *testing.T) {
	t.Parallel()
	tr := &prepareCounter{}
	pool := newPool(t, func(cfg *pgxpool.Config) {
		cfg.MaxConns, cfg.MinConns = 1, 1
		cfg.ConnConfig.Tracer = tr
	})
	s := pgstore.New(pool, nil)
	ctx := ctxT(t)
	res, err := s.Claim(ctx, claimParams("ok1_warm", oncekeystore.Effectful))
	require.NoError(t, err)
	_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: "ok1_warm", Epoch: res.Record.Epoch, Lease: time.Minute})
	require.NoError(t, err)
	_, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_warm"})
	require.NoError(t, err)

	q0, p0 := tr.queries.Load(), tr.prepares.Load()
	for range 10 {
		_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: "ok1_warm", Epoch: res.Record.Epoch, Lease: time.Minute})
		require.NoError(t, err)
		_, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_warm"})
		require.NoError(t, err)
	}
	require.Equal(t, int64(20), tr.queries.Load()-q0, "statements traced")
	require.Zero(t, tr.prepares.Load()-p0, "prepares traced for statements the connection already has (%d already prepared)", tr.alreadyPrepared.Load())
}
