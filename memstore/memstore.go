package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/oncekey/oncekey"
)

// DefaultMaxResultBytes is the largest Result or Failure the store accepts when
// Options.MaxResultBytes is zero: 16 MiB.
const DefaultMaxResultBytes = 16 << 20

// Options configure a Store. The zero value (or nil) gives the defaults.
type Options struct {
	// Clock is the store's clock: leases, retention and tombstones are judged on it, never on a
	// caller's clock. Tests pass a fake clock to move time. Defaults to time.Now.
	Clock func() time.Time

	// MaxResultBytes is the largest Result or Failure (each) the store accepts; a larger one is
	// refused with *oncekey.ResultTooLargeError and nothing changes. Defaults to 16 MiB.
	MaxResultBytes int
}

// Store is an in-memory oncekey.Store. It is safe for concurrent use. The zero value is not
// usable; call New.
type Store struct {
	now      func() time.Time
	maxBytes int

	mu   sync.Mutex
	recs map[pk]*oncekey.Record
	// tokens holds the claim token of the claim that last acquired each record.
	tokens map[pk]int64
	// approvals holds the approval of each operation key that has one.
	approvals map[pk]*oncekey.Approval
	// approvalTokens holds the request token of the request that asked each approval's current
	// episode (0: a request without one, which no repeat matches).
	approvalTokens map[pk]int64
}

type pk struct{ tenant, key string }

var (
	_ oncekey.Store         = (*Store)(nil)
	_ oncekey.ApprovalStore = (*Store)(nil)
)

// New returns an empty Store. opts may be nil.
func New(opts *Options) *Store {
	s := &Store{now: time.Now, maxBytes: DefaultMaxResultBytes, recs: make(map[pk]*oncekey.Record), tokens: make(map[pk]int64),
		approvals: make(map[pk]*oncekey.Approval), approvalTokens: make(map[pk]int64)}
	if opts != nil {
		if opts.Clock != nil {
			s.now = opts.Clock
		}
		if opts.MaxResultBytes > 0 {
			s.maxBytes = opts.MaxResultBytes
		}
	}
	return s
}

// clock returns the store's now, without a monotonic reading and at microsecond resolution
// (the resolution Postgres keeps), so that records compare the same way in both stores.
func (s *Store) clock() time.Time { return s.now().Round(0).Truncate(time.Microsecond) }

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// view returns a copy of r for a caller, with LeaseExpired judged at now.
func view(r *oncekey.Record, now time.Time) *oncekey.Record {
	c := *r
	c.Result = cloneBytes(r.Result)
	c.Failure = cloneBytes(r.Failure)
	c.LeaseExpired = r.Status == oncekey.StatusPending && !now.Before(r.LeaseUntil)
	return &c
}

func (s *Store) checkSize(op, key string, bs ...[]byte) error {
	for _, b := range bs {
		if len(b) > s.maxBytes {
			return fmt.Errorf("memstore: %s %s: %w", op, key, &oncekey.ResultTooLargeError{OperationKey: key, Size: len(b), Limit: s.maxBytes})
		}
	}
	return nil
}

