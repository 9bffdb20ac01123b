package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/oncekey/oncekey/oncekeystore"
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
	// refused with *oncekeystore.ResultTooLargeError and nothing changes. Defaults to 16 MiB.
	MaxResultBytes int
}

// Store is an in-memory oncekeystore.Store. It is safe for concurrent use. The zero value is not
// usable; call New.
type Store struct {
	now      func() time.Time
	maxBytes int

	mu   sync.Mutex
	recs map[pk]*oncekeystore.Record
	// tokens holds the claim token of the claim that last acquired each record.
	tokens map[pk]int64
	// approvals holds the approval of each operation key that has one.
	approvals map[pk]*oncekeystore.Approval
	// approvalTokens holds the request token of the request that asked each approval's current
	// episode (0: a request without one, which no repeat matches).
	approvalTokens map[pk]int64
	// grants holds the standing grants by ID (made on first use).
	grants map[string]*grant
	// sigs holds the signed statement of each record's last signed resolution (made on first
	// use; see ResolutionSignature).
	sigs map[pk]resolutionSig
}

type pk struct{ tenant, key string }

var (
	_ oncekeystore.Store         = (*Store)(nil)
	_ oncekeystore.ApprovalStore = (*Store)(nil)
)

// New returns an empty Store. opts may be nil.
func New(opts *Options) *Store {
	s := &Store{now: time.Now, maxBytes: DefaultMaxResultBytes, recs: make(map[pk]*oncekeystore.Record), tokens: make(map[pk]int64),
		approvals: make(map[pk]*oncekeystore.Approval), approvalTokens: make(map[pk]int64)}
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
func view(r *oncekeystore.Record, now time.Time) *oncekeystore.Record {
	c := *r
	c.Result = cloneBytes(r.Result)
	c.Failure = cloneBytes(r.Failure)
	c.LeaseExpired = r.Status == oncekeystore.StatusPending && !now.Before(r.LeaseUntil)
	return &c
}

// checkSize refuses the first of bs over Options.MaxResultBytes with *oncekeystore.ResultTooLargeError.
func (s *Store) checkSize(op, key string, bs ...[]byte) error {
	for _, b := range bs {
		if len(b) > s.maxBytes {
			return wrap(op, key, &oncekeystore.ResultTooLargeError{OperationKey: key, Size: len(b), Limit: s.maxBytes})
		}
	}
	return nil
}

// wrap names the store, op and key (when not "") in err.
func wrap(op, key string, err error) error {
	if key == "" {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	return fmt.Errorf("memstore: %s %s: %w", op, key, err)
}

// locked returns fn's answer, run under the store's lock with the store's now; a done ctx is
// returned (named by op and key) without running it.
func locked[T any](ctx context.Context, s *Store, op, key string, fn func(now time.Time) (T, error)) (T, error) {
	if err := ctx.Err(); err != nil {
		var none T
		return none, wrap(op, key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return fn(s.clock())
}

// existing returns fn's answer on the item of m (records or approvals) at (tenant, key), run as
// locked does; without such an item it is oncekeystore.ErrNotFound.
func existing[T any](ctx context.Context, s *Store, m map[pk]T, op, tenant, key string, fn func(v T, now time.Time) (T, error)) (T, error) {
	return locked(ctx, s, op, key, func(now time.Time) (T, error) {
		v, ok := m[pk{tenant, key}]
		if !ok {
			return v, wrap(op, key, oncekeystore.ErrNotFound)
		}
		return fn(v, now)
	})
}

// get is Get and GetApproval: the item of m at p's key as view shows it at the store's now.
func get[T any](ctx context.Context, s *Store, m map[pk]T, op string, p *oncekeystore.GetParams, view func(v T, now time.Time) T) (T, error) {
	if err := p.Validate(); err != nil {
		var none T
		return none, err
	}
	return existing(ctx, s, m, op, p.Tenant, p.OperationKey, func(v T, now time.Time) (T, error) { return view(v, now), nil })
}

// list is List and ListApprovals: the items of m (records or approvals) as view shows them at
// the store's now that match and sort after the cursor after returns (nil: from the first),
// in the order less, cut to a page of limit; next is the cursor (made by cursor) of the page's
// last item when more follow, "" otherwise.
func list[T any, C interface{ Before(T) bool }](ctx context.Context, s *Store, op string, m map[pk]T, after func() (*C, error),
	view func(v T, now time.Time) T, match func(T) bool, less func(a, b T) bool, limit int, cursor func(T) string) (page []T, next string, err error) {
	c, err := after()
	if err != nil {
		return nil, "", err
	}
	page, err = locked(ctx, s, op, "", func(now time.Time) ([]T, error) {
		var out []T
		for _, v := range m {
			if v = view(v, now); match(v) && (c == nil || (*c).Before(v)) {
				out = append(out, v)
			}
		}
		return out, nil
	})
	if err != nil {
		return nil, "", err
	}
	sort.Slice(page, func(i, j int) bool { return less(page[i], page[j]) })
	if len(page) > limit {
		page = page[:limit]
		next = cursor(page[limit-1])
	}
	return page, next, nil
}

// purgeSteps runs each step's batches (a batch does at most n and says how many) until one does
// fewer than n, adding each batch's count to the step's counter of res and reporting progress.
func purgeSteps(ctx context.Context, p *oncekeystore.PurgeParams, res *oncekeystore.PurgeResult, n int, steps []purgeStep) error {
	for _, step := range steps {
		for {
			if err := ctx.Err(); err != nil {
				return wrap("purge", "", err)
			}
			done := step.batch(n)
			if done == 0 {
				break
			}
			*step.count += int64(done)
			res.Batches++
			if p.Progress != nil {
				p.Progress(*res)
			}
			if done < n {
				break
			}
		}
	}
	return nil
}

// purgeStep is one step of Purge: its batch and the counter of PurgeResult it adds to.
type purgeStep struct {
	batch func(n int) int
	count *int64
}

// Claim implements oncekeystore.Store.
func (s *Store) Claim(ctx context.Context, p *oncekeystore.ClaimParams) (*oncekeystore.ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap("claim", "", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return locked(ctx, s, "claim", "", func(now time.Time) (*oncekeystore.ClaimResult, error) { return s.claim(p, now), nil })
}

// claim is Claim under the lock, at now.
func (s *Store) claim(p *oncekeystore.ClaimParams, now time.Time) *oncekeystore.ClaimResult {
	k := pk{p.Tenant, p.OperationKey}
	r, ok := s.recs[k]
	fresh := func(epoch int64) *oncekeystore.Record {
		exp := now.Add(p.Retention)
		return &oncekeystore.Record{
			Tenant: p.Tenant, OperationKey: p.OperationKey, Namespace: p.Namespace, Tool: p.Tool, Version: p.Version,
			Fingerprint: p.Fingerprint, WorkflowID: p.WorkflowID, StepID: p.StepID, Effect: p.Effect,
			Status: oncekeystore.StatusPending, Epoch: epoch, LeaseUntil: now.Add(p.Lease),
			CreatedAt: now, UpdatedAt: now, ExpiresAt: exp, TombstoneUntil: exp.Add(p.Tombstone),
		}
	}
	switch {
	case !ok:
		r = fresh(1)
		s.recs[k] = r
		s.tokens[k] = token(p)
		return &oncekeystore.ClaimResult{Acquired: true, Record: view(r, now)}
	case !now.Before(r.TombstoneUntil) && !unsettled(r):
		// The tombstone window is over: the key is free again.
		r = fresh(r.Epoch + 1)
		s.recs[k] = r
		s.tokens[k] = token(p)
		return &oncekeystore.ClaimResult{Acquired: true, TookOver: true, Record: view(r, now)}
	case pastRetention(r, now):
		return &oncekeystore.ClaimResult{Expired: true, Record: view(r, now)}
	case r.Fingerprint != p.Fingerprint:
		return &oncekeystore.ClaimResult{FingerprintMismatch: true, Record: view(r, now)}
	}
	leaseOver := r.Status == oncekeystore.StatusPending && !now.Before(r.LeaseUntil)
	if r.Status == oncekeystore.StatusPending && !leaseOver && p.ClaimToken != 0 && s.tokens[k] == p.ClaimToken {
		// The repeat of the claim that acquired the record: acquired, at the same epoch.
		return &oncekeystore.ClaimResult{Acquired: true, Record: view(r, now)}
	}
	switch {
	case r.Status == oncekeystore.StatusReleased || (leaseOver && r.Effect == oncekeystore.Idempotent):
		r.Status = oncekeystore.StatusPending
		r.Epoch++
		r.Effect = p.Effect
		r.LeaseUntil = now.Add(p.Lease)
		r.Result, r.Failure, r.EffectReference, r.ResolvedBy, r.Note = nil, nil, "", "", ""
		r.UpdatedAt = now
		s.tokens[k] = token(p)
		return &oncekeystore.ClaimResult{Acquired: true, TookOver: true, Record: view(r, now)}
	case leaseOver:
		// Effectful and its owner is gone: the effect may have landed. The epoch stays.
		r.Status = oncekeystore.StatusUnknown
		r.LeaseUntil = time.Time{}
		r.UpdatedAt = now
	}
	return &oncekeystore.ClaimResult{Record: view(r, now)}
}

// unsettled reports whether r has no known outcome yet (pending or unknown): such a record is
// never purged and never past retention, however old.
func unsettled(r *oncekeystore.Record) bool {
	return r.Status == oncekeystore.StatusPending || r.Status == oncekeystore.StatusUnknown
}

// pastRetention reports whether r is a tombstone or a settled record past its retention.
func pastRetention(r *oncekeystore.Record, now time.Time) bool {
	return r.Status == oncekeystore.StatusExpired || (!now.Before(r.ExpiresAt) && !unsettled(r))
}

// settle gives r its outcome st at now: no lease, and retention counting from now
// (settleRetention).
func settle(r *oncekeystore.Record, st oncekeystore.Status, now time.Time) {
	r.Status = st
	r.LeaseUntil = time.Time{}
	settleRetention(r, now)
}

// settleRetention restarts r's retention and tombstone windows at now, with the lengths the
// claim gave them: retention counts from when a record settles.
func settleRetention(r *oncekeystore.Record, now time.Time) {
	ret, tw := r.ExpiresAt.Sub(r.CreatedAt), r.TombstoneUntil.Sub(r.ExpiresAt)
	r.ExpiresAt = now.Add(ret)
	r.TombstoneUntil = r.ExpiresAt.Add(tw)
}

// token returns the claim token of p, or a random one when p leaves it to the store.
func token(p *oncekeystore.ClaimParams) int64 {
	if p.ClaimToken != 0 {
		return p.ClaimToken
	}
	return rand.Int64()
}

// fenced runs write on the record held at (tenant, key, epoch) if it is pending, under the lock.
func (s *Store) fenced(ctx context.Context, op, tenant, key string, epoch int64, write func(r *oncekeystore.Record, now time.Time)) (*oncekeystore.Record, error) {
	return existing(ctx, s, s.recs, op, tenant, key, func(r *oncekeystore.Record, now time.Time) (*oncekeystore.Record, error) {
		if r.Epoch != epoch || r.Status != oncekeystore.StatusPending {
			return nil, wrap(op, fmt.Sprintf("%s at epoch %d", key, epoch), oncekeystore.ErrLostClaim)
		}
		write(r, now)
		r.UpdatedAt = now
		return view(r, now), nil
	})
}

// Renew implements oncekeystore.Store.
func (s *Store) Renew(ctx context.Context, p *oncekeystore.RenewParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "renew", p.Tenant, p.OperationKey, p.Epoch, func(r *oncekeystore.Record, now time.Time) {
		r.LeaseUntil = now.Add(p.Lease)
	})
}

// HandOff implements oncekeystore.HandOffStore. A document over Options.MaxResultBytes is
// refused with *oncekeystore.ResultTooLargeError and changes nothing.
func (s *Store) HandOff(ctx context.Context, p *oncekeystore.HandOffParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkSize("hand off", p.OperationKey, nil, p.HandOff); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "hand off", p.Tenant, p.OperationKey, p.Epoch, func(r *oncekeystore.Record, now time.Time) {
		r.LeaseUntil = now.Add(p.Lease)
		r.Failure = cloneBytes(p.HandOff)
	})
}

// Complete implements oncekeystore.Store. Result and Failure over Options.MaxResultBytes are refused
// with *oncekeystore.ResultTooLargeError and change nothing.
func (s *Store) Complete(ctx context.Context, p *oncekeystore.CompleteParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkSize("complete", p.OperationKey, p.Result, p.Failure); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "complete", p.Tenant, p.OperationKey, p.Epoch, func(r *oncekeystore.Record, now time.Time) {
		r.Result = cloneBytes(p.Result)
		r.Failure = cloneBytes(p.Failure)
		r.EffectReference = p.EffectReference
		settle(r, p.Status, now)
	})
}

// Release implements oncekeystore.Store.
func (s *Store) Release(ctx context.Context, p *oncekeystore.ReleaseParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "release", p.Tenant, p.OperationKey, p.Epoch, func(r *oncekeystore.Record, now time.Time) {
		settle(r, oncekeystore.StatusReleased, now)
	})
}

// MarkUnknown implements oncekeystore.Store.
func (s *Store) MarkUnknown(ctx context.Context, p *oncekeystore.MarkUnknownParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkSize("mark unknown", p.OperationKey, p.Failure); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "mark unknown", p.Tenant, p.OperationKey, p.Epoch, func(r *oncekeystore.Record, now time.Time) {
		r.Status = oncekeystore.StatusUnknown
		r.Failure = cloneBytes(p.Failure)
		r.LeaseUntil = time.Time{}
	})
}

