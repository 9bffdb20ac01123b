package oncekeystore

import (
	"context"
	"time"
)

// Store is the durable record of operations. Every method takes ctx and a params struct; every
// write after Claim is fenced by the epoch the claim returned. Implementations must pass
// storetest.Run. Leases and expiry are judged on the store's own clock, never the caller's.
//
// Errors: a store that cannot be reached returns an error wrapping *StoreUnavailableError; a
// fenced write by a stale epoch returns ErrLostClaim and changes nothing; a missing record is
// ErrNotFound.
type Store interface {
	// Claim either creates the record as pending with a new epoch and a lease (Acquired), takes
	// over a record that is free to take (released; pending with an expired lease for an
	// Idempotent or Transactional tool; a tombstone past its window), marks a pending Effectful record with an
	// expired lease unknown, or returns the record as it stands. A fingerprint different from
	// the stored one changes nothing. It is one round trip.
	Claim(ctx context.Context, p *ClaimParams) (*ClaimResult, error)
	// Renew extends the lease of a pending record held at p.Epoch.
	Renew(ctx context.Context, p *RenewParams) (*Record, error)
	// Complete stores the outcome (applied or failed) of a pending record held at p.Epoch.
	Complete(ctx context.Context, p *CompleteParams) (*Record, error)
	// Release gives a pending record held at p.Epoch back (status released): no effect happened.
	Release(ctx context.Context, p *ReleaseParams) (*Record, error)
	// MarkUnknown marks a pending record held at p.Epoch unknown.
	MarkUnknown(ctx context.Context, p *MarkUnknownParams) (*Record, error)
	// Resolve records an operator's or receipt lookup's decision on an unknown record (or a
	// pending one whose lease has expired) at p.Epoch. A record at another epoch (the operation
	// moved on: a later attempt claimed it) is a *StaleDecisionError; any other status is a
	// *StatusConflictError. Neither changes anything.
	Resolve(ctx context.Context, p *ResolveParams) (*Record, error)
	// Get returns the record for (tenant, key) or ErrNotFound.
	Get(ctx context.Context, p *GetParams) (*Record, error)
	// List returns records matching the filters, oldest update first, with a cursor.
	List(ctx context.Context, p *ListParams) (*ListResult, error)
	// Purge turns settled records past retention into tombstones and deletes tombstones past their
	// window, at most p.BatchSize rows per statement. It never purges a pending or unknown record
	// (it counts those past retention in PurgeResult.Unsettled), and a record's retention counts
	// from when it settled (Complete, Release, Resolve). A store that implements ApprovalStore
	// also deletes decided approvals past their ExpiresAt (never a pending one), in batches too.
	Purge(ctx context.Context, p *PurgeParams) (*PurgeResult, error)
	// Forget deletes every record of one tenant (and, in a store that implements ApprovalStore,
	// every approval of the tenant; in one that implements GrantStore, every standing grant of
	// the tenant, active ones included, so none approves the tenant's calls any more).
	Forget(ctx context.Context, p *ForgetParams) (*ForgetResult, error)
}

// Record is the durable row for one operation key. Arguments are never stored.
type Record struct {
	Tenant       string
	OperationKey string // "ok1_…"
	// Namespace is the Temporal namespace of the workflow whose claim created the record; ""
	// for a record claimed without one (or written before pgstore migration 002). oncekey's
	// reconciliation activities refuse to act on a record for a workflow of another namespace.
	Namespace   string
	Tool        string
	Version     string
	Fingerprint string // hex SHA-256, or "k1_" and a hex HMAC-SHA-256 (KeyedFingerprint)
	WorkflowID  string
	StepID      string
	Effect      Effect
	Status      Status
	Epoch       int64
	// LeaseUntil is when the current claim's lease ends (store clock). Zero when not pending.
	LeaseUntil time.Time
	// LeaseExpired reports, on the store's clock at the time of the read, whether a pending
	// record's lease has run out.
	LeaseExpired bool
	// Result is the stored result, opaque to the store (the interceptor stores encoded Temporal
	// payloads). Returned byte-for-byte.
	Result []byte
	// Failure is the stored definite failure, opaque to the store.
	Failure         []byte
	EffectReference string
	CreatedAt       time.Time
	UpdatedAt       time.Time
	// ExpiresAt is the end of retention; after it a settled record becomes a tombstone. It is
	// counted from the claim while the record is pending or unknown (which never expire) and
	// from the settling once it is settled (applied, failed, released).
	ExpiresAt time.Time
	// TombstoneUntil is when the tombstone expires and the key is free again (counted like
	// ExpiresAt).
	TombstoneUntil time.Time
	ResolvedBy     string
	Note           string
}