// Claim implements oncekey.Store.
func (s *Store) Claim(ctx context.Context, p *oncekey.ClaimParams) (*oncekey.ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: claim: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	k := pk{p.Tenant, p.OperationKey}
	r, ok := s.recs[k]
	fresh := func(epoch int64) *oncekey.Record {
		exp := now.Add(p.Retention)
		return &oncekey.Record{
			Tenant: p.Tenant, OperationKey: p.OperationKey, Namespace: p.Namespace, Tool: p.Tool, Version: p.Version,
			Fingerprint: p.Fingerprint, WorkflowID: p.WorkflowID, StepID: p.StepID, Effect: p.Effect,
			Status: oncekey.StatusPending, Epoch: epoch, LeaseUntil: now.Add(p.Lease),
			CreatedAt: now, UpdatedAt: now, ExpiresAt: exp, TombstoneUntil: exp.Add(p.Tombstone),
		}
	}
	switch {
	case !ok:
		r = fresh(1)
		s.recs[k] = r
		s.tokens[k] = token(p)
		return &oncekey.ClaimResult{Acquired: true, Record: view(r, now)}, nil
	case !now.Before(r.TombstoneUntil) && !unsettled(r):
		// The tombstone window is over: the key is free again.
		r = fresh(r.Epoch + 1)
		s.recs[k] = r
		s.tokens[k] = token(p)
		return &oncekey.ClaimResult{Acquired: true, TookOver: true, Record: view(r, now)}, nil
	case pastRetention(r, now):
		return &oncekey.ClaimResult{Expired: true, Record: view(r, now)}, nil
	case r.Fingerprint != p.Fingerprint:
		return &oncekey.ClaimResult{FingerprintMismatch: true, Record: view(r, now)}, nil
	}
	leaseOver := r.Status == oncekey.StatusPending && !now.Before(r.LeaseUntil)
	if r.Status == oncekey.StatusPending && !leaseOver && p.ClaimToken != 0 && s.tokens[k] == p.ClaimToken {
		// The repeat of the claim that acquired the record: acquired, at the same epoch.
		return &oncekey.ClaimResult{Acquired: true, Record: view(r, now)}, nil
	}
	switch {
	case r.Status == oncekey.StatusReleased || (leaseOver && r.Effect == oncekey.Idempotent):
		r.Status = oncekey.StatusPending
		r.Epoch++
		r.Effect = p.Effect
		r.LeaseUntil = now.Add(p.Lease)
		r.Result, r.Failure, r.EffectReference, r.ResolvedBy, r.Note = nil, nil, "", "", ""
		r.UpdatedAt = now
		s.tokens[k] = token(p)
		return &oncekey.ClaimResult{Acquired: true, TookOver: true, Record: view(r, now)}, nil
	case leaseOver:
		// Effectful and its owner is gone: the effect may have landed. The epoch stays.
		r.Status = oncekey.StatusUnknown
		r.LeaseUntil = time.Time{}
		r.UpdatedAt = now
	}
	return &oncekey.ClaimResult{Record: view(r, now)}, nil
}

// unsettled reports whether r has no known outcome yet (pending or unknown): such a record is
// never purged and never past retention, however old.
func unsettled(r *oncekey.Record) bool {
	return r.Status == oncekey.StatusPending || r.Status == oncekey.StatusUnknown
}

// pastRetention reports whether r is a tombstone or a settled record past its retention.
func pastRetention(r *oncekey.Record, now time.Time) bool {
	return r.Status == oncekey.StatusExpired || (!now.Before(r.ExpiresAt) && !unsettled(r))
}

// settleRetention restarts r's retention and tombstone windows at now, with the lengths the
// claim gave them: retention counts from when a record settles.
func settleRetention(r *oncekey.Record, now time.Time) {
	ret, tw := r.ExpiresAt.Sub(r.CreatedAt), r.TombstoneUntil.Sub(r.ExpiresAt)
	r.ExpiresAt = now.Add(ret)
	r.TombstoneUntil = r.ExpiresAt.Add(tw)
}

// token returns the claim token of p, or a random one when p leaves it to the store.
func token(p *oncekey.ClaimParams) int64 {
	if p.ClaimToken != 0 {
		return p.ClaimToken
	}
	return rand.Int64()
}

// fenced runs write on the record held at (tenant, key, epoch) if it is pending, under the lock.
func (s *Store) fenced(ctx context.Context, op, tenant, key string, epoch int64, write func(r *oncekey.Record, now time.Time)) (*oncekey.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: %s %s: %w", op, key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	r, ok := s.recs[pk{tenant, key}]
	if !ok {
		return nil, fmt.Errorf("memstore: %s %s: %w", op, key, oncekey.ErrNotFound)
	}
	if r.Epoch != epoch || r.Status != oncekey.StatusPending {
		return nil, fmt.Errorf("memstore: %s %s at epoch %d: %w", op, key, epoch, oncekey.ErrLostClaim)
	}
	write(r, now)
	r.UpdatedAt = now
	return view(r, now), nil
}

// Renew implements oncekey.Store.
func (s *Store) Renew(ctx context.Context, p *oncekey.RenewParams) (*oncekey.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "renew", p.Tenant, p.OperationKey, p.Epoch, func(r *oncekey.Record, now time.Time) {
		r.LeaseUntil = now.Add(p.Lease)
	})
}