// Resolve implements oncekeystore.Store.
func (s *Store) Resolve(ctx context.Context, p *oncekeystore.ResolveParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkSize("resolve", p.OperationKey, p.Result, p.Failure); err != nil {
		return nil, err
	}
	return existing(ctx, s, s.recs, "resolve", p.Tenant, p.OperationKey, func(r *oncekeystore.Record, now time.Time) (*oncekeystore.Record, error) {
		expired := pastRetention(r, now)
		resolvable := r.Status == oncekeystore.StatusUnknown ||
			(r.Status == oncekeystore.StatusPending && !now.Before(r.LeaseUntil))
		if !expired && r.Epoch != p.Epoch {
			return nil, wrap("resolve", p.OperationKey, &oncekeystore.StaleDecisionError{
				OperationKey: p.OperationKey, Epoch: p.Epoch, Current: r.Epoch, Status: r.Status})
		}
		if expired || !resolvable {
			st := r.Status
			if expired {
				st = oncekeystore.StatusExpired
			}
			return nil, wrap("resolve", p.OperationKey, &oncekeystore.StatusConflictError{
				OperationKey: p.OperationKey, Status: st, Want: "only unknown records and pending records with an expired lease can be resolved"})
		}
		r.Result = cloneBytes(p.Result)
		r.Failure = cloneBytes(p.Failure)
		r.EffectReference = p.EffectReference
		r.ResolvedBy = p.ResolvedBy
		r.Note = p.Note
		s.keepSignature(r, p.Signature)
		r.UpdatedAt = now
		settle(r, p.Status, now)
		return view(r, now), nil
	})
}