// ClaimParams are the arguments of Store.Claim.
type ClaimParams struct {
	Tenant       string
	OperationKey string
	// Namespace is the Temporal namespace of the calling workflow, stored with a new record (and
	// with a record taken over after its tombstone window). Optional.
	Namespace   string
	Tool        string
	Version     string
	Fingerprint string
	WorkflowID  string
	StepID      string
	Effect      Effect
	// ClaimToken identifies this claim. A claim the store acquires records its token; a Claim
	// repeated with the same non-zero token while that record is still pending (its lease live)
	// reports it Acquired at the same epoch, changing nothing. That makes a Claim whose outcome
	// is ambiguous (an error after the statement may have committed) safe to repeat. Callers
	// pass a random non-zero value, new for each claim they mean. Defaults to 0: the store picks
	// a random token, and a repeat of the call is a new claim.
	ClaimToken int64
	// Lease is the claim's lease, from the store's now. Required.
	Lease time.Duration
	// Retention is the record's retention: ExpiresAt is the claim's now plus Retention while
	// the record is pending or unknown (which never expire), and moves to the settling's now plus
	// Retention when it settles (Complete, Release, Resolve). Required.
	Retention time.Duration
	// Tombstone is the tombstone window after retention (counted like Retention). Required.
	Tombstone time.Duration
}

// ClaimResult is what Store.Claim found or did.
type ClaimResult struct {
	// Acquired: the caller owns the record at Record.Epoch and may run the body.
	Acquired bool
	// TookOver: acquired from an existing record (released, expired lease, or expired tombstone).
	TookOver bool
	// FingerprintMismatch: the record exists with another fingerprint; nothing changed.
	FingerprintMismatch bool
	// Expired: the record is a tombstone (or past retention, not yet purged).
	Expired bool
	// Record is the record after the claim.
	Record *Record
}

// RenewParams are the arguments of Store.Renew.
type RenewParams struct {
	Tenant, OperationKey string
	Epoch                int64
	Lease                time.Duration
}

// CompleteParams are the arguments of Store.Complete.
type CompleteParams struct {
	Tenant, OperationKey string
	Epoch                int64
	// Status is StatusApplied or StatusFailed.
	Status          Status
	Result          []byte
	Failure         []byte
	EffectReference string
}

// ReleaseParams are the arguments of Store.Release.
type ReleaseParams struct {
	Tenant, OperationKey string
	Epoch                int64
}

// MarkUnknownParams are the arguments of Store.MarkUnknown.
type MarkUnknownParams struct {
	Tenant, OperationKey string
	Epoch                int64
	// Failure describes what made the outcome unknown (opaque to the store).
	Failure []byte
}

// ResolveParams are the arguments of Store.Resolve.
type ResolveParams struct {
	Tenant, OperationKey string
	// Epoch is the record's epoch the decision was made on (Record.Epoch as read while it was
	// unknown). Required: a decision is about one episode of the operation, and must not land on a
	// later one.
	Epoch int64
	// Status is the decision: StatusApplied, StatusReleased (not applied) or StatusFailed.
	Status          Status
	Result          []byte
	Failure         []byte
	EffectReference string
	ResolvedBy      string
	Note            string
	// Signature is the resolution's signed statement (decisionsig.Signed's JSON), opaque to the
	// store, at most MaxSignatureBytes. Optional. A store that implements SignatureStore keeps it
	// with the settlement, for SignatureStore.ResolutionSignature; another ignores it.
	Signature []byte
}

