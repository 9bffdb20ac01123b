package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// SetCommitHooks sets the hooks a Transactional commit runs (see beforeCommit and afterCommit)
// until the returned function restores none.
func SetCommitHooks(before func(ctx context.Context, conn *pgx.Conn), after func() error) (restore func()) {
	beforeCommit, afterCommit = before, after
	return func() { beforeCommit, afterCommit = nil, nil }
}
