package oncekey

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
	// record applied at p.Epoch proves it did), never by guessing.
	Commit(ctx context.Context, p *CompleteParams) (*Record, error)
	// Rollback closes the transaction to the body and rolls it back. It is safe to call after
	// Commit (it does nothing then) and more than once.
	Rollback(ctx context.Context) error
}

// TxMisuseError is what a Transactional tool's body gets when it misuses the transaction oncekey
// gave it: it called Commit or Rollback (oncekey commits), used it after the body returned, or used
// it from two goroutines at once. The transaction is then rolled back whatever the body returns, so
// nothing is half-written, and the call fails, not retryable (ErrTypeTxMisuse): the bug is in the
// tool.
type TxMisuseError struct {
	Tool string
	// Op is the method of pgx.Tx the body called ("Commit", "Exec", …).
	Op string
	// Reason says what was wrong.
	Reason string
}

func (e *TxMisuseError) Error() string {
	return fmt.Sprintf("oncekey: %s: transaction misused: %s %s; oncekey rolls the transaction back, nothing was written", e.Tool, e.Op, e.Reason)
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
