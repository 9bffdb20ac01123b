package oncekeystore

import (
	"context"
	"time"
)

// StoreInspector is implemented by a store an operator inspects from outside the worker: it
// counts records and previews a purge without changing anything. pgstore and redisstore
// implement it, and the oncekey CLI reads every store through it, Store and ApprovalStore, so
// that its commands print the same on each. Neither method changes a record.
type StoreInspector interface {
	// Stats counts the records by tenant, tool and status (of tenant only, unless it is ""),
	// ordered by tenant, tool and status. It reads every matching record.
	Stats(ctx context.Context, tenant string) ([]StatsRow, error)
	// PurgePreview counts what Store.Purge would change if it ran now (the store's clock), by the
	// conditions Purge itself uses.
	PurgePreview(ctx context.Context) (*PurgePreview, error)
}

// StatsRow counts the records of one tenant and tool in one status (StoreInspector.Stats).
type StatsRow struct {
	Tenant, Tool string
	Status       Status
	Count        int64
	// OldestUpdate is the earliest UpdatedAt among them: for unknown records, how long the
	// oldest has been waiting for a decision.
	OldestUpdate time.Time
}

// PurgePreview is what Store.Purge would change if it ran at Now (the store's clock).
type PurgePreview struct {
	Now        time.Time
	Tombstones int64 // records past retention that would become tombstones
	Deletes    int64 // records past their tombstone window that would be deleted
	// Unsettled counts the pending and unknown records past their retention, which Purge leaves
	// (see PurgeResult.Unsettled); OldestUnsettled is the creation time of the oldest of them
	// (zero when none).
	Unsettled       int64
	OldestUnsettled time.Time
	// ApprovalDeletes counts the decided approvals past their retention that would be deleted.
	ApprovalDeletes int64
	// GrantDeletes counts the standing grants ended longer than their retention ago that would
	// be deleted (by a store that implements GrantStore).
	GrantDeletes int64
}

// OutboxInspector is implemented by a store with a transactional outbox (pgstore): what its
// outbox holds, for the worker's sampler (worker.UnknownsSampler sets metrics.OutboxPending,
// metrics.OutboxFailing and metrics.OutboxOldestPending from it) and for operators' tools.
type OutboxInspector interface {
	// OutboxStats counts the outbox's messages.
	OutboxStats(ctx context.Context) (*OutboxStats, error)
}

// OutboxStats describes a store's outbox (OutboxInspector.OutboxStats).
type OutboxStats struct {
	Pending   int64 // messages not delivered yet
	Failing   int64 // pending messages whose last delivery failed
	Delivered int64
	// OldestPending is when the oldest pending message was written; zero when none is.
	OldestPending time.Time
	// MostAttempts is the largest number of failed deliveries of a pending message.
	MostAttempts int64
}
