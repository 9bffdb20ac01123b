package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncekey/oncekey/internal/coalesce"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore/internal/benchsql"
)

// Defaults of Options.
const (
	DefaultMaxResultBytes   = 16 << 20
	DefaultStatementTimeout = 10 * time.Second
)

// Options configure a Store. A nil *Options or a zero field means the default.
type Options struct {
	// Coalesce sends concurrent claims of this Store to Postgres together, and concurrent
	// completions: the calls that arrive while statements of their kind are in flight (two at
	// most) go in the next, as one multi-row statement and one commit (see coalesce.go). A call
	// that finds fewer in flight is sent at once, alone, as without it. Each call still gets its
	// own verdict and its own error; a statement Postgres refuses sends its calls again alone.
	// A call whose context ends while its statement is in flight returns at once with the
	// context's error, but the statement goes on for the other calls in it, so that call's row
	// may still be written. Defaults to false.
	Coalesce bool

	// MaxResultBytes is the largest Result or Failure (each) the store accepts; a larger one is
	// refused with *oncekeystore.ResultTooLargeError before anything is sent, and nothing changes.
	// The interceptor enforces the tighter Policy.MaxResultBytes (1 MiB by default) first; this
	// is the store's own guard. Defaults to 16 MiB.
	MaxResultBytes int

	// Schema is the Postgres schema holding the table oncekey_operations; it must have been
	// migrated with MigrateSchema(ctx, pool, Schema). Defaults to "", which means unqualified
	// names resolved through the connection's search_path (Migrate uses the same). If the table
	// is not there, every call fails with an error wrapping *oncekeystore.StoreSchemaError (not
	// retryable); Store.Check finds it at startup.
	Schema string

	// StatementTimeout bounds each store call (one statement, or two on an error path). When it
	// passes, pgx cancels the statement on the server and the call fails with an error wrapping
	// *oncekeystore.StoreUnavailableError and context.DeadlineExceeded. A server-side limit can be
	// added with the connection parameter statement_timeout. Defaults to 10s; negative means no
	// limit beyond the caller's context.
	StatementTimeout time.Duration

	// TxPool is the pool the transactions of Transactional tools begin on (BeginTx; the body
	// gets it from pgstore.Tx). It must reach the database holding the store's table, which the
	// completion is written to in the same transaction: give it when the tool's writes need
	// another role or search_path than the store's. Size it for the Transactional bodies that
	// run at once, since each holds one connection while it runs. Defaults to the store's pool.
	TxPool *pgxpool.Pool
}

// Store is the Postgres oncekeystore.Store. It is safe for concurrent use and holds no connection
// of its own: every call borrows one from the pool, so a Store outlives database restarts.
type Store struct {
	pool     *pgxpool.Pool
	txPool   *pgxpool.Pool // Options.TxPool, or pool
	maxBytes int
	timeout  time.Duration
	schema   string // Options.Schema
	table    string
	// approvalTable is the approvals table (oncekey_approvals, in Options.Schema if set).
	approvalTable string
	prepare       bool            // the pool's connections run in QueryExecModeCacheStatement: see queryRecord
	tracer        pgx.QueryTracer // the pool's tracer, called for prepared statements run with pgconn
	// route and txRoute say whether pool and txPool reach Postgres through a pooler in front
	// of which their mode fails (pooler.go); txRoute is route when txPool is pool.
	route, txRoute *route

	claimSQL, claimTxSQL, renewSQL, handOffSQL, completeSQL, releaseSQL, unknownSQL, resolveSQL, resolveSignedSQL, getSQL *stmt
	forgetSQL, previewSQL, statsSQL, unsettledSQL                                                                         string
	tombstoneStep, deleteStep, purgeApprovalsStep, purgeGrantsStep                                                        purgeStep
	// The approval statements (approval.go) run through pgx's own statement cache.
	requestApprovalSQL, decideApprovalSQL, cosignApprovalSQL, getApprovalSQL string

	// outboxTable is the outbox (oncekey_outbox, in Options.Schema if set; outbox.go).
	outboxTable string
	// claims and completes gather concurrent calls into one statement (Options.Coalesce;
	// nil without it): see coalesce.go.
	claims                        *coalesce.Queue[[]arg, claimOut]
	completes                     *coalesce.Queue[[]arg, *oncekeystore.Record]
	claimManySQL, completeManySQL string
}

var (
	_ oncekeystore.Store          = (*Store)(nil)
	_ oncekeystore.StoreInspector = (*Store)(nil)
)

