package pgstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncekey/oncekey"
)

// Coalescing (Options.Coalesce). Concurrent claims of one Store, and concurrent completions,
// go to Postgres as one statement each: one round trip, one parse and plan, one commit for
// many rows. There is no batching window. A call that finds no statement of its kind in flight
// sends its own at once, alone, on the same path as without coalescing; the calls that arrive
// while a statement is in flight queue, and when it returns the oldest queued call sends the
// whole queue as the next statement. So an idle store answers as fast as ever, and a busy one
// sends fewer, larger statements.
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
// More than one keeps the server busy while a statement waits for its commit to be flushed
// (Postgres flushes the commits of concurrent statements together): on the pinned benchmark
// with fsync on, 8 clients made 0.35 of pgbench's pairs per second with one in flight, 0.65
// with two and 1.01 with four (docs/benchmarks.md).
const coalesceFlights = 4

// waiter is one call waiting to go in a coalesced statement.
type waiter struct {
	ctx   context.Context
	args  []arg // the single-row statement's parameters (claimSQL's or completeSQL's)
	key   string
	bytes int // its result and failure
	done  chan struct{}

	// Set under coalescer.mu.
	taken bool      // in a statement (not in the queue any more)
	batch []*waiter // when this call sends the statement: the calls in it, this one first

	// Set by the call that sends the statement, before it closes done.
	rec               *oncekey.Record
	acquired, expired bool
	err               error
	alone             bool // the multi-row statement was refused: send your own
}

// coalescer queues the calls of one kind (claims, or completions) and sends them together.
type coalescer struct {
	mu sync.Mutex
	// flights is how many statements of this kind may be in flight at once; inFlight counts
	// them (with the calls about to send one).
	flights, inFlight int
	queue             []*waiter
	// many sends two or more calls as one statement and sets their results; a returned error
	// is the statement's.
	many func(ctx context.Context, batch []*waiter) error
	// batches and rows count the multi-row statements sent and the calls they carried.
	batches, rows atomic.Int64
	// always sends every call through many, one alone too (the tests' way to run the whole
	// conformance suite on the multi-row statements).
	always bool
}

// do runs w's call: alone (by one, on the caller's ctx) if nothing of its kind is in flight,
// else in the next statement. It returns when w's result is set; w.alone means the caller runs
// one itself.
func (c *coalescer) do(ctx context.Context, w *waiter, one func(ctx context.Context) error) error {
	w.ctx, w.done = ctx, make(chan struct{})
	c.mu.Lock()
	switch {
	case c.inFlight < c.flights && !c.always:
		c.inFlight++
		c.mu.Unlock()
		err := one(ctx)
		c.handOff()
		return err
	case c.inFlight < c.flights:
		c.inFlight++
		w.taken, w.batch = true, []*waiter{w}
		close(w.done)
	default:
		c.queue = append(c.queue, w)
	}
	c.mu.Unlock()

	select {
	case <-w.done:
	case <-ctx.Done():
		c.mu.Lock()
		if !w.taken {
			// Still queued: leave, nothing was sent.
			for i, q := range c.queue {
				if q == w {
					c.queue = append(c.queue[:i:i], c.queue[i+1:]...)
					break
				}
			}
			c.mu.Unlock()
			return ctx.Err()
		}
		leads := w.batch != nil
		c.mu.Unlock()
		if !leads {
			// In a statement in flight: it may still write this call's row.
			return ctx.Err()
		}
		<-w.done
	}
	if w.batch != nil {
		c.send(w.batch, one)
		c.handOff()
	}
	if w.alone {
		return one(ctx)
	}
	return w.err
}

// handOff passes the turn on when a statement returned: the oldest queued call sends the next
// one, with every queued call for another key (up to the bounds), or nobody is busy any more.
func (c *coalescer) handOff() {
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.inFlight--
		c.mu.Unlock()
		return
	}
	var batch, rest []*waiter
	keys := make(map[string]bool, len(c.queue))
	bytes := 0
	for _, w := range c.queue {
		if len(batch) == coalesceMaxRows || keys[w.key] || (len(batch) > 0 && bytes+w.bytes > coalesceMaxBytes) {
			rest = append(rest, w)
			continue
		}
		keys[w.key] = true
		bytes += w.bytes
		w.taken = true
		batch = append(batch, w)
	}
	c.queue = rest
	lead := batch[0]
	lead.batch = batch
	c.mu.Unlock()
	close(lead.done)
}

