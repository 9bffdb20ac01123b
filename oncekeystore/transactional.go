package oncekeystore

import (
	"context"
	"fmt"
	"time"
)

// TxStore is a Store that can run Transactional tools: it begins the transaction a body writes
// in and commits the body's writes together with the record's completion. pgstore implements
// it; memstore and redisstore do not (they keep no application data to commit with), and the
// interceptor refuses a Transactional tool on them with a *TransactionalStoreError.
type TxStore interface {
	Store
	// BeginTx begins the transaction of the body of the record held at p.Epoch. The claim was
	// committed before it: BeginTx changes no record.
	BeginTx(ctx context.Context, p *BeginTxParams) (StoreTx, error)
}

// BeginTxParams are the arguments of TxStore.BeginTx.
type BeginTxParams struct {
	Tenant, OperationKey string
	Epoch                int64
	// Lease is the claim's lease: a store may end the transaction when it sits idle longer
	// (pgstore sets idle_in_transaction_session_timeout to it), so a body that hangs past its
	// lease holds no locks for long. Zero sets no limit.
	Lease time.Duration
	// Tool names the tool in the errors its body gets from misusing the transaction.
	Tool string
}

// StoreTx is one Transactional call's transaction, begun by TxStore.BeginTx. It is used by one
// goroutine: the interceptor that runs the body.
type StoreTx interface {
	// Context returns ctx carrying the transaction, as the body receives it (pgstore.Tx reads it).
	Context(ctx context.Context) context.Context
	// Commit closes the transaction to the body, writes the completion p (status applied or
	// failed, at p.Epoch) in it and commits. It returns the record as committed. Errors: ErrLostClaim
	// when the record is no longer held at p.Epoch (the transaction was rolled back, the body's
	// writes with it); a *TxMisuseError when the body misused the transaction (rolled back); any
	// other error when the transaction did not commit or its outcome is not known: the caller
	// settles it from the record (a release at p.Epoch that lands proves it did not commit; a
	// record applied at p.Epoch proves it did), never by guessing. A *TxMisuseError with Ended
	// set means the body ended the transaction itself before: nothing was completed.
	Commit(ctx context.Context, p *CompleteParams) (*Record, error)
	// Rollback closes the transaction to the body and rolls it back. It is safe to call after
	// Commit (it does nothing then) and more than once. Its first call returns a *TxMisuseError
	// with Ended set when the body had ended the transaction itself (what it wrote before may
	// have committed): the caller keeps the record from running the tool again.
	Rollback(ctx context.Context) error
}

// TxMisuseError is what a Transactional tool's body gets when it misuses the transaction oncekey
// gave it: it called Commit or Rollback (oncekey commits), sent a statement that ends the
// transaction (COMMIT, END, ROLLBACK, ABORT, PREPARE TRANSACTION, in any spelling, alone or among
// other statements), or used the transaction from two goroutines at once. The refused call is not
// run; the transaction is then rolled back whatever the body returns, so nothing it wrote is kept,
// and the call fails, not retryable (ErrTypeTxMisuse): the bug is in the tool.
//
// A use after the body returned (AfterReturn) is refused too, and is not run, but changes nothing
// else: the call had ended, and what the body wrote before it returned committed or rolled back
// with it. A transaction found ended when the body returned (Ended: a statement sent through
// pgx.Tx.Conn, which the checks do not cover, committed or rolled it back and left the connection
// in no transaction) makes the call fail the same way, but what the body wrote before that statement may have committed without the record:
// the record keeps the failure, so that no repeat runs the tool again.
type TxMisuseError struct {
	Tool string
	// Op is the method of pgx.Tx the body called ("Commit", "Exec", …) or the statement it sent
	// ("COMMIT").
	Op string
	// Reason says what was wrong.
	Reason string
	// AfterReturn is true for a use after the body returned.
	AfterReturn bool
	// Ended is true when the transaction had been ended by the body when it returned.
	Ended bool
}

func (e *TxMisuseError) Error() string {
	var then string
	switch {
	case e.Ended:
		then = "what the body wrote before may have committed without the record, which keeps the failure so that no repeat runs the tool again"
	case e.AfterReturn:
		then = "it was not run; what the body wrote before it returned was committed or rolled back with the call"
	default:
		then = "it was not run, and oncekey rolls the whole transaction back: nothing the body wrote is kept"
	}
	return fmt.Sprintf("oncekey: %s: transaction misused: %s %s; %s", e.Tool, e.Op, e.Reason, then)
}

// TransactionalStoreError: a Transactional tool is registered, but the store cannot run it (it
// does not implement TxStore). interceptor.New and worker.NewPlugin return it; a call of the tool
// that reaches such a store fails with ErrTypeConfig, not retryable, and nothing is claimed.
type TransactionalStoreError struct {
	Tool string
	// Store describes the store (its Go type).
	Store string
}

func (e *TransactionalStoreError) Error() string {
	return fmt.Sprintf("oncekey: %s is Transactional, which needs a store that commits the tool's writes with its record, and %s cannot; "+
		"use pgstore, or declare the tool Effectful or Idempotent", e.Tool, e.Store)
}
