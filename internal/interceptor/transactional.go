package interceptor

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/failuredoc"
	"github.com/oncekey/oncekey/oncekeystore"
)

// The Transactional class's steps of call.execute: the body writes in a transaction the store
// begins (begin), and its writes commit together with the record's completion at the claim's
// epoch (commit). Its outcome is never unknown: the transaction committed (applied) or it did
// not (nothing happened; the claim is given back and Temporal's retry runs the tool again).

// begin begins the body's transaction for the record held at epoch. A store that cannot begin
// it gets the claim back, and the attempt fails with a retryable StoreUnavailable.
func (c *call) begin(ctx context.Context, epoch int64) (oncekeystore.StoreTx, error) {
	tx, err := c.root.opts.Store.(oncekeystore.TxStore).BeginTx(ctx, &oncekeystore.BeginTxParams{
		Tenant: c.op.Tenant, OperationKey: c.key, Epoch: epoch, Lease: c.policy.Lease, Tool: c.tool,
	})
	if err != nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeWriteTimeout)
		defer cancel()
		c.release(wctx, epoch)
		return nil, c.storeFailed("begin", err)
	}
	return tx, nil
}

// commit writes the completion p in the body's transaction and commits it. When the commit's
// outcome is not known (its answer was lost with the connection), it is read back from the record,
// never guessed: a Release fenced at the epoch lands only on a record still pending at it, which
// proves the transaction did not commit (the store waits for the transaction's row lock, so it
// cannot commit later either) and gives the claim back for the retry; a record applied at the
// epoch proves it did, and the call answers applied. A store that answers neither way leaves the
// record as it is (applied, or pending until its lease ends and the next claim takes it over) and
// the attempt fails with a retryable StoreUnavailable: the retry reads the answer from the record.
func (c *call) commit(ctx context.Context, tx oncekeystore.StoreTx, p *oncekeystore.CompleteParams) error {
	_, commitErr := tx.Commit(ctx, p)
	var misuse *oncekeystore.TxMisuseError
	switch {
	case commitErr == nil:
		return nil
	case errors.As(commitErr, &misuse):
		return c.txMisused(ctx, p.Epoch, misuse)
	case errors.Is(commitErr, oncekeystore.ErrLostClaim):
		return c.lostClaim(commitErr)
	}
	s := c.root.opts.Store
	_, err := s.Release(ctx, &oncekeystore.ReleaseParams{Tenant: p.Tenant, OperationKey: p.OperationKey, Epoch: p.Epoch})
	if err == nil {
		c.outcome = oncekey.OutcomeFailed
		return c.appError(fmt.Sprintf("oncekey: %s (key %s) did not commit (%v); nothing was written, and the claim was given back so that a retry runs it again",
			c.tool, c.key, commitErr), oncekey.ErrTypeNotApplied, false, commitErr, "transaction not committed", false)
	}
	if errors.Is(err, oncekeystore.ErrLostClaim) {
		rec, gerr := s.Get(ctx, &oncekeystore.GetParams{Tenant: p.Tenant, OperationKey: p.OperationKey})
		switch {
		case gerr == nil && rec.Epoch == p.Epoch && rec.Status == oncekeystore.StatusApplied:
			c.logger(ctx).Info("oncekey: the commit's answer was lost; the record shows it committed",
				"tool", c.tool, "key_prefix", keyPrefix(c.key), "error", commitErr)
			return nil
		case gerr == nil:
			// Another epoch owns the record, or it was settled otherwise: this transaction's
			// completion, fenced at p.Epoch, is not what the record holds.
			return c.lostClaim(commitErr)
		}
		err = gerr
	}
	c.logger(ctx).Warn("oncekey: the commit's outcome could not be read back; the retry reads it from the record",
		"tool", c.tool, "key_prefix", keyPrefix(c.key), "commit_error", commitErr, "error", err)
	return c.storeUnavailable("commit", errors.Join(commitErr, err))
}

// txMisused ends a call whose body misused its transaction (rolled back by then): the call fails,
// not retryable, with ErrTypeTxMisuse (the bug is in the tool). The claim is given back, as
// nothing was written; but when the body had ended the transaction itself (misuse.Ended), what it
// wrote before may have committed, and the claim is never given back (see keepEnded).
func (c *call) txMisused(ctx context.Context, epoch int64, misuse *oncekeystore.TxMisuseError) error {
	e := c.appError(misuse.Error(), oncekey.ErrTypeTxMisuse, true, misuse, "transaction misused", false)
	if misuse.Ended {
		var typed *temporal.ApplicationError
		_ = errors.As(temporal.NewNonRetryableApplicationError(misuse.Error(), oncekey.ErrTypeTxMisuse, nil), &typed)
		c.keepEnded(ctx, epoch, misuse, typed)
	} else {
		c.release(ctx, epoch)
	}
	c.outcome = oncekey.OutcomeFailed
	return e
}

// keepEnded records the failure of a call whose body ended its transaction itself, so that no
// repeat runs the tool again: the record is completed as failed at epoch (a repeat gets the
// failure); when the store refuses that write, it is marked unknown at epoch (a repeat gets an
// IndeterminateOutcome, and the record waits for a resolution) rather than released, as a
// released claim would run the body again over what it may have committed. When that fails too,
// the record stays pending, and a pending Transactional record whose lease ran out is taken over
// by the next claim of its key (its transaction is presumed to have left nothing), which runs the
// body again: the call's own error is not retryable, so only another call with the same key
// does, and the failure is logged at error level with the key so that it is not silent.
func (c *call) keepEnded(ctx context.Context, epoch int64, misuse *oncekeystore.TxMisuseError, appErr *temporal.ApplicationError) {
	doc := failuredoc.Doc{Message: misuse.Error(), NonRetryable: true, Type: appErr.Type()}
	s := c.root.opts.Store
	_, err := s.Complete(ctx, &oncekeystore.CompleteParams{
		Tenant: c.op.Tenant, OperationKey: c.key, Epoch: epoch, Status: oncekeystore.StatusFailed, Failure: doc.Bytes(),
		EffectReference: c.effectRef,
	})
	if err == nil {
		return
	}
	reason := "the body ended its transaction itself (" + misuse.Error() + "); the failure could not be recorded: " + err.Error()
	_, uerr := s.MarkUnknown(ctx, &oncekeystore.MarkUnknownParams{
		Tenant: c.op.Tenant, OperationKey: c.key, Epoch: epoch,
		Failure: failuredoc.Doc{Message: reason, Reason: "transaction ended by the body", EffectReference: c.effectRef}.Bytes(),
	})
	if uerr == nil {
		c.logger(ctx).Warn("oncekey: the failure of a body that ended its transaction could not be recorded; the record was marked unknown",
			"tool", c.tool, "key_prefix", keyPrefix(c.key), "error", err)
		return
	}
	c.logger(ctx).Error("oncekey: the failure of a body that ended its transaction could not be recorded, nor the record marked unknown; "+
		"it stays pending, and a call with the same key after its lease ends runs the body again",
		"tool", c.tool, "key_prefix", keyPrefix(c.key), "epoch", epoch, "error", errors.Join(err, uerr))
}
