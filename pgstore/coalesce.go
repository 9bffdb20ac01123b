package pgstore

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncekey/oncekey/internal/coalesce"
	"github.com/oncekey/oncekey/oncekeystore"
)

// Coalescing (Options.Coalesce). Concurrent claims of one Store, and concurrent completions,
// go to Postgres as one statement each: one round trip, one parse and plan, one commit for
// many rows. There is no batching window. A call that finds fewer than coalesceFlights
// statements of its kind in flight sends its own at once, alone, on the same path as without
// coalescing; the calls that arrive while that many are in flight queue, and when one returns
// the oldest queued call sends the queue as the next statement (internal/coalesce). So an idle
// store answers as fast as ever, and a busy one sends fewer, larger statements.
//
// Each row of a multi-row statement gives its own call's verdict: the rows are matched to the
// calls by (tenant, operation key), and a statement takes a key at most once (a second call for
// the same key waits for the next statement, as Postgres's ON CONFLICT DO UPDATE cannot touch a
// row twice). Parameters are validated by each call before it queues, so a bad call never
// reaches a statement. If Postgres refuses a multi-row statement (a deadlock with another
// process's, a value it cannot store), nothing of it was committed and every call in it sends
// its own statement instead, so one row cannot fail its neighbours. Any other failure (the
// connection lost while the statement ran) is each call's error, as it would be alone: an
// ambiguous outcome, which ClaimParams.ClaimToken makes safe to repeat.
//
// A call whose context ends while it waits in the queue leaves it and sends nothing. One whose
// context ends while its statement is in flight returns at once with the context's error, but
// the statement is canceled only when every call in it has given up, so its row may still be
// written (as when a statement is canceled too late).

// Bounds of one multi-row statement.
const (
	coalesceMaxRows  = 256
	coalesceMaxBytes = 1 << 20 // results and failures of the completions in one statement
)

// coalesceFlights is how many statements of one kind (claims, completions) a Store has in
// flight at once. A call that finds fewer goes alone; the others queue for the next to return.
// Two keep the server busy while a statement waits for its commit to be flushed (Postgres flushes
// the commits of concurrent statements together) and leave the calls that arrive meanwhile to
// queue into larger statements. On the pinned benchmark with fsync on (docs/benchmarks.md), 32
// clients made 2.26 of pgbench's pairs per second with one in flight, 2.28 with two, 2.00 with
// three and 1.75 with four; 8 clients made 0.87 to 0.94 with any of them.
const coalesceFlights = 2

// claimOut is a claim's answer: the record, whether the claim acquired it, and whether it is
// past retention.
type claimOut struct {
	rec               *oncekeystore.Record
	acquired, expired bool
}

type (
	claimCall    = coalesce.Call[[]arg, claimOut]
	completeCall = coalesce.Call[[]arg, *oncekeystore.Record]
)

// refused reports whether Postgres refused a multi-row statement itself (its transaction rolled
// back, nothing written) for a reason that may lie in one row, or in running it beside another:
// its calls are then sent alone. A canceled statement, a timeout or an unreachable server is
// every call's error instead.
func refused(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == "40P01" || pgErr.Code == "40001" || !unavailable(err)
}

// coalesceSQL makes the multi-row statements and the coalescers (Options.Coalesce).
func (s *Store) coalesceSQL() {
	// The rows of a claim statement are the calls' parameters as arrays (unnest), in key order,
	// so that two statements lock the rows they share in the same order. claimSQL's RETURNING
	// compares the stored claim token with $12; here each call compares it with its own.
	s.claimManySQL = claimUpsert(s.table, `SELECT b.tenant, b.key, b.tool, b.version, b.fingerprint, b.workflow_id, b.step_id,
    b.effect, 'pending', 1, now() + b.lease * interval '1 microsecond', b.token, now(), now(),
    now() + b.retention * interval '1 microsecond',
    now() + b.retention * interval '1 microsecond' + b.tombstone * interval '1 microsecond', b.namespace
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::smallint[],
    $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::text[])
    AS b(tenant, key, tool, version, fingerprint, workflow_id, step_id, effect, lease, retention, tombstone, token, namespace)
ORDER BY b.tenant, b.key
`) + `RETURNING tenant, operation_key, ` + keyedCols + `, coalesce(claim_token, 0), ` + pastRetention + ` AS past_retention`
	// The completions' columns are named b_… so that the record's columns in SET and RETURNING
	// are the table's without qualifying them.
	s.completeManySQL = strings.NewReplacer("{t}", s.table, "{cols}", keyedCols).Replace(
		`UPDATE {t} SET status = b_status, result = b_result, failure = b_failure, effect_ref = b_ref, lease_until = NULL,
    updated_at = now(), ` + settleRetention + `
FROM (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bytea[], $6::bytea[], $7::text[])
    AS b(b_tenant, b_key, b_epoch, b_status, b_result, b_failure, b_ref) ORDER BY b_tenant, b_key) AS b
WHERE tenant = b_tenant AND operation_key = b_key AND epoch = b_epoch AND status = 'pending'
RETURNING tenant, operation_key, {cols}`)
	s.claims = &coalesce.Queue[[]arg, claimOut]{Flights: coalesceFlights, MaxCalls: coalesceMaxRows,
		One: s.claimOne, Key: callKey, Many: s.claimMany, Refused: refused}
	s.completes = &coalesce.Queue[[]arg, *oncekeystore.Record]{Flights: coalesceFlights, MaxCalls: coalesceMaxRows,
		MaxBytes: coalesceMaxBytes, One: s.completeOne, Key: callKey, Size: completeSize, Many: s.completeMany, Refused: refused}
}

