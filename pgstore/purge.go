package pgstore

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncekey/oncekey/oncekeystore"
)

// purgeStep is one step of Purge on one table: plan tells whether any row of the table meets
// the step's condition, and how large the table is; batch changes the rows meeting it in one
// range of pages.
type purgeStep struct {
	// plan returns (bool) whether a row meets the condition (an EXISTS the planner answers from
	// an index when the condition is selective), (bigint) the table's size in pages now, and
	// (float8) the rows per page by the planner's statistics (0 when the table was never
	// analysed).
	plan string
	// batch has $1 and $2, the first and the end (excluded) of a range of the table's tuple
	// IDs: a TID Range Scan of those pages, and the step's change to the rows meeting the
	// condition among them. The condition is repeated in the statement itself, so a row a
	// concurrent claim changed is checked again after the claim (EvalPlanQual) and is changed
	// only if it still meets it. It waits at most purgeLockTimeout for a row another
	// transaction holds; then it fails (lock_not_available) and changes nothing.
	batch string
	// skipLocked is batch for a range where batch met a row held by another transaction: it
	// first locks the rows meeting the condition with SKIP LOCKED (a second pass over them, so
	// it is used only then), leaving the held ones to the next run.
	skipLocked string
}

// defaultRowsPerPage is the rows per page Purge assumes for a table the planner has no
// statistics of yet (a small, new one): about a record of 200 bytes.
const defaultRowsPerPage = 40

// newPurgeStep returns the step on table (sanitized) changing the rows meeting cond with
// change, "DELETE FROM {t}" or "UPDATE {t} SET …".
func newPurgeStep(table, cond, change string) purgeStep {
	r := strings.NewReplacer("{t}", table, "{cond}", cond, "{rel}", quoteLiteral(table), "{async}", purgeAsync)
	return purgeStep{
		plan: r.Replace(`SELECT EXISTS (SELECT 1 FROM {t} WHERE {cond}),
    pg_relation_size({rel}::regclass) / current_setting('block_size')::bigint,
    CASE WHEN c.relpages > 0 AND c.reltuples > 0 THEN c.reltuples / c.relpages ELSE 0 END::float8
FROM pg_class c WHERE c.oid = {rel}::regclass`),
		batch: r.Replace(change + `
WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM {t}
        WHERE ctid >= $1::tid AND ctid < $2::tid AND {cond}
        LIMIT $3))
  AND {cond} AND (SELECT set_config('lock_timeout', '` + purgeLockTimeout + `', true)) IS NOT NULL AND {async}`),
		skipLocked: r.Replace(change + `
WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM {t}
        WHERE ctid >= $1::tid AND ctid < $2::tid AND {cond}
        LIMIT $3
        FOR UPDATE SKIP LOCKED))
  AND {cond} AND {async}`),
	}
}

// purgeLockTimeout is how long a purge batch waits for a row another transaction holds before
// it gives the range to purgeStep.skipLocked: longer than a claim's statement, short enough
// that the claims waiting for the rows the batch changed are not held long.
const purgeLockTimeout = "50ms"

// purgeWalk runs step over its table, adding the rows it changed to *count and its batches to
// res, pausing after each batch with pace.
func (s *Store) purgeWalk(ctx context.Context, p *oncekeystore.PurgeParams, pace *oncekeystore.PurgePacer, step purgeStep, count *int64, res *oncekeystore.PurgeResult) error {
	var (
		found   bool
		pages   int64
		perPage float64
	)
	err := s.call(ctx, func(ctx context.Context) error {
		return s.db().QueryRow(ctx, step.plan).Scan(&found, &pages, &perPage)
	})
	if err != nil {
		return s.wrapGrant(ctx, "purge", "", err)
	}
	if !found {
		return nil
	}
	if perPage <= 0 {
		perPage = defaultRowsPerPage
	}
	n := p.Batch()
	// Ranges of about 0.9 × n rows, so a range usually takes one statement, not a full one
	// and then one for the rest.
	span := max(1, int64(0.9*float64(n)/perPage))
	for first := int64(0); first < pages; {
		end := min(first+span, pages)
		start := time.Now()
		var done int64
		err := s.call(ctx, func(ctx context.Context) error {
			tag, err := s.db().Exec(ctx, step.batch, tid(first), tid(end), n)
			if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: a row held longer than purgeLockTimeout
				tag, err = s.db().Exec(ctx, step.skipLocked, tid(first), tid(end), n)
			}
			done = tag.RowsAffected()
			return err
		})
		if err != nil {
			return s.wrapGrant(ctx, "purge", "", err)
		}
		if done > 0 {
			*count += done
			res.Batches++
			if p.Progress != nil {
				p.Progress(*res)
			}
		}
		if done < int64(n) {
			first = end // else the range may hold more
		}
		if first < pages {
			if err := pace.Pause(ctx, time.Since(start)); err != nil {
				return wrapErr("purge", "", err)
			}
		}
	}
	return nil
}

// tid is the first tuple ID of page.
func tid(page int64) pgtype.TID {
	return pgtype.TID{BlockNumber: uint32(page), Valid: true}
}