// Complete implements oncekey.Store. Result and Failure over Options.MaxResultBytes are refused
// with *oncekey.ResultTooLargeError and change nothing.
func (s *Store) Complete(ctx context.Context, p *oncekey.CompleteParams) (*oncekey.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkSize("complete", p.OperationKey, p.Result, p.Failure); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "complete", p.Tenant, p.OperationKey, p.Epoch, func(r *oncekey.Record, now time.Time) {
		r.Status = p.Status
		r.Result = cloneBytes(p.Result)
		r.Failure = cloneBytes(p.Failure)
		r.EffectReference = p.EffectReference
		r.LeaseUntil = time.Time{}
		settleRetention(r, now)
	})
}

// Release implements oncekey.Store.
func (s *Store) Release(ctx context.Context, p *oncekey.ReleaseParams) (*oncekey.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "release", p.Tenant, p.OperationKey, p.Epoch, func(r *oncekey.Record, now time.Time) {
		r.Status = oncekey.StatusReleased
		r.LeaseUntil = time.Time{}
		settleRetention(r, now)
	})
}

// MarkUnknown implements oncekey.Store.
func (s *Store) MarkUnknown(ctx context.Context, p *oncekey.MarkUnknownParams) (*oncekey.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkSize("mark unknown", p.OperationKey, p.Failure); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "mark unknown", p.Tenant, p.OperationKey, p.Epoch, func(r *oncekey.Record, now time.Time) {
		r.Status = oncekey.StatusUnknown
		r.Failure = cloneBytes(p.Failure)
		r.LeaseUntil = time.Time{}
	})
}

// Resolve implements oncekey.Store.
func (s *Store) Resolve(ctx context.Context, p *oncekey.ResolveParams) (*oncekey.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkSize("resolve", p.OperationKey, p.Result, p.Failure); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: resolve %s: %w", p.OperationKey, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	r, ok := s.recs[pk{p.Tenant, p.OperationKey}]
	if !ok {
		return nil, fmt.Errorf("memstore: resolve %s: %w", p.OperationKey, oncekey.ErrNotFound)
	}
	expired := pastRetention(r, now)
	resolvable := r.Status == oncekey.StatusUnknown ||
		(r.Status == oncekey.StatusPending && !now.Before(r.LeaseUntil))
	if !expired && r.Epoch != p.Epoch {
		return nil, fmt.Errorf("memstore: resolve %s: %w", p.OperationKey, &oncekey.StaleDecisionError{
			OperationKey: p.OperationKey, Epoch: p.Epoch, Current: r.Epoch, Status: r.Status})
	}
	if expired || !resolvable {
		st := r.Status
		if expired {
			st = oncekey.StatusExpired
		}
		return nil, fmt.Errorf("memstore: resolve %s: %w", p.OperationKey, &oncekey.StatusConflictError{
			OperationKey: p.OperationKey, Status: st, Want: "only unknown records and pending records with an expired lease can be resolved"})
	}
	r.Status = p.Status
	r.Result = cloneBytes(p.Result)
	r.Failure = cloneBytes(p.Failure)
	r.EffectReference = p.EffectReference
	r.ResolvedBy = p.ResolvedBy
	r.Note = p.Note
	r.LeaseUntil = time.Time{}
	r.UpdatedAt = now
	settleRetention(r, now)
	return view(r, now), nil
}

// Get implements oncekey.Store.
func (s *Store) Get(ctx context.Context, p *oncekey.GetParams) (*oncekey.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: get %s: %w", p.OperationKey, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[pk{p.Tenant, p.OperationKey}]
	if !ok {
		return nil, fmt.Errorf("memstore: get %s: %w", p.OperationKey, oncekey.ErrNotFound)
	}
	return view(r, s.clock()), nil
}