// New returns a Store on pool. opts may be nil. The pool's schema must be migrated (Migrate or
// MigrateSchema) before the first call; Check tells whether it is. A call that finds the table
// missing or older than this build returns an error wrapping *oncekeystore.StoreSchemaError, and works
// as soon as the schema is migrated, without a new Store.
func New(pool *pgxpool.Pool, opts *Options) *Store {
	s := &Store{pool: pool, txPool: pool, maxBytes: DefaultMaxResultBytes, timeout: DefaultStatementTimeout, table: "oncekey_operations",
		approvalTable: "oncekey_approvals", outboxTable: "oncekey_outbox"}
	if pool != nil {
		cfg := pool.Config().ConnConfig
		s.prepare, s.tracer = cfg.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement, cfg.Tracer
	}
	if opts != nil {
		if opts.MaxResultBytes > 0 {
			s.maxBytes = opts.MaxResultBytes
		}
		if opts.StatementTimeout != 0 {
			s.timeout = opts.StatementTimeout
		}
		if opts.TxPool != nil {
			s.txPool = opts.TxPool
		}
		if opts.Schema != "" {
			s.schema = opts.Schema
			s.table = pgx.Identifier{opts.Schema, "oncekey_operations"}.Sanitize()
			s.approvalTable = pgx.Identifier{opts.Schema, "oncekey_approvals"}.Sanitize()
			s.outboxTable = pgx.Identifier{opts.Schema, "oncekey_outbox"}.Sanitize()
		}
	}
	s.route, s.txRoute = newRoute(s.pool), newRoute(s.txPool)
	if s.txPool == s.pool {
		s.txRoute = s.route
	}
	s.approvalSQL(s.approvalTable)
	if opts != nil && opts.Coalesce {
		s.coalesceSQL()
	}
	s.claimSQL = newStmt(claimStmt(s.table), text, text, text, text, text, text, text, smallint, bigint, bigint, bigint, bigint, text)
	s.claimTxSQL = newStmt(transactionalClaimStmt(s.table), text, text, text, text, text, text, text, smallint, bigint, bigint, bigint, bigint, text)
	r := strings.NewReplacer("{t}", s.table, "{cols}", keyedCols)
	s.renewSQL = newStmt(r.Replace(`UPDATE {t} SET lease_until = now() + $4::bigint * interval '1 microsecond', updated_at = now()
WHERE tenant = $1 AND operation_key = $2 AND epoch = $3 AND status = 'pending'
RETURNING {cols}`), text, text, bigint, bigint)
	s.completeSQL = newStmt(completeStmt(s.table), text, text, bigint, text, bytea, bytea, text)
	s.handOffSQL = newStmt(r.Replace(`UPDATE {t} SET lease_until = now() + $4::bigint * interval '1 microsecond', failure = $5, updated_at = now()
WHERE tenant = $1 AND operation_key = $2 AND epoch = $3 AND status = 'pending'
RETURNING {cols}`), text, text, bigint, bigint, bytea)
	s.releaseSQL = newStmt(r.Replace(`UPDATE {t} SET status = 'released', lease_until = NULL, updated_at = now(), `+settleRetention+`
WHERE tenant = $1 AND operation_key = $2 AND epoch = $3 AND status = 'pending'
RETURNING {cols}`), text, text, bigint)
	s.unknownSQL = newStmt(r.Replace(`UPDATE {t} SET status = 'unknown', failure = $4, lease_until = NULL, updated_at = now()
WHERE tenant = $1 AND operation_key = $2 AND epoch = $3 AND status = 'pending'
RETURNING {cols}`), text, text, bigint, bytea)
	s.resolveSQL = newStmt(r.Replace(`UPDATE {t} SET status = $3, result = $4, failure = $5, effect_ref = $6, resolved_by = $7,
    note = $8, lease_until = NULL, updated_at = now(), `+settleRetention+`
WHERE tenant = $1 AND operation_key = $2 AND epoch = $9
  AND (status = 'unknown' OR (status = 'pending' AND lease_until <= now()))
RETURNING {cols}`), text, text, text, bytea, bytea, text, text, text, bigint)
	// A signed resolution also keeps its statement, with the epoch it settles
	// (ResolutionSignature); an unsigned one leaves the columns alone, so that it works on a
	// schema migrated before 010_decision_signatures.
	s.resolveSignedSQL = newStmt(r.Replace(`UPDATE {t} SET status = $3, result = $4, failure = $5, effect_ref = $6, resolved_by = $7,
    note = $8, signature = $10, signature_epoch = epoch, lease_until = NULL, updated_at = now(), `+settleRetention+`
WHERE tenant = $1 AND operation_key = $2 AND epoch = $9
  AND (status = 'unknown' OR (status = 'pending' AND lease_until <= now()))
RETURNING {cols}`), text, text, text, bytea, bytea, text, text, text, bigint, bytea)
	s.getSQL = newStmt(r.Replace(`SELECT {cols}, `+pastRetention+` FROM {t} WHERE tenant = $1 AND operation_key = $2`), text, text)
	// Purge walks the table in ranges of pages (purgeSteps), each batch one statement.
	r = strings.NewReplacer("{t}", s.table, "{a}", s.approvalTable, "{tombstone}", tombstoneWhere, "{delete}", deleteWhere,
		"{unsettled}", unsettledWhere, "{approvalExpired}", approvalExpiredWhere, "{g}", s.grantTable(), "{grantPurge}", grantPurgeWhere)
	s.tombstoneStep = newPurgeStep(s.table, tombstoneWhere, `UPDATE {t} SET status = 'expired', result = NULL, failure = NULL, effect_ref = '', note = '',
    lease_until = NULL, claim_token = NULL, updated_at = now()`)
	s.deleteStep = newPurgeStep(s.table, deleteWhere, `DELETE FROM {t}`)
	s.previewSQL = r.Replace(`SELECT now(), count(*) FILTER (WHERE {tombstone}), count(*) FILTER (WHERE {delete}),
    count(*) FILTER (WHERE {unsettled}), min(created_at) FILTER (WHERE {unsettled}),
    (SELECT count(*) FROM {a} WHERE {approvalExpired}), (SELECT count(*) FROM {g} WHERE {grantPurge}) FROM {t}`)
	s.unsettledSQL = r.Replace(`SELECT count(*), min(created_at) FROM {t} WHERE {unsettled}`)
	s.statsSQL = strings.ReplaceAll(`SELECT tenant, tool, status, count(*), min(updated_at) FROM {t}
WHERE $1 = '' OR tenant = $1 GROUP BY tenant, tool, status ORDER BY tenant, tool, status`, "{t}", s.table)
	// Forget is one statement over the four tables: the tenant's records, approvals, outbox
	// messages and standing grants go together. Deleting a grant waits for an ApproveByGrant
	// holding it (FOR SHARE), as a revoke does: once Forget returns, none approves anything.
	s.forgetSQL = strings.NewReplacer("{o}", s.outboxTable, "{g}", s.grantTable()).Replace(r.Replace(`WITH r AS (DELETE FROM {t} WHERE tenant = $1 RETURNING 1),
     a AS (DELETE FROM {a} WHERE tenant = $1 RETURNING 1),
     o AS (DELETE FROM {o} WHERE tenant = $1),
     g AS (DELETE FROM {g} WHERE tenant = $1 RETURNING 1)
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM a), (SELECT count(*) FROM g)`))
	s.purgeGrantsStep = newPurgeStep(s.grantTable(), grantPurgeWhere, `DELETE FROM {t}`)
	return s
}