// send sends batch (its first call is the caller's) and sets every call's result, waking all
// but the first. Calls whose context has ended are left out with its error; a batch of one goes
// alone on that call's own context.
func (c *coalescer) send(batch []*waiter, one func(ctx context.Context) error) {
	lead := batch[0]
	live := batch[:0:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.err = err
			continue
		}
		live = append(live, w)
	}
	defer func() {
		for _, w := range batch[1:] {
			close(w.done)
		}
	}()
	switch len(live) {
	case 0:
		return
	case 1:
		if !c.always {
			live[0].alone = true
			return
		}
	}
	// The statement runs until every call in it has given up (or its own timeout, see
	// Store.call), not until the first has: the others still want their rows.
	ctx, cancel := context.WithCancel(context.WithoutCancel(lead.ctx))
	defer cancel()
	var left atomic.Int64
	left.Store(int64(len(live)))
	for _, w := range live {
		stop := context.AfterFunc(w.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	c.batches.Add(1)
	c.rows.Add(int64(len(live)))
	err := c.many(ctx, live)
	switch {
	case err == nil:
	case refused(err):
		for _, w := range live {
			w.alone, w.rec, w.err = true, nil, nil
		}
	default:
		for _, w := range live {
			w.err = err
		}
	}
}

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
	s.claims = &coalescer{many: s.claimMany, flights: coalesceFlights}
	s.completes = &coalescer{many: s.completeMany, flights: coalesceFlights}
}

// claimVia runs a claim (claimSQL's args) coalesced if the store coalesces, else alone.
func (s *Store) claimVia(ctx context.Context, args []arg) (*oncekey.Record, bool, bool, error) {
	if s.claims == nil {
		return s.claimOne(ctx, args)
	}
	w := &waiter{args: args, key: args[0].s + "\x00" + args[1].s}
	var (
		r                 *oncekey.Record
		acquired, expired bool
	)
	err := s.claims.do(ctx, w, func(ctx context.Context) error {
		var err error
		r, acquired, expired, err = s.claimOne(ctx, args)
		return err
	})
	if err == nil && r == nil {
		r, acquired, expired = w.rec, w.acquired, w.expired
	}
	return r, acquired, expired, err
}

// writeVia runs a fenced write: a completion coalesced if the store coalesces, anything else
// (and every write of a store that does not) alone.
func (s *Store) writeVia(ctx context.Context, query *stmt, args []arg) (*oncekey.Record, error) {
	if s.completes == nil || query != s.completeSQL {
		return s.writeOne(ctx, query, args)
	}
	w := &waiter{args: args, key: args[0].s + "\x00" + args[1].s, bytes: len(args[4].b) + len(args[5].b)}
	var r *oncekey.Record
	err := s.completes.do(ctx, w, func(ctx context.Context) error {
		var err error
		r, err = s.writeOne(ctx, query, args)
		return err
	})
	if err == nil && r == nil {
		r, err = w.rec, w.err
	}
	return r, err
}

// column returns the i-th parameter of every call in batch, as the array unnest takes.
func column[T any](batch []*waiter, i int, get func(arg) T) []T {
	out := make([]T, len(batch))
	for j, w := range batch {
		out[j] = get(w.args[i])
	}
	return out
}

func argText(a arg) string    { return a.s }
func argBigint(a arg) int64   { return a.i }
func argSmallint(a arg) int16 { return int16(a.i) }
func argBytea(a arg) []byte   { return a.b }

// claimMany sends the claims of batch as one statement (claimManySQL).
func (s *Store) claimMany(ctx context.Context, batch []*waiter) error {
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
		for _, w := range batch {
			w.rec, w.acquired, w.expired = nil, false, false
		}
		err := s.queryMany(ctx, s.claimManySQL, params, batch, func(w *waiter, d *recordDest, token int64, past bool) {
			w.rec = d.record()
			w.acquired = token == w.args[11].i && w.rec.Status == oncekey.StatusPending
			w.expired = past
		}, true)
		if err != nil {
			return err
		}
		for _, w := range batch {
			if w.rec == nil {
				// Every row of an upsert is returned; a call without one is sent again alone.
				w.alone = true
			}
		}
		return nil
	})
}

// completeMany sends the completions of batch as one statement (completeManySQL). A call whose
// row did not change (another epoch, not pending, no record) gets pgx.ErrNoRows, as alone.
func (s *Store) completeMany(ctx context.Context, batch []*waiter) error {
	params := []any{column(batch, 0, argText), column(batch, 1, argText), column(batch, 2, argBigint),
		column(batch, 3, argText), column(batch, 4, argBytea), column(batch, 5, argBytea), column(batch, 6, argText)}
	return s.call(ctx, func(ctx context.Context) error {
		for _, w := range batch {
			w.rec, w.err = nil, nil
		}
		err := s.queryMany(ctx, s.completeManySQL, params, batch, func(w *waiter, d *recordDest, _ int64, _ bool) {
			w.rec = d.record()
		}, false)
		if err != nil {
			return err
		}
		for _, w := range batch {
			if w.rec == nil {
				w.err = pgx.ErrNoRows
			}
		}
		return nil
	})
}

// queryMany runs a multi-row statement returning whole records (tenant and key first, then,
// with claim, the claim token and past_retention) and hands each row to set with the call of
// its key.
func (s *Store) queryMany(ctx context.Context, sql string, params []any, batch []*waiter,
	set func(w *waiter, d *recordDest, token int64, past bool), claim bool) error {
	byKey := make(map[string]*waiter, len(batch))
	for _, w := range batch {
		byKey[w.key] = w
	}
	rows, err := s.pool.Query(ctx, sql, params...)
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
		if w := byKey[d.r.Tenant+"\x00"+d.r.OperationKey]; w != nil {
			set(w, &d, token, past)
		}
	}
	return rows.Err()
}