// List implements oncekey.Store. Records come in (UpdatedAt, Tenant, OperationKey) order; the
// cursor is the last record's sort key, so a record that is not updated while a caller pages
// appears exactly once, and a record updated meanwhile moves to the end (it may appear again
// there) without making any other record be skipped or repeated.
func (s *Store) List(ctx context.Context, p *oncekey.ListParams) (*oncekey.ListResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var after *oncekey.ListCursor
	if p.Cursor != "" {
		c, err := oncekey.ParseListCursor(p.Cursor)
		if err != nil {
			return nil, err
		}
		after = &c
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: list: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	var out []*oncekey.Record
	for _, r := range s.recs {
		switch {
		case p.Status != "" && r.Status != p.Status,
			p.Tenant != "" && r.Tenant != p.Tenant,
			p.Tool != "" && r.Tool != p.Tool,
			p.WorkflowID != "" && r.WorkflowID != p.WorkflowID,
			!p.UpdatedSince.IsZero() && r.UpdatedAt.Before(p.UpdatedSince),
			after != nil && !after.Before(r):
			continue
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.UpdatedAt.Equal(b.UpdatedAt) {
			return a.UpdatedAt.Before(b.UpdatedAt)
		}
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		return a.OperationKey < b.OperationKey
	})
	res := &oncekey.ListResult{}
	limit := p.PageSize()
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		res.Next = oncekey.NextCursor(last)
	}
	for _, r := range out {
		res.Records = append(res.Records, view(r, now))
	}
	return res, nil
}

// Purge implements oncekey.Store. Each batch takes the lock once and touches at most
// p.BatchSize records (or approvals); claims run between batches. After the records it deletes
// the decided approvals past their ExpiresAt.
func (s *Store) Purge(ctx context.Context, p *oncekey.PurgeParams) (*oncekey.PurgeResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	n := p.Batch()
	var res oncekey.PurgeResult
	for _, deleting := range []bool{false, true} {
		for {
			if err := ctx.Err(); err != nil {
				return &res, fmt.Errorf("memstore: purge: %w", err)
			}
			done := s.purgeBatch(n, deleting)
			if done == 0 {
				break
			}
			if deleting {
				res.Deleted += int64(done)
			} else {
				res.Tombstoned += int64(done)
			}
			res.Batches++
			if p.Progress != nil {
				p.Progress(res)
			}
			if done < n {
				break
			}
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return &res, fmt.Errorf("memstore: purge: %w", err)
		}
		done := s.purgeApprovals(n)
		if done == 0 {
			break
		}
		res.ApprovalsDeleted += int64(done)
		res.Batches++
		if p.Progress != nil {
			p.Progress(res)
		}
		if done < n {
			break
		}
	}
	res.Unsettled, res.OldestUnsettled = s.unsettledPastRetention()
	return &res, nil
}

// unsettledPastRetention counts the unsettled records past their retention and returns the
// creation time of the oldest.
func (s *Store) unsettledPastRetention() (int64, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	var (
		n      int64
		oldest time.Time
	)
	for _, r := range s.recs {
		if unsettled(r) && !now.Before(r.ExpiresAt) {
			n++
			if oldest.IsZero() || r.CreatedAt.Before(oldest) {
				oldest = r.CreatedAt
			}
		}
	}
	return n, oldest
}

// purgeBatch deletes (deleting) tombstones past their window, or turns records past retention
// into tombstones, at most n of them, and returns how many.
func (s *Store) purgeBatch(n int, deleting bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	done := 0
	for k, r := range s.recs {
		if done == n {
			break
		}
		switch {
		case unsettled(r):
			continue // no outcome known yet: kept until it settles, however old
		case !now.Before(r.TombstoneUntil):
			if !deleting {
				continue
			}
			delete(s.recs, k)
			delete(s.tokens, k)
		case !now.Before(r.ExpiresAt) && r.Status != oncekey.StatusExpired:
			if deleting {
				continue
			}
			r.Status = oncekey.StatusExpired
			r.Result, r.Failure, r.EffectReference, r.Note = nil, nil, "", ""
			r.LeaseUntil = time.Time{}
			r.UpdatedAt = now
		default:
			continue
		}
		done++
	}
	return done
}

// Forget implements oncekey.Store: it deletes the tenant's records and approvals.
func (s *Store) Forget(ctx context.Context, p *oncekey.ForgetParams) (*oncekey.ForgetResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: forget: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var res oncekey.ForgetResult
	for k := range s.recs {
		if k.tenant == p.Tenant {
			delete(s.recs, k)
			delete(s.tokens, k)
			res.Deleted++
		}
	}
	for k := range s.approvals {
		if k.tenant == p.Tenant {
			delete(s.approvals, k)
			delete(s.approvalTokens, k)
			res.ApprovalsDeleted++
		}
	}
	return &res, nil
}