// The conditions of the two purge steps, shared by Purge and PurgePreview. A settled record
// (applied, failed, released) past retention becomes a tombstone unless its tombstone window is
// over too (the delete step takes it). A record past its tombstone window is deleted unless it is
// unsettled. Unsettled records (pending, unknown: no outcome is known yet) are never purged,
// whatever their age: they wait for their owner or for reconciliation, and their retention counts
// from when they settle (the settling statements move expires_at and tombstone_until).
// unsettledWhere names the ones Purge leaves past their retention, which it reports.
const (
	tombstoneWhere = `(expires_at <= now() AND status IN ('applied', 'failed', 'released') AND tombstone_until > now())`
	deleteWhere    = `(tombstone_until <= now() AND status NOT IN ('pending', 'unknown'))`
	unsettledWhere = `(expires_at <= now() AND status IN ('pending', 'unknown'))`
	// pastRetention is whether a row is past retention: a tombstone, or a settled record past
	// expires_at. An unsettled record never is.
	pastRetention = `(status = 'expired' OR (expires_at <= now() AND status NOT IN ('pending', 'unknown')))`
	// purgeAsync, a condition of every purge batch, makes the batch's commit not wait for its
	// WAL flush (synchronous_commit off for that transaction alone; an uncorrelated subquery,
	// so it runs once, when the first row is changed). A purge changes only what nobody waits
	// for: a crash can undo its last batches (at most wal_writer_delay's worth, three times
	// that at worst), and the next run does them again. Without it every batch of
	// PurgeParams.BatchSize rows waits for a flush of its own, and a purge of a million records
	// takes thousands of them.
	purgeAsync = `(SELECT set_config('synchronous_commit', 'off', true)) = 'off'`
	// settleRetention restarts the retention and tombstone windows from now, with the lengths the
	// claim gave them, in a statement that settles a record.
	settleRetention = `expires_at = now() + (expires_at - created_at), tombstone_until = now() + (tombstone_until - created_at)`
)

// claimStmt returns the claim statement for table (a sanitized, possibly schema-qualified name).
// Benchmarks run the identical statement through pgbench (package internal/benchsql).
//
// Parameters: $1 tenant, $2 operation key, $3 tool, $4 version, $5 fingerprint, $6 workflow ID,
// $7 step ID, $8 effect (smallint), $9 lease, $10 retention, $11 tombstone (all three in
// microseconds), $12 claim token (ClaimParams.ClaimToken, or a random bigint), $13 namespace. The statement inserts a pending record or,
// on conflict, rewrites the existing row with a CASE per column: every column keeps its value
// unless a transition applies, so a claim that finds a live, settled, mismatched or expired
// record changes nothing. RETURNING reports the row after the statement (keyedCols: all but the
// tenant and key, which are $1 and $2) plus whether this
// claim's token is the one stored on a pending row (acquired: this claim inserted or took the row
// over now, or it is the repeat of the claim that did and the lease is still live) and whether the
// row is past retention.
func claimStmt(table string) string { return claimSQL(table, "$13") }

// transactionalClaimStmt returns the claim statement of Transactional tools for table: claimStmt
// whose transaction commits without waiting for its WAL flush (synchronous_commit off, set by
// set_config in the row it inserts). Nothing depends on that commit's durability but the body's
// transaction, which commits after it, synchronously: WAL is flushed in order, so the body's
// commit, once durable, makes the claim durable too, and a crash before it loses a claim whose
// body committed nothing. Each call then waits for one WAL flush (the body's) instead of two.
// Benchmarks run the identical statement through pgbench (package internal/benchsql).
func transactionalClaimStmt(table string) string {
	return claimSQL(table, "($13 || left(set_config('synchronous_commit', 'off', true), 0))")
}

