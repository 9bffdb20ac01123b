package pgstore

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ConfigurePool prepares a pool configuration for a Store so that time limits hold on the
// server, not only in the client:
//
//   - the run-time parameter statement_timeout is set to opts.StatementTimeout (default 10s;
//     nothing is set when it is negative), so the server itself aborts a statement that runs
//     too long (a claim stuck behind a row lock, for instance);
//   - a canceled or expired context sends a cancel request to the server before the connection
//     is dropped, so a statement its caller gave up on is stopped rather than left to change a
//     record later.
//
// Without it (a pool built elsewhere) a Store still bounds each call with a client-side
// deadline, but the server may finish a statement the caller has abandoned: an abandoned
// Complete may still land, an abandoned Claim may still insert a pending record.
func ConfigurePool(cfg *pgxpool.Config, opts *Options) {
	timeout := DefaultStatementTimeout
	if opts != nil && opts.StatementTimeout != 0 {
		timeout = opts.StatementTimeout
	}
	if timeout > 0 {
		if cfg.ConnConfig.RuntimeParams == nil {
			cfg.ConnConfig.RuntimeParams = map[string]string{}
		}
		ms := (timeout + time.Millisecond - 1) / time.Millisecond
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(int64(ms), 10)
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, CancelRequestDelay: 0, DeadlineDelay: 2 * time.Second}
	}
}

// NewPool opens a pool for a Store: it parses connString ("" means the libpq environment
// defaults, PGHOST, PGUSER and so on), applies ConfigurePool with opts and then DetectPooler,
// and pings the server once. An unreachable server is an error wrapping
// *oncekeystore.StoreUnavailableError; a startup parameter of connString that a pooler refuses
// is a *PoolerError. Pass the same opts to New.
func NewPool(ctx context.Context, connString string, opts *Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, wrapErr("connect", "", err)
	}
	ConfigurePool(cfg, opts)
	if _, err := DetectPooler(ctx, cfg); err != nil {
		return nil, wrapErr("connect", "", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, wrapErr("connect", "", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, wrapErr("connect", "", err)
	}
	return pool, nil
}

// DetectPooler connects once with cfg to find whether a connection pooler (PgBouncer, say)
// stands between the pool and Postgres, reports it, and fits cfg to it:
//
//   - a pooler that refuses the startup parameter statement_timeout (PgBouncer does unless it
//     is in its ignore_startup_parameters) gets connections without it: the store's own
//     StatementTimeout still bounds each call, and pgx's cancel request, which PgBouncer
//     forwards, stops the statement on the server. For a limit the server keeps by itself,
//     set it on the role (ALTER ROLE … SET statement_timeout = '10s');
//   - behind a pooler, a pool in pgx's default QueryExecModeCacheStatement (or in
//     QueryExecModeDescribeExec) is switched to QueryExecModeExec: a pooler in transaction
//     mode hands named prepared statements, and an unnamed one between round trips, to other
//     clients. The pool's other users get the switch too; a Store finds the pooler by itself
//     on a pool built without DetectPooler (see New).
//
// A pooler is found by the backend PID: the server's pg_backend_pid() differs from the PID the
// connection got at startup when something else answered the startup. It closes the connection
// before it returns. An error is the connection's (wrapped by NewPool); any other startup
// parameter a pooler refuses is a *PoolerError naming it.
func DetectPooler(ctx context.Context, cfg *pgxpool.Config) (bool, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if pe := poolerRefusal(err); pe != nil && pe.Setting == "statement_timeout" && cfg.ConnConfig.RuntimeParams["statement_timeout"] != "" {
		delete(cfg.ConnConfig.RuntimeParams, "statement_timeout")
		conn, err = pgx.ConnectConfig(ctx, cfg.ConnConfig)
	}
	if pe := poolerRefusal(err); pe != nil {
		return false, pe
	}
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	pooled, err := throughPooler(ctx, conn.PgConn())
	if err != nil {
		return false, err
	}
	if pooled && sessionBound(cfg.ConnConfig.DefaultQueryExecMode) {
		cfg.ConnConfig.DefaultQueryExecMode = poolerMode
	}
	return pooled, nil
}