// callKey is the key a call writes: its tenant and operation key ($1 and $2).
func callKey(args []arg) string { return args[0].s + "\x00" + args[1].s }

// completeSize is a completion's size: its result and failure ($5 and $6).
func completeSize(args []arg) int { return len(args[4].b) + len(args[5].b) }

// claimOne sends a claim alone (claimSQL).
func (s *Store) claimOne(ctx context.Context, args []arg) (claimOut, error) {
	r, acquired, expired, err := s.claimWith(ctx, s.claimSQL, args)
	return claimOut{r, acquired, expired}, err
}

// completeOne sends a completion alone (completeSQL).
func (s *Store) completeOne(ctx context.Context, args []arg) (*oncekeystore.Record, error) {
	return s.writeOne(ctx, s.completeSQL, args)
}

// claimVia runs a claim (claimSQL's args) coalesced if the store coalesces, else alone.
func (s *Store) claimVia(ctx context.Context, args []arg) (*oncekeystore.Record, bool, bool, error) {
	if s.claims == nil {
		return s.claimWith(ctx, s.claimSQL, args)
	}
	out, err := s.claims.Do(ctx, args)
	return out.rec, out.acquired, out.expired, err
}

// writeVia runs a fenced write: a completion coalesced if the store coalesces, anything else
// (and every write of a store that does not) alone.
func (s *Store) writeVia(ctx context.Context, query *stmt, args []arg) (*oncekeystore.Record, error) {
	if s.completes == nil || query != s.completeSQL {
		return s.writeOne(ctx, query, args)
	}
	return s.completes.Do(ctx, args)
}

// column returns the i-th parameter of every call in batch, as the array unnest takes.
func column[T, Out any](batch []*coalesce.Call[[]arg, Out], i int, get func(arg) T) []T {
	out := make([]T, len(batch))
	for j, c := range batch {
		out[j] = get(c.In[i])
	}
	return out
}

func argText(a arg) string    { return a.s }
func argBigint(a arg) int64   { return a.i }
func argSmallint(a arg) int16 { return int16(a.i) }
func argBytea(a arg) []byte   { return a.b }

// claimMany sends the claims of batch as one statement (claimManySQL).
func (s *Store) claimMany(ctx context.Context, batch []*claimCall) error {
	params := make([]any, 13)
	for i := range params {
		switch i {
		case 7:
			params[i] = column(batch, i, argSmallint)
		case 8, 9, 10, 11:
			params[i] = column(batch, i, argBigint)
		default:
			params[i] = column(batch, i, argText)
		}
	}
	return s.call(ctx, func(ctx context.Context) error {
		for _, c := range batch {
			c.Out = claimOut{}
		}
		err := queryMany(ctx, s, s.claimManySQL, params, batch, func(c *claimCall, d *recordDest, token int64, past bool) {
			rec := d.record()
			c.Out = claimOut{rec: rec, acquired: token == c.In[11].i && rec.Status == oncekeystore.StatusPending, expired: past}
		}, true)
		if err != nil {
			return err
		}
		for _, c := range batch {
			// Every row of an upsert is returned; a call without one is sent again alone.
			c.Alone = c.Out.rec == nil
		}
		return nil
	})
}

// completeMany sends the completions of batch as one statement (completeManySQL). A call whose
// row did not change (another epoch, not pending, no record) gets pgx.ErrNoRows, as alone.
func (s *Store) completeMany(ctx context.Context, batch []*completeCall) error {
	params := []any{column(batch, 0, argText), column(batch, 1, argText), column(batch, 2, argBigint),
		column(batch, 3, argText), column(batch, 4, argBytea), column(batch, 5, argBytea), column(batch, 6, argText)}
	return s.call(ctx, func(ctx context.Context) error {
		for _, c := range batch {
			c.Out, c.Err = nil, nil
		}
		err := queryMany(ctx, s, s.completeManySQL, params, batch, func(c *completeCall, d *recordDest, _ int64, _ bool) {
			c.Out = d.record()
		}, false)
		if err != nil {
			return err
		}
		for _, c := range batch {
			if c.Out == nil {
				c.Err = pgx.ErrNoRows
			}
		}
		return nil
	})
}

// queryMany runs a multi-row statement returning whole records (tenant and key first, then,
// with claim, the claim token and past_retention) and hands each row to set with the call of
// its key.
func queryMany[Out any](ctx context.Context, s *Store, sql string, params []any, batch []*coalesce.Call[[]arg, Out],
	set func(c *coalesce.Call[[]arg, Out], d *recordDest, token int64, past bool), claim bool) error {
	byKey := make(map[string]*coalesce.Call[[]arg, Out], len(batch))
	for _, c := range batch {
		byKey[c.Key] = c
	}
	rows, err := s.db().Query(ctx, sql, params...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			d     recordDest
			buf   recordDests
			token int64
			past  bool
		)
		var dest []any
		if claim {
			dest = d.bind(&buf, false, &token, &past)
		} else {
			dest = d.bind(&buf, false)
		}
		if err := scanRow(rows.FieldDescriptions(), rows.RawValues(), rows.Conn().TypeMap(), dest, nil); err != nil {
			return err
		}
		if c := byKey[d.r.Tenant+"\x00"+d.r.OperationKey]; c != nil {
			set(c, &d, token, past)
		}
	}
	return rows.Err()
}