// claimSQL is claimStmt with ns as the namespace column's value.
func claimSQL(table, ns string) string {
	return claimUpsert(table, `VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', 1,
    now() + $9::bigint * interval '1 microsecond', $12, now(), now(),
    now() + $10::bigint * interval '1 microsecond',
    now() + $10::bigint * interval '1 microsecond' + $11::bigint * interval '1 microsecond', `+ns+`)
`) +
		`RETURNING ` + keyedCols + `, coalesce(claim_token = $12 AND status = 'pending', false) AS acquired, ` + pastRetention + ` AS past_retention`
}

// claimUpsert returns the claim's INSERT ... ON CONFLICT DO UPDATE into table of the rows of
// source (a VALUES list or a SELECT of the columns in the order of the INSERT's), without its
// RETURNING: claimStmt's and the coalesced claim's (coalesce.go).
func claimUpsert(table, source string) string {
	// The conditions are evaluated on the existing row (o) and the proposed row (EXCLUDED).
	const (
		free = `(o.tombstone_until <= now() AND o.status NOT IN ('pending', 'unknown'))`
		same = `((o.status IN ('pending', 'unknown') OR (o.tombstone_until > now() AND o.expires_at > now() AND o.status <> 'expired')) AND o.fingerprint = EXCLUDED.fingerprint)`
		take = `(` + free + ` OR (` + same + ` AND (o.status = 'released' OR (o.status = 'pending' AND o.lease_until <= now() AND o.effect IN (2, 4)))))`
		unk  = `(` + same + ` AND o.status = 'pending' AND o.lease_until <= now() AND o.effect = 3)`
	)
	r := strings.NewReplacer("{t}", table, "{source}", source, "{free}", free, "{take}", take, "{unk}", unk)
	return r.Replace(`INSERT INTO {t} AS o (tenant, operation_key, tool, version, fingerprint, workflow_id, step_id,
    effect, status, epoch, lease_until, claim_token, created_at, updated_at, expires_at, tombstone_until, namespace)
{source}ON CONFLICT (tenant, operation_key) DO UPDATE SET
    namespace       = CASE WHEN {free} THEN EXCLUDED.namespace ELSE o.namespace END,
    tool            = CASE WHEN {free} THEN EXCLUDED.tool ELSE o.tool END,
    version         = CASE WHEN {free} THEN EXCLUDED.version ELSE o.version END,
    fingerprint     = CASE WHEN {free} THEN EXCLUDED.fingerprint ELSE o.fingerprint END,
    workflow_id     = CASE WHEN {free} THEN EXCLUDED.workflow_id ELSE o.workflow_id END,
    step_id         = CASE WHEN {free} THEN EXCLUDED.step_id ELSE o.step_id END,
    created_at      = CASE WHEN {free} THEN EXCLUDED.created_at ELSE o.created_at END,
    expires_at      = CASE WHEN {free} THEN EXCLUDED.expires_at ELSE o.expires_at END,
    tombstone_until = CASE WHEN {free} THEN EXCLUDED.tombstone_until ELSE o.tombstone_until END,
    effect          = CASE WHEN {take} THEN EXCLUDED.effect ELSE o.effect END,
    status          = CASE WHEN {take} THEN 'pending' WHEN {unk} THEN 'unknown' ELSE o.status END,
    epoch           = CASE WHEN {take} THEN o.epoch + 1 ELSE o.epoch END,
    lease_until     = CASE WHEN {take} THEN EXCLUDED.lease_until WHEN {unk} THEN NULL ELSE o.lease_until END,
    claim_token     = CASE WHEN {take} THEN EXCLUDED.claim_token ELSE o.claim_token END,
    result          = CASE WHEN {take} THEN NULL ELSE o.result END,
    failure         = CASE WHEN {take} THEN NULL ELSE o.failure END,
    effect_ref      = CASE WHEN {take} THEN '' ELSE o.effect_ref END,
    resolved_by     = CASE WHEN {take} THEN '' ELSE o.resolved_by END,
    note            = CASE WHEN {take} THEN '' ELSE o.note END,
    updated_at      = CASE WHEN {take} OR {unk} THEN now() ELSE o.updated_at END
`)
}

// Schema returns Options.Schema: the schema holding the store's table, or "" when the store
// looks in its connection's search_path. The interceptor names it in the `oncekey resolve`
// command of an unknown outcome's error.
func (s *Store) Schema() string { return s.schema }

// completeStmt returns the complete statement for table. Parameters: $1 tenant, $2 operation
// key, $3 epoch, $4 status, $5 result, $6 failure, $7 effect reference.
func completeStmt(table string) string {
	return strings.NewReplacer("{t}", table, "{cols}", keyedCols).Replace(
		`UPDATE {t} SET status = $4, result = $5, failure = $6, effect_ref = $7, lease_until = NULL, updated_at = now(),
    ` + settleRetention + `
WHERE tenant = $1 AND operation_key = $2 AND epoch = $3 AND status = 'pending'
RETURNING {cols}`)
}

// call runs fn with the statement timeout, once the store knows whether a pooler stands in
// front of its pool (route.detect). A failure pgconn.SafeToRetry says happened before
// anything reached the server (a pooled connection that died with a restart, for instance) is
// retried, at most twice; nothing else is.
func (s *Store) call(ctx context.Context, fn func(ctx context.Context) error) error {
	if dl, ok := ctx.Deadline(); s.timeout > 0 && (!ok || time.Until(dl) > s.timeout) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	var err error
	for range 3 {
		if err = s.route.detect(ctx); err == nil {
			err = fn(ctx)
		}
		if err == nil || !pgconn.SafeToRetry(err) || ctx.Err() != nil {
			break
		}
	}
	// A canceled statement comes back as the server's error; keep the context's reason in the
	// chain so that errors.Is(err, context.Canceled / DeadlineExceeded) holds.
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return err
}

