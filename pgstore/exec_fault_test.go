package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// Someone runs DISCARD ALL or DEALLOCATE ALL on a pooled connection behind the store's back
// (a user through the same pool, a session-reset hook): the server forgets the store's
// prepared statements while pgx still lists them. The store's next calls on that connection
// work. (Before the store prepared its statements again on 26000 "prepared statement does not
// exist", every later call of a statement on that connection failed until the connection was
// closed.) pgx's own DeallocateAll, which also clears pgx's list, is the third case.
func TestPreparedStatementsDroppedBehindTheStore(t *testing.T) {
	t.Parallel()
	for _, reset := range []string{"DISCARD ALL", "DEALLOCATE ALL", "pgx DeallocateAll"} {
		t.Run(reset, func(t *testing.T) {
			t.Parallel()
			pool := newPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns, cfg.MinConns = 1, 1 })
			s := pgstore.New(pool, nil)
			ctx := ctxT(t)
			first, err := s.Claim(ctx, claimParams("ok1_before", oncekeystore.Effectful))
			require.NoError(t, err)
			require.True(t, first.Acquired)
			_, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_before"})
			require.NoError(t, err)

			if reset == "pgx DeallocateAll" {
				c, err := pool.Acquire(ctx)
				require.NoError(t, err)
				require.NoError(t, c.Conn().DeallocateAll(ctx))
				c.Release()
			} else {
				_, err = pool.Exec(ctx, reset)
				require.NoError(t, err)
			}

			_, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_before"})
			require.NoError(t, err, "get after %s", reset)
			res, err := s.Claim(ctx, claimParams("ok1_after", oncekeystore.Effectful))
			require.NoError(t, err, "claim after %s", reset)
			require.True(t, res.Acquired)
			_, err = s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_before", Epoch: first.Record.Epoch,
				Status: oncekeystore.StatusApplied, Result: []byte("r")})
			require.NoError(t, err, "complete after %s", reset)
		})
	}
}

// A text column becomes varchar (the migration TestPreparedStatementsSurviveAColumnTypeChange
// stands for): the statement prepared again infers varchar for the parameter written to it.
// The value is the same bytes either way; the store keeps working, as pgx.Conn.Query does.
func TestResolveAfterATextColumnBecomesVarchar(t *testing.T) {
	t.Parallel()
	pool := newPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns, cfg.MinConns = 1, 1 })
	s := pgstore.New(pool, nil)
	ctx := ctxT(t)
	for _, key := range []string{"ok1_a", "ok1_b"} {
		res, err := s.Claim(ctx, claimParams(key, oncekeystore.Effectful))
		require.NoError(t, err)
		_, err = s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{Tenant: "acme", OperationKey: key, Epoch: res.Record.Epoch})
		require.NoError(t, err)
	}
	_, err := s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: "acme", OperationKey: "ok1_a", Epoch: 1, Status: oncekeystore.StatusApplied, Note: "before"})
	require.NoError(t, err)

	_, err = pool.Exec(ctx, `ALTER TABLE oncekey_operations ALTER COLUMN note TYPE varchar(4000)`)
	require.NoError(t, err)

	r, err := s.Resolve(ctx, &oncekeystore.ResolveParams{Tenant: "acme", OperationKey: "ok1_b", Epoch: 1, Status: oncekeystore.StatusApplied, Note: "after"})
	require.NoError(t, err)
	require.Equal(t, "after", r.Note)
}

// traceEvent is what a pgx.QueryTracer saw at the end of a statement.
type traceEvent struct {
	sql string
	tag pgconn.CommandTag
	err error
}

// recordingTracer passes the statements it sees on to channels.
type recordingTracer struct {
	starts chan string
	ends   chan traceEvent
}

type traceKey struct{}

func (tr *recordingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	tr.starts <- d.SQL
	return context.WithValue(ctx, traceKey{}, d.SQL)
}

func (tr *recordingTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	sql, _ := ctx.Value(traceKey{}).(string)
	tr.ends <- traceEvent{sql: sql, tag: d.CommandTag, err: d.Err}
}

// A QueryTracer on the pool (OpenTelemetry's otelpgx, say, which records rows affected from
// the command tag) sees each store statement as pgx would show it: a start and an end with
// the statement's command tag, and no error for a statement that found no row.
func TestTracerSeesCommandTags(t *testing.T) {
	t.Parallel()
	tr := &recordingTracer{starts: make(chan string, 100), ends: make(chan traceEvent, 100)}
	pool := newPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	// Set after Migrate so that only the store's statements are seen.
	cfg := pool.Config()
	cfg.ConnConfig.Tracer = tr
	pool2, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool2.Close)
	s := pgstore.New(pool2, nil)
	ctx := ctxT(t)
	next := func(what string) traceEvent {
		t.Helper()
		require.Len(t, tr.starts, 1, "%s: one start", what)
		require.Len(t, tr.ends, 1, "%s: one end", what)
		start, end := <-tr.starts, <-tr.ends
		require.Equal(t, start, end.sql, "%s: end in the context start returned", what)
		return end
	}
	res, err := s.Claim(ctx, claimParams("ok1_traced", oncekeystore.Effectful))
	require.NoError(t, err)
	e := next("claim")
	require.NoError(t, e.err)
	require.Equal(t, "INSERT 0 1", e.tag.String(), "claim")

	_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: "ok1_traced", Epoch: res.Record.Epoch, Lease: time.Minute})
	require.NoError(t, err)
	e = next("renew")
	require.NoError(t, e.err)
	require.Equal(t, "UPDATE 1", e.tag.String(), "renew")

	_, err = s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_traced"})
	require.NoError(t, err)
	e = next("get")
	require.Equal(t, "SELECT 1", e.tag.String(), "get")

	// A fenced write at a stale epoch finds no row (then a get finds the record).
	_, err = s.Renew(ctx, &oncekeystore.RenewParams{Tenant: "acme", OperationKey: "ok1_traced", Epoch: res.Record.Epoch + 1, Lease: time.Minute})
	require.ErrorIs(t, err, oncekeystore.ErrLostClaim)
	require.Len(t, tr.ends, 2)
	e = <-tr.ends
	<-tr.ends
	<-tr.starts
	<-tr.starts
	require.Equal(t, "UPDATE 0", e.tag.String(), "stale renew")
	require.NoError(t, e.err, "a statement that finds no row is not a failed statement")
}
