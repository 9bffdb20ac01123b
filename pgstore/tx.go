package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncekey/oncekey/oncekeystore"
)

// ErrNoTx is what Tx returns for a context that carries no transaction: the caller is not the
// body of an oncekeystore.Transactional tool running on a pgstore Store.
var ErrNoTx = errors.New("pgstore: no transaction in the context: pgstore.Tx is for the body of an oncekeystore.Transactional tool")

var _ oncekeystore.TxStore = (*Store)(nil)

// txKey is the context key of a Transactional body's transaction.
type txKey struct{}

// Tx returns the transaction of the oncekeystore.Transactional tool whose body ctx is (or derives
// from), or ErrNoTx. The body writes through it; oncekey commits the writes together with the
// record's completion after the body returns, or rolls them back (an error, a panic, a lost
// claim). The body must not call Commit or Rollback, send a statement that ends the transaction
// (COMMIT, END, ROLLBACK, ABORT, PREPARE TRANSACTION, alone or among other statements, through
// Exec, Query, QueryRow, Prepare or SendBatch), or use it from two goroutines at once: each is
// refused, not run, with an *oncekeystore.TxMisuseError, and the whole transaction is rolled back. A
// use after the body returned is refused the same way (AfterReturn) and changes nothing else.
// Begin (a savepoint) is refused without rolling back: run SAVEPOINT and ROLLBACK TO SAVEPOINT
// with Exec instead. Conn and LargeObjects are the transaction's own and bypass these checks; a
// transaction found ended through Conn when the body returns (the connection in no transaction)
// fails the call (Ended), but one ended and begun again there is not found. Only the
// writes made through it are covered: a call the body makes to another system is not.
func Tx(ctx context.Context) (pgx.Tx, error) {
	if t, ok := ctx.Value(txKey{}).(*bodyTx); ok {
		return t, nil
	}
	return nil, ErrNoTx
}

// BeginTx implements oncekeystore.TxStore: it begins a transaction on Options.TxPool (or the store's
// pool) in which the server ends the session if it stays idle longer than p.Lease
// (idle_in_transaction_session_timeout, set for this transaction only), so a body that hangs
// past its lease holds no locks for long. An error wraps *oncekeystore.StoreUnavailableError when the
// server cannot be reached.
func (s *Store) BeginTx(ctx context.Context, p *oncekeystore.BeginTxParams) (oncekeystore.StoreTx, error) {
	begin := "BEGIN"
	if ms := p.Lease.Milliseconds(); ms > 0 {
		// One round trip: pgx sends a BeginQuery with the simple protocol.
		begin = "BEGIN; SET LOCAL idle_in_transaction_session_timeout = " + strconv.FormatInt(ms, 10)
	}
	var tx pgx.Tx
	err := s.call(ctx, func(ctx context.Context) error {
		var err error
		if err := s.txRoute.detect(ctx); err != nil {
			return err
		}
		tx, err = s.txPool.BeginTx(ctx, pgx.TxOptions{BeginQuery: begin})
		return err
	})
	if err != nil {
		return nil, s.wrap(ctx, "begin", p.OperationKey, err)
	}
	return &storeTx{s: s, tx: tx, key: p.OperationKey, body: &bodyTx{tx: tx, tool: p.Tool, s: s, tenant: p.Tenant, key: p.OperationKey,
		pooled: s.txRoute.pooled()}}, nil
}

// storeTx is one Transactional call's transaction (oncekeystore.StoreTx).
type storeTx struct {
	s    *Store
	tx   pgx.Tx
	key  string
	body *bodyTx
	done bool // Commit or Rollback ran
}

// Test hooks (export_test.go): beforeCommit runs between the completion and COMMIT, with the
// transaction's connection; afterCommit, when it returns an error, makes a COMMIT that landed
// report that error, as a connection lost while the answer was on its way does.
var (
	beforeCommit func(ctx context.Context, conn *pgx.Conn)
	afterCommit  func() error
)

func (t *storeTx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, t.body)
}