// queryOne returns the row fn reads, run as callFor does. No row is why's error (why reads
// again, on that error path only, to say what the statement found instead of the row it was
// conditional on); any other error is named by op and key and classified by wrap (Store.wrap or
// Store.wrapApproval).
func queryOne[T any](ctx context.Context, s *Store, op, key string, wrap func(ctx context.Context, op, key string, err error) error,
	fn func(ctx context.Context) (T, error), why func() error) (T, error) {
	v, err := callFor(ctx, s, fn)
	return noRow(ctx, op, key, wrap, v, err, why)
}

// noRow returns v, or for a statement that read no row why's error, or err wrapped.
func noRow[T any](ctx context.Context, op, key string, wrap func(ctx context.Context, op, key string, err error) error,
	v T, err error, why func() error) (T, error) {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		var none T
		return none, why()
	case err != nil:
		var none T
		return none, wrap(ctx, op, key, err)
	}
	return v, nil
}

// callFor runs fn as call does and returns what its last run read.
func callFor[T any](ctx context.Context, s *Store, fn func(ctx context.Context) (T, error)) (T, error) {
	var v T
	err := s.call(ctx, func(ctx context.Context) error {
		var err error
		v, err = fn(ctx)
		return err
	})
	return v, err
}

func micros(d time.Duration) int64 { return d.Microseconds() }

func (s *Store) checkSize(op, key string, bs ...[]byte) error {
	for _, b := range bs {
		if len(b) > s.maxBytes {
			return fmt.Errorf("pgstore: %s %s: %w", op, key, &oncekeystore.ResultTooLargeError{OperationKey: key, Size: len(b), Limit: s.maxBytes})
		}
	}
	return nil
}

// tokenOr returns token, or a random non-zero token when it is 0 (the caller left it to the
// store).
func tokenOr(token int64) int64 {
	for token == 0 {
		token = rand.Int64()
	}
	return token
}

// Claim implements oncekeystore.Store in one statement (claimStmt), judged on the database clock.
// A pending Effectful record whose lease ran out becomes unknown at its current epoch; a
// released record is acquired only by a claim with its fingerprint.
func (s *Store) Claim(ctx context.Context, p *oncekeystore.ClaimParams) (*oncekeystore.ClaimResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	token := tokenOr(p.ClaimToken)
	var (
		res               oncekeystore.ClaimResult
		acquired, expired bool
		err               error
	)
	args := []arg{textArg(p.Tenant), textArg(p.OperationKey),
		textArg(p.Tool), textArg(p.Version), textArg(p.Fingerprint), textArg(p.WorkflowID), textArg(p.StepID),
		smallintArg(int16(p.Effect)), bigintArg(micros(p.Lease)), bigintArg(micros(p.Retention)),
		bigintArg(micros(p.Tombstone)), bigintArg(token), textArg(p.Namespace)}
	if p.Effect == oncekeystore.Transactional {
		// A Transactional claim commits without waiting for its flush (transactionalClaimStmt),
		// so it is never coalesced with claims that do.
		res.Record, acquired, expired, err = s.claimWith(ctx, s.claimTxSQL, args)
	} else {
		res.Record, acquired, expired, err = s.claimVia(ctx, args)
	}
	if err != nil {
		return nil, s.wrap(ctx, "claim", p.OperationKey, err)
	}
	res.Acquired = acquired
	res.TookOver = acquired && res.Record.Epoch > 1
	res.Expired = !acquired && expired
	res.FingerprintMismatch = !acquired && !expired && res.Record.Fingerprint != p.Fingerprint
	return &res, nil
}

// fenced runs a write conditional on (tenant, key, epoch, pending). Zero rows is ErrLostClaim,
// or ErrNotFound when a second read finds no record at all (error path only).
func (s *Store) fenced(ctx context.Context, op, tenant, key string, query *stmt, args ...arg) (*oncekeystore.Record, error) {
	r, err := s.writeVia(ctx, query, args)
	return noRow(ctx, op, key, s.wrap, r, err, func() error {
		if _, gerr := s.get(ctx, tenant, key); errors.Is(gerr, oncekeystore.ErrNotFound) {
			return fmt.Errorf("pgstore: %s %s: %w", op, key, oncekeystore.ErrNotFound)
		}
		return fmt.Errorf("pgstore: %s %s at epoch %d: %w", op, key, args[2].i, oncekeystore.ErrLostClaim)
	})
}

// claimWith runs the claim statement query (claimSQL, or claimTxSQL for a Transactional tool)
// for args on its own, reporting whether the claim acquired the record and whether it is past
// retention.
func (s *Store) claimWith(ctx context.Context, query *stmt, args []arg) (r *oncekeystore.Record, acquired, expired bool, err error) {
	err = s.call(ctx, func(ctx context.Context) error {
		var err error
		r, err = s.queryRecord(ctx, query, args, &acquired, &expired)
		return err
	})
	return r, acquired, expired, err
}