// Get implements oncekeystore.Store.
func (s *Store) Get(ctx context.Context, p *oncekeystore.GetParams) (*oncekeystore.Record, error) {
	return get(ctx, s, s.recs, "get", p, view)
}

// List implements oncekeystore.Store. Records come in (UpdatedAt, Tenant, OperationKey) order; the
// cursor is the last record's sort key, so a record that is not updated while a caller pages
// appears exactly once, and a record updated meanwhile moves to the end (it may appear again
// there) without making any other record be skipped or repeated.
func (s *Store) List(ctx context.Context, p *oncekeystore.ListParams) (*oncekeystore.ListResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	recs, next, err := list(ctx, s, "list", s.recs, p.After, view, func(r *oncekeystore.Record) bool {
		return matches([]string{string(p.Status), p.Tenant, p.Tool, p.WorkflowID}, string(r.Status), r.Tenant, r.Tool, r.WorkflowID) &&
			(p.UpdatedSince.IsZero() || !r.UpdatedAt.Before(p.UpdatedSince))
	}, lessRecord, p.PageSize(), oncekeystore.NextCursor)
	if err != nil {
		return nil, err
	}
	return &oncekeystore.ListResult{Records: recs, Next: next}, nil
}

// matches reports whether an item's values (status, tenant, tool, workflow ID) pass a listing's
// filters of them: each filter is "" (any) or the value.
func matches(filters []string, values ...string) bool {
	for i, f := range filters {
		if f != "" && f != values[i] {
			return false
		}
	}
	return true
}

