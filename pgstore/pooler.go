package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oncekey/oncekey/oncekeystore"
)

// A connection pooler in transaction mode (PgBouncer's pool_mode = transaction) hands each
// transaction, and each statement outside one, to whichever server connection is free. State a
// client leaves on a server connection between round trips is then another client's: named
// prepared statements (pgx's default QueryExecModeCacheStatement, and the store's own, see
// exec.go), the unnamed statement pgx's QueryExecModeDescribeExec describes in one round trip
// and binds in the next, session settings. PgBouncer 1.18 keeps none of it for the client.
//
// The store finds a pooler by itself: a server connection's backend PID (pg_backend_pid())
// is the PID the connection announced at startup (BackendKeyData) when the client talks to
// Postgres itself, and another number when a pooler answered the startup with keys of its
// own. Behind one, on a pool in a mode that keeps state between round trips, every statement
// of the store goes in one round trip without a named statement: its own single-row
// statements through pgconn's ExecParams (unnamed, binary), every other statement in
// pgx.QueryExecModeExec. Nothing the store does needs a session: migrations take a
// transaction-level advisory lock and SET LOCAL, a Transactional tool's transaction sets its
// idle timeout with SET LOCAL, purge batches set theirs with set_config(…, true), the outbox
// relay locks with FOR UPDATE SKIP LOCKED inside one transaction, and there is no LISTEN.

// The store's route to Postgres, found on its first call (detectRoute).
const (
	routeUnknown int32 = iota
	routeDirect
	routePooler
)

// sessionBound reports whether pgx in mode relies on the server connection staying the same
// from one round trip to the next: named prepared statements, or an unnamed statement
// described in one round trip and bound in the next.
func sessionBound(mode pgx.QueryExecMode) bool {
	return mode == pgx.QueryExecModeCacheStatement || mode == pgx.QueryExecModeDescribeExec
}

// poolerMode is the mode the store's statements run in behind a pooler, on a pool whose own
// mode is session-bound.
const poolerMode = pgx.QueryExecModeExec

// throughPooler reports whether conn talks to Postgres through a pooler: whether the backend
// that answers `SELECT pg_backend_pid()` has another PID than the one the connection was given
// at startup. One round trip, the simple protocol.
func throughPooler(ctx context.Context, conn *pgconn.PgConn) (bool, error) {
	res, err := conn.Exec(ctx, "SELECT pg_backend_pid()").ReadAll()
	if err != nil {
		return false, err
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		return false, fmt.Errorf("pgstore: SELECT pg_backend_pid() returned no row")
	}
	pid, err := strconv.ParseUint(string(res[0].Rows[0][0]), 10, 32)
	if err != nil {
		return false, fmt.Errorf("pgstore: SELECT pg_backend_pid() returned %q: %w", res[0].Rows[0][0], err)
	}
	return uint32(pid) != conn.PID(), nil
}

// route is how a pool reaches Postgres, found on its first use by the store (detect).
type route struct {
	pool  *pgxpool.Pool
	state atomic.Int32 // routeUnknown, routeDirect or routePooler
}

// newRoute returns the route of pool: direct, with nothing to find out, when the pool's mode
// keeps no state between round trips (the store runs its statements as the pool says, pooler
// or not) or there is no pool.
func newRoute(pool *pgxpool.Pool) *route {
	r := &route{pool: pool}
	if pool == nil || !sessionBound(pool.Config().ConnConfig.DefaultQueryExecMode) {
		r.state.Store(routeDirect)
	}
	return r
}

// detect finds, once, whether the pool reaches Postgres through a pooler (throughPooler). An
// error (the server unreachable) leaves the route unknown for the next call.
func (r *route) detect(ctx context.Context) error {
	if r.state.Load() != routeUnknown {
		return nil
	}
	c, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	pooled, err := throughPooler(ctx, c.Conn().PgConn())
	if err != nil {
		return err
	}
	if pooled {
		r.state.Store(routePooler)
	} else {
		r.state.Store(routeDirect)
	}
	return nil
}