// writeOne runs the fenced write query for args on its own.
func (s *Store) writeOne(ctx context.Context, query *stmt, args []arg) (*oncekeystore.Record, error) {
	var r *oncekeystore.Record
	err := s.call(ctx, func(ctx context.Context) error {
		var err error
		r, err = s.queryRecord(ctx, query, args)
		return err
	})
	return r, err
}

// Renew implements oncekeystore.Store: one UPDATE conditional on the epoch and status pending.
func (s *Store) Renew(ctx context.Context, p *oncekeystore.RenewParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "renew", p.Tenant, p.OperationKey, s.renewSQL,
		textArg(p.Tenant), textArg(p.OperationKey), bigintArg(p.Epoch), bigintArg(micros(p.Lease)))
}

// HandOff implements oncekeystore.HandOffStore: one UPDATE conditional on the epoch and status
// pending. A document over Options.MaxResultBytes is refused with
// *oncekeystore.ResultTooLargeError.
func (s *Store) HandOff(ctx context.Context, p *oncekeystore.HandOffParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkSize("hand off", p.OperationKey, nil, p.HandOff); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "hand off", p.Tenant, p.OperationKey, s.handOffSQL,
		textArg(p.Tenant), textArg(p.OperationKey), bigintArg(p.Epoch), bigintArg(micros(p.Lease)), byteaArg(p.HandOff))
}

// Complete implements oncekeystore.Store: one UPDATE conditional on the epoch and status pending,
// storing Result and Failure byte-for-byte (nil is NULL, empty is empty). A Result or Failure
// over Options.MaxResultBytes is refused with *oncekeystore.ResultTooLargeError.
func (s *Store) Complete(ctx context.Context, p *oncekeystore.CompleteParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkSize("complete", p.OperationKey, p.Result, p.Failure); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "complete", p.Tenant, p.OperationKey, s.completeSQL,
		textArg(p.Tenant), textArg(p.OperationKey), bigintArg(p.Epoch), textArg(string(p.Status)),
		byteaArg(p.Result), byteaArg(p.Failure), textArg(p.EffectReference))
}

// Release implements oncekeystore.Store: one UPDATE conditional on the epoch and status pending.
func (s *Store) Release(ctx context.Context, p *oncekeystore.ReleaseParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "release", p.Tenant, p.OperationKey, s.releaseSQL,
		textArg(p.Tenant), textArg(p.OperationKey), bigintArg(p.Epoch))
}

// MarkUnknown implements oncekeystore.Store: one UPDATE conditional on the epoch and status pending.
func (s *Store) MarkUnknown(ctx context.Context, p *oncekeystore.MarkUnknownParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkSize("mark unknown", p.OperationKey, p.Failure); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "mark unknown", p.Tenant, p.OperationKey, s.unknownSQL,
		textArg(p.Tenant), textArg(p.OperationKey), bigintArg(p.Epoch), byteaArg(p.Failure))
}

// Resolve implements oncekeystore.Store: one UPDATE at p.Epoch allowed from unknown, or from pending
// with a lease expired on the database clock, within retention. Otherwise it returns
// *oncekeystore.StaleDecisionError (the record is at another epoch),
// *oncekeystore.StatusConflictError (Status expired for a record past retention) or ErrNotFound,
// found by a second read on that error path, and changes nothing.
func (s *Store) Resolve(ctx context.Context, p *oncekeystore.ResolveParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkSize("resolve", p.OperationKey, p.Result, p.Failure); err != nil {
		return nil, err
	}
	stmt, args := s.resolveSQL, []arg{textArg(p.Tenant), textArg(p.OperationKey),
		textArg(string(p.Status)), byteaArg(p.Result), byteaArg(p.Failure), textArg(p.EffectReference),
		textArg(p.ResolvedBy), textArg(p.Note), bigintArg(p.Epoch)}
	if len(p.Signature) > 0 {
		stmt, args = s.resolveSignedSQL, append(args, byteaArg(p.Signature))
	}
	return queryOne(ctx, s, "resolve", p.OperationKey, s.wrapSignature, func(ctx context.Context) (*oncekeystore.Record, error) {
		return s.queryRecord(ctx, stmt, args)
	}, func() error {
		cur, pastRetention, gerr := s.getRetention(ctx, p.Tenant, p.OperationKey)
		if gerr != nil {
			return fmt.Errorf("pgstore: resolve %s: %w", p.OperationKey, gerr)
		}
		st := cur.Status
		if pastRetention {
			st = oncekeystore.StatusExpired
		}
		if !pastRetention && cur.Epoch != p.Epoch {
			return fmt.Errorf("pgstore: resolve %s: %w", p.OperationKey, &oncekeystore.StaleDecisionError{
				OperationKey: p.OperationKey, Epoch: p.Epoch, Current: cur.Epoch, Status: cur.Status})
		}
		return fmt.Errorf("pgstore: resolve %s: %w", p.OperationKey, &oncekeystore.StatusConflictError{
			OperationKey: p.OperationKey, Status: st, Want: "only unknown records and pending records with an expired lease can be resolved"})
	})
}

// Get implements oncekeystore.Store.
func (s *Store) Get(ctx context.Context, p *oncekeystore.GetParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r, err := s.get(ctx, p.Tenant, p.OperationKey)
	if err != nil {
		return nil, fmt.Errorf("pgstore: get %s: %w", p.OperationKey, err)
	}
	return r, nil
}

