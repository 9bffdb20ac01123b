package pgstore

import (
	"context"

	"github.com/oncekey/oncekey/oncekeystore"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SetCommitHooks sets the hooks a Transactional commit runs (see beforeCommit and afterCommit)
// until the returned function restores none.
func SetCommitHooks(before func(ctx context.Context, conn *pgx.Conn), after func() error) (restore func()) {
	beforeCommit, afterCommit = before, after
	return func() { beforeCommit, afterCommit = nil, nil }
}

// NewAlwaysCoalesced returns a Store with Options.Coalesce that sends every claim and
// completion through the multi-row statements, a call alone too.
func NewAlwaysCoalesced(pool *pgxpool.Pool) *Store {
	s := New(pool, &Options{Coalesce: true})
	s.claims.Always, s.completes.Always = true, true
	return s
}

// NewCoalescedOneFlight returns a Store with Options.Coalesce that has at most one statement of
// a kind in flight: while one is, every other call of its kind queues.
func NewCoalescedOneFlight(pool *pgxpool.Pool) *Store {
	s := New(pool, &Options{Coalesce: true})
	s.claims.Flights, s.completes.Flights = 1, 1
	return s
}

// CoalesceStats returns the multi-row claim and complete statements sent so far and the calls
// they carried.
func (s *Store) CoalesceStats() (claimBatches, claimRows, completeBatches, completeRows int64) {
	return s.claims.Requests.Load(), s.claims.Calls.Load(), s.completes.Requests.Load(), s.completes.Calls.Load()
}

// CoalesceQueued returns the claims and completions waiting for the next statement, or -1 for
// a kind with no statement in flight.
func (s *Store) CoalesceQueued() (claims, completes int) {
	return s.claims.Queued(), s.completes.Queued()
}

// ListGrantsSQL returns the statement and arguments ListGrants runs for p.
func ListGrantsSQL(s *Store, p *oncekeystore.ListGrantsParams) (string, []any, error) {
	return s.listGrantsSQL(p)
}