// pooled reports whether statements on the pool must avoid session state (see the top of this
// file): a pooler was found in front of a pool whose mode is session-bound.
func (r *route) pooled() bool { return r.state.Load() == routePooler }

// pooled reports whether the store's pool is behind a pooler that its mode does not suit.
func (s *Store) pooled() bool { return s.route.pooled() }

// querier runs statements: the pool, a transaction or a connection.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// db returns the store's pool as the store's statements must use it (on).
func (s *Store) db() querier { return s.on(s.pool) }

// on returns q, a querier on the store's pool, or behind a pooler q with every statement in
// poolerMode (unless the caller named a mode of its own as the first argument, as pgx allows).
func (s *Store) on(q querier) querier {
	if s.pooled() {
		return modeQuerier{q: q}
	}
	return q
}

// modeQuerier sends every statement of q in poolerMode.
type modeQuerier struct{ q querier }

func (m modeQuerier) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return m.q.Exec(ctx, sql, withPoolerMode(args)...)
}

func (m modeQuerier) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return m.q.Query(ctx, sql, withPoolerMode(args)...)
}

func (m modeQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return m.q.QueryRow(ctx, sql, withPoolerMode(args)...)
}

// withPoolerMode returns args with poolerMode in front, or args as they are when they name a
// mode already.
func withPoolerMode(args []any) []any {
	if len(args) > 0 {
		if _, ok := args[0].(pgx.QueryExecMode); ok {
			return args
		}
	}
	return append([]any{poolerMode}, args...)
}

// PoolerError is returned (wrapped, with the operation) when a connection pooler between the
// store and Postgres (PgBouncer, say) refuses a startup parameter of the pool's connections:
// PgBouncer passes on only a few (client_encoding, DateStyle, TimeZone,
// standard_conforming_strings, application_name) and ends the connection on any other. It is
// a configuration mistake, not an outage: it never wraps *oncekeystore.StoreUnavailableError,
// and no retry helps. errors.As finds it; Err is the pooler's own error.
type PoolerError struct {
	// Setting is the startup parameter the pooler refused, as it names it: "statement_timeout",
	// "search_path", ….
	Setting string
	// Err is the pooler's error (a *pgconn.PgError, SQLSTATE 08P01).
	Err error
}

func (e *PoolerError) Error() string {
	return fmt.Sprintf("the connection pooler in front of Postgres (PgBouncer?) refuses the startup parameter %s. %s",
		e.Setting, poolerFix(e.Setting))
}

func (e *PoolerError) Unwrap() error { return e.Err }

// Is reports whether target is oncekeystore.ErrStoreConfig: no retry gets past a pooler that
// refuses the pool's settings, so the interceptor fails the call as a configuration error.
func (e *PoolerError) Is(target error) bool { return target == oncekeystore.ErrStoreConfig }

// poolerFix says what to do about a startup parameter the pooler refuses.
func poolerFix(setting string) string {
	switch setting {
	case "statement_timeout":
		return "Build the pool with pgstore.NewPool, which leaves it out behind a pooler, or delete it from the pool's ConnConfig.RuntimeParams."
	case "search_path":
		return "Name the schema with pgstore.Options.Schema (oncekey --schema) instead of search_path in the connection string."
	}
	return "Remove it from the connection string, or list it in PgBouncer's ignore_startup_parameters."
}

// poolerRefusal returns the *PoolerError err is, or nil.
func poolerRefusal(err error) *PoolerError {
	var pe *PoolerError
	if errors.As(err, &pe) {
		return pe
	}
	var pgErr *pgconn.PgError
	const prefix = "unsupported startup parameter: "
	if errors.As(err, &pgErr) && pgErr.Code == "08P01" && strings.HasPrefix(pgErr.Message, prefix) {
		return &PoolerError{Setting: strings.TrimPrefix(pgErr.Message, prefix), Err: err}
	}
	return nil
}