func (s *Store) get(ctx context.Context, tenant, key string) (*oncekeystore.Record, error) {
	r, _, err := s.getRetention(ctx, tenant, key)
	return r, err
}

// getRetention reads a record and whether it is past retention; pgx.ErrNoRows becomes
// oncekeystore.ErrNotFound here and only here.
func (s *Store) getRetention(ctx context.Context, tenant, key string) (*oncekeystore.Record, bool, error) {
	var past bool
	r, err := callFor(ctx, s, func(ctx context.Context) (*oncekeystore.Record, error) {
		return s.queryRecord(ctx, s.getSQL, []arg{textArg(tenant), textArg(key)}, &past)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, oncekeystore.ErrNotFound
	}
	if err != nil {
		if problem, ok := schemaProblemOf(err); ok {
			return nil, false, s.schemaError(ctx, "get", problem, "", err)
		}
		if unavailable(err) {
			return nil, false, &oncekeystore.StoreUnavailableError{Op: "get", Err: err}
		}
		return nil, false, err
	}
	return r, past, nil
}

// List implements oncekeystore.Store with keyset pagination in (updated_at, tenant, operation_key)
// order. The cursor is the last record's sort key, so a record that is not updated while a
// caller pages appears exactly once; a record updated meanwhile moves to the end (it may appear
// again there) without making any other record be skipped or repeated. Each page is one
// statement; pages are not one snapshot.
func (s *Store) List(ctx context.Context, p *oncekeystore.ListParams) (*oncekeystore.ListResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	l := listing{sortCol: "updated_at"}
	l.filter(string(p.Status), p.Tenant, p.Tool, p.WorkflowID)
	if !p.UpdatedSince.IsZero() {
		l.where = append(l.where, "updated_at >= "+l.arg(p.UpdatedSince))
	}
	recs, next, err := readPage(ctx, s, &l, p.PageSize(), page[*oncekeystore.Record, oncekeystore.ListCursor]{
		op: "list", cols: recordCols, table: s.table, wrap: s.wrap, next: oncekeystore.NextCursor,
		after: p.After, key: func(c oncekeystore.ListCursor) (time.Time, string, string) {
			return c.UpdatedAt, c.Tenant, c.OperationKey
		},
		rows: func(rows pgx.Rows) ([]*oncekeystore.Record, error) {
			var (
				recs []*oncekeystore.Record
				buf  recordDests
			)
			for rows.Next() {
				d := new(recordDest)
				if err := scanRow(rows.FieldDescriptions(), rows.RawValues(), rows.Conn().TypeMap(), d.bind(&buf, false), nil); err != nil {
					return nil, err
				}
				recs = append(recs, d.record())
			}
			return recs, rows.Err()
		}})
	if err != nil {
		return nil, err
	}
	return &oncekeystore.ListResult{Records: recs, Next: next}, nil
}

// page is what readPage reads: the columns and table of a listing's rows, how they scan, and
// the cursors.
type page[T, C any] struct {
	op, cols, table string
	// after returns the cursor the page resumes after (nil: the first page); key reads a
	// cursor's sort key; next makes the cursor that resumes after an item.
	after func() (*C, error)
	key   func(C) (time.Time, string, string)
	next  func(T) string
	// rows scans the rows of the page (closed by readPage).
	rows func(rows pgx.Rows) ([]T, error)
	// wrap names op and classifies a statement's error (Store.wrap or Store.wrapApproval).
	wrap func(ctx context.Context, op, key string, err error) error
}

// readPage reads a page of at most limit rows of l, one statement: the items and the cursor of
// the next page ("" after the last). It reads one more row to know whether more follow.
func readPage[T, C any](ctx context.Context, s *Store, l *listing, limit int, pg page[T, C]) ([]T, string, error) {
	c, err := pg.after()
	if err != nil {
		return nil, "", err
	}
	if c != nil {
		l.after(pg.key(*c))
	}
	q, args := l.query(pg.cols, pg.table, limit+1), l.args
	items, err := callFor(ctx, s, func(ctx context.Context) ([]T, error) {
		rows, err := s.db().Query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return pg.rows(rows)
	})
	if err != nil {
		return nil, "", pg.wrap(ctx, pg.op, "", err)
	}
	if len(items) > limit {
		return items[:limit], pg.next(items[limit-1]), nil
	}
	return items, "", nil
}

// listing builds the statement of one page of a keyset-paginated listing, ordered by (sortCol,
// tenant, operation_key): List's and ListApprovals'.
type listing struct {
	sortCol string
	where   []string
	args    []any
}

// arg adds a parameter and returns its placeholder.
func (l *listing) arg(v any) string {
	l.args = append(l.args, v)
	return fmt.Sprintf("$%d", len(l.args))
}

// filter keeps the rows with the given status, tenant, tool and workflow ID, each unless "".
func (l *listing) filter(status, tenant, tool, workflowID string) {
	for _, f := range []struct{ col, v string }{{"status", status}, {"tenant", tenant}, {"tool", tool}, {"workflow_id", workflowID}} {
		if f.v != "" {
			l.where = append(l.where, f.col+" = "+l.arg(f.v))
		}
	}
}

// after keeps the rows that sort after the cursor's sort key.
func (l *listing) after(at time.Time, tenant, key string) {
	l.where = append(l.where, fmt.Sprintf("(%s, tenant, operation_key) > (%s, %s, %s)", l.sortCol, l.arg(at), l.arg(tenant), l.arg(key)))
}

// query returns the statement selecting cols from table: at most n rows, in order.
func (l *listing) query(cols, table string, n int) string {
	q := "SELECT " + cols + " FROM " + table
	if len(l.where) > 0 {
		q += " WHERE " + strings.Join(l.where, " AND ")
	}
	return q + " ORDER BY " + l.sortCol + ", tenant, operation_key LIMIT " + l.arg(n)
}

// Purge implements oncekeystore.Store. It first turns records past retention into tombstones
// (status expired; result, failure, effect reference and note cleared; digests, epoch and
// windows kept), never a pending or unknown record, then deletes tombstones and settled records
// past their window, then deletes the decided approvals past their retention (never a pending
// one). Each step that has anything to do walks its table once, in ranges of pages holding
// about p.BatchSize rows (by the planner's statistics), one statement and one short
// transaction per range, whose commit does not wait for its WAL flush (see purgeAsync): a
// record changed during the walk is left for the next run. A batch waits for a concurrent
// claim of a row it would change (one statement) and checks the row again after it; a claim
// of a record the batch is changing waits for that batch. After each batch Purge pauses for
// p.Rest times the batch's duration (by default as long as the batch took; PurgeParams.Pacer),
// so claims keep most of the server while a large purge runs.
// Batches counts statements that changed at least one row; p.Progress is called after each.
// On an error the counts so far are returned with it.
func (s *Store) Purge(ctx context.Context, p *oncekeystore.PurgeParams) (*oncekeystore.PurgeResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var res oncekeystore.PurgeResult
	pace := p.Pacer()
	for _, step := range []struct {
		purgeStep
		count *int64
	}{{s.tombstoneStep, &res.Tombstoned}, {s.deleteStep, &res.Deleted}, {s.purgeApprovalsStep, &res.ApprovalsDeleted},
		{s.purgeGrantsStep, &res.GrantsDeleted}} {
		if err := s.purgeWalk(ctx, p, pace, step.purgeStep, step.count, &res); err != nil {
			return &res, err
		}
	}
	var oldest *time.Time
	err := s.call(ctx, func(ctx context.Context) error {
		return s.db().QueryRow(ctx, s.unsettledSQL).Scan(&res.Unsettled, &oldest)
	})
	if err != nil {
		return &res, s.wrap(ctx, "purge", "", err)
	}
	if oldest != nil {
		res.OldestUnsettled = *oldest
	}
	return &res, nil
}

// Forget implements oncekeystore.Store: one statement deleting every record, every approval, every
// outbox message (delivered or not: the tenant is forgotten) and every standing grant (active or
// not) of the tenant.
func (s *Store) Forget(ctx context.Context, p *oncekeystore.ForgetParams) (*oncekeystore.ForgetResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var res oncekeystore.ForgetResult
	err := s.call(ctx, func(ctx context.Context) error {
		return s.db().QueryRow(ctx, s.forgetSQL, p.Tenant).Scan(&res.Deleted, &res.ApprovalsDeleted, &res.GrantsDeleted)
	})
	if err != nil {
		return nil, s.wrapGrant(ctx, "forget", "", err)
	}
	return &res, nil
}

// PurgePreview counts, in one statement and without changing anything, the records Purge would
// tombstone and delete now, by the conditions Purge itself uses. It reads the whole table (a
// sequential scan at millions of rows takes seconds); rows locked by a running claim, which
// Purge would skip until its next run, are counted.
func (s *Store) PurgePreview(ctx context.Context) (*oncekeystore.PurgePreview, error) {
	var pv oncekeystore.PurgePreview
	err := s.call(ctx, func(ctx context.Context) error {
		var oldest *time.Time
		if err := s.db().QueryRow(ctx, s.previewSQL).Scan(&pv.Now, &pv.Tombstones, &pv.Deletes, &pv.Unsettled, &oldest, &pv.ApprovalDeletes, &pv.GrantDeletes); err != nil {
			return err
		}
		if oldest != nil {
			pv.OldestUnsettled = *oldest
		}
		return nil
	})
	if err != nil {
		return nil, s.wrapGrant(ctx, "purge preview", "", err)
	}
	return &pv, nil
}

// Stats counts records by tenant, tool and status in one statement (of tenant only, unless it
// is ""), ordered by tenant, tool and status. Counting reads every matching row.
func (s *Store) Stats(ctx context.Context, tenant string) ([]oncekeystore.StatsRow, error) {
	var out []oncekeystore.StatsRow
	err := s.call(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.db().Query(ctx, s.statsSQL, tenant)
		if err != nil {
			return err
		}
		var (
			r      oncekeystore.StatsRow
			status string
		)
		_, err = pgx.ForEachRow(rows, []any{&r.Tenant, &r.Tool, &status, &r.Count, &r.OldestUpdate}, func() error {
			r.Status = oncekeystore.Status(status)
			out = append(out, r)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, s.wrap(ctx, "stats", "", err)
	}
	return out, nil
}

func init() {
	benchsql.Claim, benchsql.TransactionalClaim, benchsql.Complete = claimStmt, transactionalClaimStmt, completeStmt
}
