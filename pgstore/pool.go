package pgstore

import (
	"context"
	"strconv"
	"time"

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
// defaults, PGHOST, PGUSER and so on), applies ConfigurePool with opts, and pings the server
// once. An unreachable server is an error wrapping *oncekeystore.StoreUnavailableError; the pool is
// closed then. Pass the same opts to New.
func NewPool(ctx context.Context, connString string, opts *Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, wrapErr("connect", "", err)
	}
	ConfigurePool(cfg, opts)
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