// lessRecord orders records as List returns them: (UpdatedAt, Tenant, OperationKey).
func lessRecord(a, b *oncekeystore.Record) bool {
	return oncekeystore.ListCursor{UpdatedAt: a.UpdatedAt, Tenant: a.Tenant, OperationKey: a.OperationKey}.Before(b)
}

// Purge implements oncekeystore.Store. Each batch takes the lock once and touches at most
// p.BatchSize records (or approvals); claims run between batches. After the records it deletes
// the decided approvals past their ExpiresAt.
func (s *Store) Purge(ctx context.Context, p *oncekeystore.PurgeParams) (*oncekeystore.PurgeResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var res oncekeystore.PurgeResult
	err := purgeSteps(ctx, p, &res, p.Batch(), []purgeStep{
		{func(n int) int { return s.purgeBatch(n, false) }, &res.Tombstoned},
		{func(n int) int { return s.purgeBatch(n, true) }, &res.Deleted},
		{s.purgeApprovals, &res.ApprovalsDeleted},
		{s.purgeGrants, &res.GrantsDeleted},
	})
	if err != nil {
		return &res, err
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
	return sweep(s, s.recs, n, func(k pk, r *oncekeystore.Record, now time.Time) bool {
		switch {
		case unsettled(r):
			return false // no outcome known yet: kept until it settles, however old
		case !now.Before(r.TombstoneUntil):
			if !deleting {
				return false
			}
			delete(s.recs, k)
			delete(s.tokens, k)
			delete(s.sigs, k)
		case !now.Before(r.ExpiresAt) && r.Status != oncekeystore.StatusExpired:
			if deleting {
				return false
			}
			r.Status = oncekeystore.StatusExpired
			r.Result, r.Failure, r.EffectReference, r.Note = nil, nil, "", ""
			r.LeaseUntil = time.Time{}
			r.UpdatedAt = now
		default:
			return false
		}
		return true
	})
}

// sweep calls do on the items of m (records or approvals) under the lock, at the store's now,
// until do has reported n of them done (do reports whether it did one), and returns how many
// it did.
func sweep[T any](s *Store, m map[pk]T, n int, do func(k pk, v T, now time.Time) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	done := 0
	for k, v := range m {
		if done == n {
			break
		}
		if do(k, v, now) {
			done++
		}
	}
	return done
}

// Forget implements oncekeystore.Store: it deletes the tenant's records, approvals and grants.
func (s *Store) Forget(ctx context.Context, p *oncekeystore.ForgetParams) (*oncekeystore.ForgetResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return locked(ctx, s, "forget", "", func(time.Time) (*oncekeystore.ForgetResult, error) {
		return &oncekeystore.ForgetResult{
			Deleted:          forget(s.recs, s.tokens, p.Tenant, s.sigs),
			ApprovalsDeleted: forget(s.approvals, s.approvalTokens, p.Tenant),
			GrantsDeleted:    s.forgetGrants(p.Tenant),
		}, nil
	})
}

// forget deletes the tenant's items of m, and their tokens, and returns how many.
func forget[T any](m map[pk]T, tokens map[pk]int64, tenant string, sigs ...map[pk]resolutionSig) int64 {
	var n int64
	for k := range m {
		if k.tenant == tenant {
			delete(m, k)
			delete(tokens, k)
			for _, s := range sigs {
				delete(s, k)
			}
			n++
		}
	}
	return n
}