// Commit implements oncekeystore.StoreTx: the completion (completeStmt at p.Epoch) and COMMIT, on the
// transaction's connection. A completion that matches no row rolls everything back and returns
// ErrLostClaim; an error of COMMIT is returned as it is (wrapped), and the caller reads the
// outcome back from the record.
func (t *storeTx) Commit(ctx context.Context, p *oncekeystore.CompleteParams) (*oncekeystore.Record, error) {
	if t.done {
		return nil, pgx.ErrTxClosed
	}
	if misuse := t.body.close(); misuse != nil {
		t.rollback(ctx)
		return nil, misuse
	}
	if misuse := t.ended(); misuse != nil {
		// The completion would run outside the body's transaction (in autocommit): refused.
		t.rollback(ctx)
		return nil, misuse
	}
	if err := p.Validate(); err != nil {
		t.rollback(ctx)
		return nil, err
	}
	if err := t.s.checkSize("complete", p.OperationKey, p.Result, p.Failure); err != nil {
		t.rollback(ctx)
		return nil, err
	}
	// Not s.call: nothing on the transaction's connection is repeated.
	if dl, ok := ctx.Deadline(); t.s.timeout > 0 && (!ok || time.Until(dl) > t.s.timeout) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.s.timeout)
		defer cancel()
	}
	var rec *oncekeystore.Record
	err := func() error {
		var err error
		how := sendQuery
		if t.body.pooled {
			how = sendUnnamed
		}
		rec, err = t.s.queryRecordOn(ctx, t.tx.Conn(), how, t.s.completeSQL, []arg{textArg(p.Tenant), textArg(p.OperationKey),
			bigintArg(p.Epoch), textArg(string(p.Status)), byteaArg(p.Result), byteaArg(p.Failure), textArg(p.EffectReference)})
		if err != nil {
			return err
		}
		if beforeCommit != nil {
			beforeCommit(ctx, t.tx.Conn())
		}
		t.done = true
		err = t.tx.Commit(ctx)
		if err == nil && afterCommit != nil {
			err = afterCommit()
		}
		return err
	}()
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		t.rollback(ctx)
		return nil, fmt.Errorf("pgstore: complete %s at epoch %d: the transaction was rolled back: %w", p.OperationKey, p.Epoch, oncekeystore.ErrLostClaim)
	case err != nil:
		t.rollback(ctx)
		return nil, t.s.wrap(ctx, "commit", p.OperationKey, err)
	}
	return rec, nil
}

// Rollback implements oncekeystore.StoreTx. It returns a *oncekeystore.TxMisuseError (Ended) when the
// body had ended the transaction itself (see ended); the connection is given back either way.
func (t *storeTx) Rollback(ctx context.Context) error {
	t.body.close()
	var misuse *oncekeystore.TxMisuseError
	if !t.done {
		t.done = true
		misuse = t.ended()
	}
	err := t.tx.Rollback(context.WithoutCancel(ctx))
	switch {
	case misuse != nil:
		return misuse
	case errors.Is(err, pgx.ErrTxClosed):
		return nil
	}
	return err
}

func (t *storeTx) rollback(ctx context.Context) { _ = t.Rollback(ctx) }

// ended returns the misuse of a transaction the body ended itself (through Conn, as the statements
// sent through the body's pgx.Tx are checked): the connection is in no transaction when the body
// returns. A transaction in error ('E') is still the body's, and fails at the completion.
func (t *storeTx) ended() *oncekeystore.TxMisuseError {
	if t.tx.Conn().PgConn().TxStatus() != 'I' {
		return nil
	}
	return &oncekeystore.TxMisuseError{Tool: t.body.tool, Op: "a statement sent through Conn", Reason: "ended the transaction (committed or rolled it back)", Ended: true}
}

// bodyTx is the pgx.Tx a Transactional body gets: the transaction, with the checks that refuse
// a misuse (see Tx). A refused call records the misuse, so that Commit rolls back.
type bodyTx struct {
	tx   pgx.Tx
	tool string
	// s, tenant and key are the store and the record the transaction belongs to (Enqueue).
	s           *Store
	tenant, key string
	// pooled: the transaction's pool is behind a pooler its mode does not suit (pooler.go), so
	// Exec, Query and QueryRow send their statements in poolerMode.
	pooled bool

	mu     sync.Mutex
	busy   bool // a call on the connection is running (a Query's rows are open)
	closed bool // the body returned: oncekey owns the transaction again
	misuse *oncekeystore.TxMisuseError
}

var _ pgx.Tx = (*bodyTx)(nil)

// enter starts a call named op that sends the statements sqls, or refuses it with the misuse it is.
func (b *bodyTx) enter(op string, sqls ...string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		for _, sql := range sqls {
			if stmt, ends := endsTx(sql); ends {
				return b.refuse(op, "sent "+stmt+", which ends the transaction (oncekey commits it with the record's completion; return an error to roll it back)")
			}
		}
	}
	switch {
	case b.closed:
		return &oncekeystore.TxMisuseError{Tool: b.tool, Op: op, Reason: "was called after the body returned", AfterReturn: true}
	case b.busy:
		return b.refuse(op, "while another call on the transaction was running (the transaction was used from two goroutines at once)")
	case b.misuse != nil:
		return b.misuse
	}
	b.busy = true
	return nil
}

