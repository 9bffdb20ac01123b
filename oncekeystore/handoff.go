package oncekeystore

import (
	"context"
	"time"
)

// HandOffStore is a Store that keeps the hand-off of a pending record: the body of an Effectful
// tool returned activity.ErrResultPending, handing its result to whoever completes the activity
// later (client.CompleteActivity), and the record waits for that completion instead of for the
// worker. memstore, pgstore and redisstore implement it. On a store that does not, the interceptor
// refuses the hand-off with oncekey.AsyncCompletion, as for a Transactional tool.
type HandOffStore interface {
	Store
	// HandOff keeps the record held at p.Epoch pending, with its lease running p.Lease from the
	// store's now (long enough for the activity to time out first) and p.HandOff as its Failure:
	// the worker's document naming the activity that will be completed. It is one write fenced
	// like Renew: ErrLostClaim when the record is not pending at p.Epoch, and nothing changed.
	// The document stays when the record is later marked unknown (by MarkUnknown with it, or by a
	// claim after the lease ran out, which keeps Failure) and goes when the record settles or a
	// claim takes it over.
	HandOff(ctx context.Context, p *HandOffParams) (*Record, error)
}

// HandOffParams are the arguments of HandOffStore.HandOff.
type HandOffParams struct {
	Tenant, OperationKey string
	Epoch                int64
	// Lease is the record's lease from the store's now. Required.
	Lease time.Duration
	// HandOff is the hand-off document, stored as Record.Failure byte for byte (opaque to the
	// store; the interceptor writes a failure document with its "handoff" member). Required.
	HandOff []byte
}

// Validate returns an *InvalidParamsError naming the first bad field, or nil.
func (p *HandOffParams) Validate() error {
	if err := checkFenced("hand off", p.Tenant, p.OperationKey, p.Epoch); err != nil {
		return err
	}
	if err := checkPositive("hand off", "Lease", p.Lease); err != nil {
		return err
	}
	if len(p.HandOff) == 0 {
		return &InvalidParamsError{Op: "hand off", Field: "HandOff", Reason: "the hand-off document is empty"}
	}
	return nil
}
