package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncekey/oncekey/oncekeystore"
)

// unavailable reports whether err means the database could not be reached, went away, or is
// refusing work for now: the caller must fail closed and may retry later.
func unavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection exception
			return true
		case strings.HasPrefix(pgErr.Code, "53"): // insufficient resources (53300 too many connections)
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdown, crash, cannot connect now
			return true
		case pgErr.Code == "57014": // query_canceled: statement timeout
			return true
		case pgErr.Code == "40001", pgErr.Code == "40P01": // serialization failure, deadlock
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "closed pool") || strings.Contains(err.Error(), "conn closed")
}

// wrapErr names the operation and wraps an unreachable database in
// *oncekeystore.StoreUnavailableError; a startup parameter a pooler refuses is a *PoolerError
// instead, which no retry helps.
func wrapErr(op, key string, err error) error {
	if pe := poolerRefusal(err); pe != nil {
		return named(op, key, pe)
	}
	if unavailable(err) {
		err = &oncekeystore.StoreUnavailableError{Op: op, Err: err}
	}
	return named(op, key, err)
}

// named prefixes err with the store, op and key (when not "").
func named(op, key string, err error) error {
	if key == "" {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return fmt.Errorf("pgstore: %s %s: %w", op, key, err)
}