func (b *bodyTx) leave() {
	b.mu.Lock()
	b.busy = false
	b.mu.Unlock()
}

// refuse records and returns the misuse; b.mu is held.
func (b *bodyTx) refuse(op, reason string) error {
	if b.closed {
		return &oncekeystore.TxMisuseError{Tool: b.tool, Op: op, Reason: "was called after the body returned", AfterReturn: true}
	}
	e := &oncekeystore.TxMisuseError{Tool: b.tool, Op: op, Reason: reason}
	if b.misuse == nil {
		b.misuse = e
	}
	return e
}

// close hands the transaction back to oncekey and returns the misuse the body made, if any. A
// call still running (from a goroutine the body left behind) is a misuse too.
func (b *bodyTx) close() *oncekeystore.TxMisuseError {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.busy && b.misuse == nil && !b.closed {
		b.misuse = &oncekeystore.TxMisuseError{Tool: b.tool, Op: "a call", Reason: "was still running when the body returned"}
	}
	b.closed = true
	return b.misuse
}

func (b *bodyTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, &oncekeystore.TxMisuseError{Tool: b.tool, Op: "Begin", Reason: "is not offered (run SAVEPOINT and ROLLBACK TO SAVEPOINT with Exec)"}
}

func (b *bodyTx) Commit(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refuse("Commit", "was called by the body (oncekey commits the transaction with the record's completion)")
}

func (b *bodyTx) Rollback(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refuse("Rollback", "was called by the body (return an error to roll the transaction back)")
}

func (b *bodyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := b.enter("CopyFrom"); err != nil {
		return 0, err
	}
	defer b.leave()
	return b.tx.CopyFrom(ctx, table, columns, src)
}

func (b *bodyTx) SendBatch(ctx context.Context, batch *pgx.Batch) pgx.BatchResults {
	sqls := make([]string, len(batch.QueuedQueries))
	for i, q := range batch.QueuedQueries {
		sqls[i] = q.SQL
	}
	if err := b.enter("SendBatch", sqls...); err != nil {
		return errBatch{err}
	}
	return &bodyBatch{BatchResults: b.tx.SendBatch(ctx, batch), leave: sync.OnceFunc(b.leave)}
}

func (b *bodyTx) LargeObjects() pgx.LargeObjects { return b.tx.LargeObjects() }

func (b *bodyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := b.enter("Prepare", sql); err != nil {
		return nil, err
	}
	defer b.leave()
	return b.tx.Prepare(ctx, name, sql)
}

func (b *bodyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := b.enter("Exec", sql); err != nil {
		return pgconn.CommandTag{}, err
	}
	defer b.leave()
	return b.tx.Exec(ctx, sql, b.args(args)...)
}

func (b *bodyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := b.enter("Query", sql); err != nil {
		return nil, err
	}
	rows, err := b.tx.Query(ctx, sql, b.args(args)...)
	if err != nil {
		b.leave()
		return nil, err
	}
	return &bodyRows{Rows: rows, leave: sync.OnceFunc(b.leave)}, nil
}

func (b *bodyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := b.Query(ctx, sql, args...)
	return bodyRow{rows: rows, err: err}
}

// args returns a statement's arguments as the transaction's route needs them (see pooled).
func (b *bodyTx) args(args []any) []any {
	if b.pooled {
		return withPoolerMode(args)
	}
	return args
}

// Conn returns the transaction's connection; statements run on it bypass the checks.
func (b *bodyTx) Conn() *pgx.Conn { return b.tx.Conn() }

// bodyRows ends the call when the rows are closed or read to the end.
type bodyRows struct {
	pgx.Rows
	leave func()
}

func (r *bodyRows) Close() {
	r.Rows.Close()
	r.leave()
}

func (r *bodyRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.leave()
	return false
}

// bodyRow is QueryRow's row: pgx's own rule (the first row, pgx.ErrNoRows when there is none)
// on bodyRows.
type bodyRow struct {
	rows pgx.Rows
	err  error
}

func (r bodyRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// bodyBatch ends the call when the batch is closed.
type bodyBatch struct {
	pgx.BatchResults
	leave func()
}

func (b *bodyBatch) Close() error {
	defer b.leave()
	return b.BatchResults.Close()
}

// errBatch is the BatchResults of a refused SendBatch.
type errBatch struct{ err error }

func (e errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, e.err }
func (e errBatch) Query() (pgx.Rows, error)         { return nil, e.err }
func (e errBatch) QueryRow() pgx.Row                { return bodyRow{err: e.err} }
func (e errBatch) Close() error                     { return e.err }
func (e errBatch) Tx() pgx.Tx                       { return nil }