// SignatureStore is implemented by stores that keep the signed statements of resolutions
// (ResolveParams.Signature): pgstore (from migration 010_decision_signatures), memstore and
// redisstore. The statements are kept apart from the Record, so that the records' statements
// work on a schema migrated before them; an approval's signed decision is Approval.Signature.
type SignatureStore interface {
	// ResolutionSignature returns the signed statement written by the Resolve that settled the
	// record of (p.Tenant, p.OperationKey) at its current epoch: nil when that resolution was
	// not signed, when the record was not settled by Resolve at this epoch, or when it is a
	// tombstone. No record: ErrNotFound.
	ResolutionSignature(ctx context.Context, p *GetParams) ([]byte, error)
}

// GetParams are the arguments of Store.Get.
type GetParams struct{ Tenant, OperationKey string }

// ListParams are the arguments of Store.List. Zero fields do not filter.
type ListParams struct {
	Status       Status
	Tenant       string
	Tool         string
	WorkflowID   string
	UpdatedSince time.Time
	// Cursor is ListResult.Next of the previous page; "" starts at the beginning.
	Cursor string
	// Limit is the page size. Defaults to 100; at most 10,000.
	Limit int
}

// ListResult is a page of records.
type ListResult struct {
	Records []*Record
	// Next is the cursor of the next page, "" after the last page.
	Next string
}

// DefaultPurgeBatchSize is PurgeParams.BatchSize when it is zero.
const DefaultPurgeBatchSize = 1000

// PurgeParams are the arguments of Store.Purge.
type PurgeParams struct {
	// BatchSize bounds the rows touched per statement. Defaults to DefaultPurgeBatchSize (1,000):
	// a batch that size is a few milliseconds of work, so claims running beside a purge wait
	// little, while the purge still runs at about half the rate of one DELETE of the same rows
	// (docs/benchmarks.md).
	BatchSize int
	// Progress, if set, is called after each batch with the running totals.
	Progress func(PurgeResult)
	// Rest is how long Purge pauses after each batch, as a multiple of the time the batch took,
	// so that claims have the server to themselves part of the time. Defaults to 1 (the purge
	// works at most half the time); a negative value means no pause. pgstore and redisstore honour it;
	// memstore, which shares no server, only releases its lock between batches.
	Rest float64
}

// PurgeResult counts what Purge did.
type PurgeResult struct {
	Tombstoned int64 // settled records past retention turned into tombstones
	Deleted    int64 // tombstones and settled records past their tombstone window deleted
	// ApprovalsDeleted counts the decided approvals past their Approval.ExpiresAt deleted (by a
	// store that implements ApprovalStore; a pending approval is never purged).
	ApprovalsDeleted int64
	// GrantsDeleted counts the standing grants deleted that ended (expired or were revoked)
	// longer ago than their CreateGrantParams.Retention (by a store that implements GrantStore).
	GrantsDeleted int64
	Batches       int
	// Unsettled counts the records past their retention that Purge left because they are
	// pending or unknown: nobody knows their outcome yet, so they are kept, however old, until
	// their owner or a reconciliation settles them (their retention then counts from the
	// settling). A growing count means unknown outcomes nobody resolves: see
	// `oncekey list --status unknown`.
	Unsettled int64
	// OldestUnsettled is the creation time of the oldest of them; zero when Unsettled is 0.
	OldestUnsettled time.Time
}

// ForgetParams are the arguments of Store.Forget.
type ForgetParams struct{ Tenant string }

// ForgetResult counts what Forget deleted.
type ForgetResult struct {
	Deleted int64 // records
	// ApprovalsDeleted counts the tenant's approvals deleted (by a store that implements
	// ApprovalStore).
	ApprovalsDeleted int64
	// GrantsDeleted counts the tenant's standing grants deleted, active ones included (by a
	// store that implements GrantStore): from then on they approve nothing, and their rule and
	// reason are gone.
	GrantsDeleted int64
}
