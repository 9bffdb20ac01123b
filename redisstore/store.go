package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncekey/oncekey/internal/coalesce"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/redisstore/internal/lua"
)

// Defaults of Options.
const (
	DefaultBuckets        = 16
	DefaultMaxResultBytes = 16 << 20
	DefaultPrefix         = "oncekey:"
	// MaxBuckets is the largest Options.Buckets.
	MaxBuckets = 4096
)

// Options configure a Store. A nil *Options or a zero field means the default.
type Options struct {
	// Buckets is how many hash slots the records are spread over: a record lives in bucket
	// FNV-1a(tenant, NUL, key) mod Buckets, under the hash tag {b<n>} with that bucket's
	// indexes. More buckets spread a Redis Cluster's load over more nodes; List, Purge and
	// Forget send one script per bucket. It must stay the same for the life of the data under
	// Prefix (a record is looked for in one bucket only). Defaults to 16; at most MaxBuckets.
	Buckets int

	// Coalesce sends concurrent claims of this Store to Redis together, and concurrent fenced
	// writes (Complete, Renew, Release, MarkUnknown): the calls that arrive while pipelines of
	// their kind are in flight (four at most) go in the next, as one pipeline of scripts (see
	// coalesce.go). A call that finds fewer in flight is sent at once, alone, as without it.
	// Each call gets its own script's reply or error. A call whose context ends while its
	// pipeline is in flight returns at once with the context's error; its script may still
	// run. Defaults to false.
	Coalesce bool

	// MaxResultBytes is the largest Result or Failure (each) the store accepts; a larger one is
	// refused with *oncekeystore.ResultTooLargeError before anything is sent, and nothing changes.
	// Defaults to 16 MiB.
	MaxResultBytes int

	// Prefix starts every key the store writes, so that several stores (or tests) share one
	// Redis. It must not contain '{' or '}' (the hash tag follows it). Defaults to "oncekey:".
	Prefix string
}

// Store is the Redis oncekeystore.Store. It is safe for concurrent use; it holds no connection of its
// own beyond the client's pool.
type Store struct {
	rdb      redis.UniversalClient
	maxBytes int
	prefix   string
	layout   lua.Layout
	// bases[n] is the key base of bucket n: prefix + "{b<n>}" (layout.Bases).
	bases []string
	// claims and fences gather concurrent claims and fenced writes into pipelines
	// (Options.Coalesce; nil without it): see coalesce.go.
	claims, fences *coalesce.Queue[call, []any]
	// grantReads counts the grants the listing scripts read (grant.go), for the tests.
	grantReads atomic.Int64
}

var _ oncekeystore.Store = (*Store)(nil)

// New returns a Store on rdb (a *redis.Client, *redis.ClusterClient or failover client). opts
// may be nil. It sends nothing; Check tells whether the server is there and new enough. An
// option out of range is an *oncekeystore.InvalidParamsError (Op "new").
func New(rdb redis.UniversalClient, opts *Options) (*Store, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Buckets == 0 {
		o.Buckets = DefaultBuckets
	}
	if o.MaxResultBytes == 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	switch {
	case rdb == nil:
		return nil, &oncekeystore.InvalidParamsError{Op: "new", Field: "rdb", Reason: "is nil"}
	case o.Buckets < 0 || o.Buckets > MaxBuckets:
		return nil, &oncekeystore.InvalidParamsError{Op: "new", Field: "Buckets", Reason: fmt.Sprintf("%d is outside 1..%d", o.Buckets, MaxBuckets)}
	case o.MaxResultBytes < 0:
		return nil, &oncekeystore.InvalidParamsError{Op: "new", Field: "MaxResultBytes", Reason: "is negative"}
	case strings.ContainsAny(o.Prefix, "{}"):
		return nil, &oncekeystore.InvalidParamsError{Op: "new", Field: "Prefix", Reason: "must not contain '{' or '}' (the hash tag follows it)"}
	}
	s := &Store{rdb: rdb, maxBytes: o.MaxResultBytes, prefix: o.Prefix, layout: lua.NewLayout(o.Prefix, o.Buckets)}
	s.bases = s.layout.Bases
	if o.Coalesce {
		s.coalesceQueues()
	}
	return s, nil
}

// Prefix returns Options.Prefix: every key of the store starts with it.
func (s *Store) Prefix() string { return s.prefix }

// Check pings the server, refuses a Redis older than 7 (scripts that read TIME and then write
// need replication by effects, the only mode since 7.0), and loads the scripts (on every
// primary of a cluster). Call it at startup. An unreachable server is an error wrapping
// *oncekeystore.StoreUnavailableError; an old one an error naming the version found.
func (s *Store) Check(ctx context.Context) error {
	info, err := s.rdb.Info(ctx, "server").Result()
	if err != nil {
		return wrapErr("check", "", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			major, _, _ := strings.Cut(v, ".")
			if n, err := strconv.Atoi(major); err != nil || n < 7 {
				return fmt.Errorf("redisstore: check: Redis %s found; the store needs Redis 7 or later", v)
			}
		}
	}
	for _, sc := range lua.All {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return wrapErr("check", "", err)
		}
	}
	return nil
}

// recordKeys returns the keys the record scripts take (lua.Layout.RecordKeys).
func (s *Store) recordKeys(tenant, key string, purge bool) []string {
	return s.layout.RecordKeys(tenant, key, purge)
}

// blobArgs returns the script arguments of the byte fields bs (a flag and a value each: see
// bytesArgs), or a *oncekeystore.ResultTooLargeError of op on key for the first over
// Options.MaxResultBytes.
func (s *Store) blobArgs(op, key string, bs ...[]byte) ([]any, error) {
	args := make([]any, 0, 2*len(bs))
	for _, b := range bs {
		if len(b) > s.maxBytes {
			return nil, fmt.Errorf("redisstore: %s %s: %w", op, key, &oncekeystore.ResultTooLargeError{OperationKey: key, Size: len(b), Limit: s.maxBytes})
		}
		flag, v := bytesArgs(b)
		args = append(args, flag, v)
	}
	return args, nil
}

// token returns a random non-zero token.
func token() int64 {
	for {
		if v := rand.Int64(); v != 0 {
			return v
		}
	}
}

// bytesArgs returns the presence flag and the value of b as script arguments: nil is stored as
// an absent field, anything else byte for byte.
func bytesArgs(b []byte) (string, []byte) {
	if b == nil {
		return "0", []byte{}
	}
	return "1", b
}

// run runs script (EVALSHA, then EVAL if the server does not have it) and returns its reply.
func (s *Store) run(ctx context.Context, op, key string, script *redis.Script, keys []string, args ...any) ([]any, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrapErr(op, key, err)
	}
	v, err := s.runVia(ctx, call{script: script, keys: keys, args: args})
	if err != nil {
		return nil, wrapErr(op, key, err)
	}
	if len(v) == 0 {
		return nil, fmt.Errorf("redisstore: %s %s: empty reply", op, key)
	}
	return v, nil
}

// Claim implements oncekeystore.Store in one script, judged on the server's clock. A pending
// Effectful record whose lease ran out becomes unknown at its current epoch; a released record
// is acquired only by a claim with its fingerprint. A claim repeated by the client library after
// a lost reply carries the same claim token, so it reports the record it acquired.
func (s *Store) Claim(ctx context.Context, p *oncekeystore.ClaimParams) (*oncekeystore.ClaimResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	tok := p.ClaimToken
	if tok == 0 {
		tok = token()
	}
	v, err := s.run(ctx, "claim", p.OperationKey, lua.Claim, s.recordKeys(p.Tenant, p.OperationKey, true),
		p.Tenant, p.OperationKey, p.Tool, p.Version, p.Fingerprint, p.WorkflowID, p.StepID,
		int(p.Effect), p.Lease.Microseconds(), p.Retention.Microseconds(), p.Tombstone.Microseconds(), tok, p.Namespace)
	if err != nil {
		return nil, err
	}
	code := str(v[0])
	r, err := decodeReply(v)
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim %s: %w", p.OperationKey, err)
	}
	return &oncekeystore.ClaimResult{
		Acquired:            code == "A" || code == "T" || code == "S",
		TookOver:            code == "T",
		Expired:             code == "E",
		FingerprintMismatch: code == "M",
		Record:              r,
	}, nil
}

// fenced runs a write conditional on (tenant, key, epoch, pending) and maps the script's codes:
// N is ErrNotFound, L ErrLostClaim. Each call carries a new write token, so that the client
// library's repeat of a write whose reply was lost reports the write instead of ErrLostClaim.
// The script's arguments after op are args, then the byte fields blobs (see blobArgs: one over
// Options.MaxResultBytes is refused, and nothing is sent).
func (s *Store) fenced(ctx context.Context, op, tenant, key string, epoch int64, args []any, blobs ...[]byte) (*oncekeystore.Record, error) {
	name := op
	switch op {
	case "unknown":
		name = "mark unknown"
	case "handoff":
		name = "hand off"
	}
	b, err := s.blobArgs(name, key, blobs...)
	if err != nil {
		return nil, err
	}
	a := append(append([]any{tenant, key, epoch, token(), op}, args...), b...)
	v, err := s.run(ctx, name, key, lua.Fenced, s.recordKeys(tenant, key, true), a...)
	if err != nil {
		return nil, err
	}
	switch str(v[0]) {
	case "N":
		return nil, fmt.Errorf("redisstore: %s %s: %w", name, key, oncekeystore.ErrNotFound)
	case "L":
		return nil, fmt.Errorf("redisstore: %s %s at epoch %d: %w", name, key, epoch, oncekeystore.ErrLostClaim)
	}
	r, err := decodeReply(v)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s %s: %w", name, key, err)
	}
	return r, nil
}

// Renew implements oncekeystore.Store.
func (s *Store) Renew(ctx context.Context, p *oncekeystore.RenewParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "renew", p.Tenant, p.OperationKey, p.Epoch, []any{p.Lease.Microseconds()})
}

// HandOff implements oncekeystore.HandOffStore in one script. A document over
// Options.MaxResultBytes is refused with *oncekeystore.ResultTooLargeError and changes nothing.
func (s *Store) HandOff(ctx context.Context, p *oncekeystore.HandOffParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "handoff", p.Tenant, p.OperationKey, p.Epoch, []any{p.Lease.Microseconds()}, p.HandOff)
}

// Complete implements oncekeystore.Store in one script. Result and Failure over
// Options.MaxResultBytes are refused with *oncekeystore.ResultTooLargeError and change nothing.
func (s *Store) Complete(ctx context.Context, p *oncekeystore.CompleteParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "complete", p.Tenant, p.OperationKey, p.Epoch, []any{string(p.Status), p.EffectReference}, p.Result, p.Failure)
}

// Release implements oncekeystore.Store.
func (s *Store) Release(ctx context.Context, p *oncekeystore.ReleaseParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "release", p.Tenant, p.OperationKey, p.Epoch, nil)
}

// MarkUnknown implements oncekeystore.Store. A Failure over Options.MaxResultBytes is refused with
// *oncekeystore.ResultTooLargeError and changes nothing.
func (s *Store) MarkUnknown(ctx context.Context, p *oncekeystore.MarkUnknownParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.fenced(ctx, "unknown", p.Tenant, p.OperationKey, p.Epoch, nil, p.Failure)
}

// Resolve implements oncekeystore.Store in one script: an unknown record, or a pending one whose
// lease ran out on the server's clock, at p.Epoch takes the decision; a record at another epoch
// is a *oncekeystore.StaleDecisionError, any other (a record past retention reports status expired)
// a *oncekeystore.StatusConflictError, and neither changes anything.
func (s *Store) Resolve(ctx context.Context, p *oncekeystore.ResolveParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	blobs, err := s.blobArgs("resolve", p.OperationKey, p.Result, p.Failure)
	if err != nil {
		return nil, err
	}
	args := append([]any{p.Tenant, p.OperationKey, token(), string(p.Status), p.EffectReference, p.ResolvedBy, p.Note}, blobs...)
	v, err := s.run(ctx, "resolve", p.OperationKey, lua.Resolve, s.recordKeys(p.Tenant, p.OperationKey, true), append(args, p.Epoch, p.Signature)...)
	if err != nil {
		return nil, err
	}
	switch str(v[0]) {
	case "N":
		return nil, fmt.Errorf("redisstore: resolve %s: %w", p.OperationKey, oncekeystore.ErrNotFound)
	case "S":
		var cur int64
		if len(v) > 2 {
			cur, _ = strconv.ParseInt(str(v[2]), 10, 64)
		}
		return nil, fmt.Errorf("redisstore: resolve %s: %w", p.OperationKey, &oncekeystore.StaleDecisionError{
			OperationKey: p.OperationKey, Epoch: p.Epoch, Current: cur, Status: oncekeystore.Status(str(v[1]))})
	case "C":
		var st string
		if len(v) > 1 {
			st = str(v[1])
		}
		return nil, fmt.Errorf("redisstore: resolve %s: %w", p.OperationKey, &oncekeystore.StatusConflictError{
			OperationKey: p.OperationKey, Status: oncekeystore.Status(st), Want: "only unknown records and pending records with an expired lease can be resolved"})
	}
	r, err := decodeReply(v)
	if err != nil {
		return nil, fmt.Errorf("redisstore: resolve %s: %w", p.OperationKey, err)
	}
	return r, nil
}

// Get implements oncekeystore.Store: one script, so that LeaseExpired is judged on the server's
// clock.
func (s *Store) Get(ctx context.Context, p *oncekeystore.GetParams) (*oncekeystore.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	v, err := s.run(ctx, "get", p.OperationKey, lua.Get, s.recordKeys(p.Tenant, p.OperationKey, false)[:1])
	if err != nil {
		return nil, err
	}
	if str(v[0]) == "N" {
		return nil, fmt.Errorf("redisstore: get %s: %w", p.OperationKey, oncekeystore.ErrNotFound)
	}
	r, err := decodeReply(v)
	if err != nil {
		return nil, fmt.Errorf("redisstore: get %s: %w", p.OperationKey, err)
	}
	return r, nil
}

// ---- replies -------------------------------------------------------------------------------

// recordFields is the number of record fields a reply carries after its code and the server's
// now.
const recordFields = lua.RecordFields

// decodeReply reads {code, now, fields...} of a record.
func decodeReply(v []any) (*oncekeystore.Record, error) {
	return decodeReplyOf(v, recordFields, decodeRecord)
}

// decodeReplyOf reads a script's reply {code, now, n fields...} with decode.
func decodeReplyOf[T any](v []any, n int, decode func(f []any, now int64) (T, error)) (T, error) {
	if len(v) != 2+n {
		var none T
		return none, fmt.Errorf("reply of %d values, want %d", len(v), 2+n)
	}
	now, err := strconv.ParseInt(str(v[1]), 10, 64)
	if err != nil {
		var none T
		return none, fmt.Errorf("reply: server time %q: %w", str(v[1]), err)
	}
	return decode(v[2:], now)
}

// decodeRecord reads the fields of F, with LeaseExpired judged at now (µs, server clock).
func decodeRecord(f []any, now int64) (*oncekeystore.Record, error) {
	d := fields{f: f, what: "record", absentIsZero: true}
	r := &oncekeystore.Record{
		Tenant: str(f[0]), OperationKey: str(f[1]), Tool: str(f[2]), Version: str(f[3]), Fingerprint: str(f[4]),
		WorkflowID: str(f[5]), StepID: str(f[6]), Effect: oncekeystore.Effect(d.num(7)), Status: oncekeystore.Status(str(f[8])),
		Epoch: d.num(9), LeaseUntil: d.at(10), Result: bytesOf(f[11]), Failure: bytesOf(f[12]), EffectReference: str(f[13]),
		CreatedAt: d.at(14), UpdatedAt: d.at(15), ExpiresAt: d.at(16), TombstoneUntil: d.at(17), ResolvedBy: str(f[18]), Note: str(f[19]),
		Namespace: str(f[20]),
	}
	r.LeaseExpired = r.Status == oncekeystore.StatusPending && f[10] != nil && now >= d.num(10)
	return r, d.err(8)
}

// fields reads the numbers and times of a reply's fields f (of a record or an approval: what),
// keeping the first problem.
type fields struct {
	f    []any
	what string
	// absentIsZero: an absent number reads 0 (else it is a problem).
	absentIsZero bool
	bad          error
}

// num reads field i as a number.
func (d *fields) num(i int) int64 {
	if d.f[i] == nil && d.absentIsZero {
		return 0
	}
	n, err := strconv.ParseInt(str(d.f[i]), 10, 64)
	if err != nil && d.bad == nil {
		d.bad = fmt.Errorf("%s field %d: %q is not a number", d.what, i, str(d.f[i]))
	}
	return n
}

// at reads field i as a time in Unix microseconds; absent is the zero time.
func (d *fields) at(i int) time.Time {
	if d.f[i] == nil {
		return time.Time{}
	}
	return time.UnixMicro(d.num(i))
}

// err returns the problem of the fields: none without status (field status), else the first
// number that was not one.
func (d *fields) err(status int) error {
	if d.f[status] == nil {
		return fmt.Errorf("%s without a status", d.what)
	}
	return d.bad
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case []byte:
		return string(x)
	}
	return ""
}

// bytesOf returns a stored byte field: nil when absent, a copy otherwise (never nil when
// present, even when empty).
func bytesOf(v any) []byte {
	if v == nil {
		return nil
	}
	return []byte(str(v))
}

// ---- errors --------------------------------------------------------------------------------

// unavailable reports whether err means the server could not be reached, went away, or refuses
// work for now: the caller must fail closed and may retry later.
func unavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	// Server replies that mean "not now": loading a dataset, a replica or a cluster in
	// failover, a script running too long, out of memory, persistence failing.
	for _, prefix := range []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "OOM", "MISCONF", "NOREPLICAS", "MOVED", "ASK"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}

// wrapErr names the operation and wraps an unreachable server in *oncekeystore.StoreUnavailableError.
func wrapErr(op, key string, err error) error {
	if unavailable(err) {
		err = &oncekeystore.StoreUnavailableError{Op: op, Err: err}
	}
	if key == "" {
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return fmt.Errorf("redisstore: %s %s: %w", op, key, err)
}

// ---- list, purge, forget -------------------------------------------------------------------

// call is one script call of a pipelined batch.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
}

// runAll sends calls in one pipeline (one round trip per node) with EVALSHA, loads the scripts a
// server did not have and sends those calls again, and returns each call's reply.
func (s *Store) runAll(ctx context.Context, op string, calls []call) ([][]any, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrapErr(op, "", err)
	}
	out := make([][]any, len(calls))
	todo := make([]int, len(calls))
	for i := range todo {
		todo[i] = i
	}
	for attempt := 0; len(todo) > 0; attempt++ {
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(todo))
		for j, i := range todo {
			c := calls[i]
			cmds[j] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
		_, _ = pipe.Exec(ctx) // each command's error is read below
		var again []int
		for j, i := range todo {
			v, err := cmds[j].Slice()
			switch {
			case err == nil:
				out[i] = v
			case redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0:
				if err := calls[i].script.Load(ctx, s.rdb).Err(); err != nil {
					return nil, wrapErr(op, "", err)
				}
				again = append(again, i)
			default:
				return nil, wrapErr(op, "", err)
			}
		}
		todo = again
	}
	return out, nil
}

// stream is one bucket's part of a listing: matching records (or approvals) in order, read a
// chunk at a time.
type stream[T any] struct {
	key  string // the index read
	base string // record (or approval) key base
	from string // BYLEX bound of the next read
	buf  []T
	done bool
}

// items is how a listing reads one kind of item (records or approvals): the script that reads a
// bucket's index, the key part after a bucket's key base, how replies decode, the order, and
// the cursors.
type items[T any] struct {
	script *redis.Script
	prefix string // ":r:", ":ap:"
	fields int
	decode func(f []any, now int64) (T, error)
	less   func(a, b T) bool
	// next returns the cursor that resumes a listing after an item; after reads one back as
	// the sort key it resumes after.
	next  func(T) string
	after func(cursor string) (sortKey, error)
}

// recordItems is how List reads records.
var recordItems = items[*oncekeystore.Record]{script: lua.List, prefix: ":r:", fields: recordFields, decode: decodeRecord,
	less: less, next: oncekeystore.NextCursor, after: recordsAfter}

// listing is what a List or ListApprovals page reads: the streams of the buckets, what they
// hold, the filters and where the page starts.
type listing[T any] struct {
	op string
	items[T]
	streams []*stream[T]
	// index returns a bucket's index the listing reads (bucket is the bucket's key base).
	index func(bucket string) string
	// tenant, if set, is the tenant whose index the streams read (the scripts' kind 't').
	tenant                   string
	status, tool, workflowID string
	// cursor is the cursor the page resumes after ("": the first page); since, if not zero, is
	// the earliest time listed.
	cursor string
	since  time.Time
}

// page returns up to want items of the buckets' streams, merged in order. Each bucket's index is
// read by scripts that look at a bounded number of entries (1,000) and filter on the server.
func (l *listing[T]) page(ctx context.Context, s *Store, want int) ([]T, error) {
	var out []T
	for len(out) < want {
		// Refill every bucket that has nothing buffered and may hold more: its next item may be
		// the smallest.
		var need []*stream[T]
		for _, st := range l.streams {
			if len(st.buf) == 0 && !st.done {
				need = append(need, st)
			}
		}
		if len(need) > 0 {
			chunk := min(500, max(16, 2*(want-len(out))/len(l.streams)))
			kind := "a"
			if l.tenant != "" {
				kind = "t"
			}
			calls := make([]call, len(need))
			for i, st := range need {
				calls[i] = call{l.script, []string{st.key}, []any{st.base, kind, l.tenant, st.from, chunk, 1000, l.status, l.tool, l.workflowID}}
			}
			replies, err := s.runAll(ctx, l.op, calls)
			if err != nil {
				return nil, err
			}
			for i, v := range replies {
				if err := l.fill(need[i], v); err != nil {
					return nil, fmt.Errorf("redisstore: %s: %w", l.op, err)
				}
			}
			continue
		}
		var next *stream[T]
		for _, st := range l.streams {
			if len(st.buf) > 0 && (next == nil || l.less(st.buf[0], next.buf[0])) {
				next = st
			}
		}
		if next == nil {
			break
		}
		out = append(out, next.buf[0])
		next.buf = next.buf[1:]
	}
	return out, nil
}

// fill reads a reply of the listing's script ({now, last member, done, fields...}) into st.
func (l *listing[T]) fill(st *stream[T], v []any) error {
	if len(v) < 3 || (len(v)-3)%l.fields != 0 {
		return fmt.Errorf("%s reply of %d values", l.op, len(v))
	}
	now, err := strconv.ParseInt(str(v[0]), 10, 64)
	if err != nil {
		return fmt.Errorf("%s reply: server time %q", l.op, str(v[0]))
	}
	if last := str(v[1]); last != "" {
		st.from = "(" + last
	}
	st.done = str(v[2]) == "1"
	for f := v[3:]; len(f) > 0; f = f[l.fields:] {
		r, err := l.decode(f[:l.fields], now)
		if err != nil {
			return err
		}
		st.buf = append(st.buf, r)
	}
	return nil
}

// List implements oncekeystore.Store with keyset pagination in (updated_at, tenant, operation_key)
// order. Each bucket keeps its records in that order in an index (per tenant with
// ListParams.Tenant; the unknown records with Status unknown; else all); a page merges the
// buckets' indexes, each read by scripts that look at a bounded number of entries (1,000) and
// filter on the server, so no call holds the server for long. The cursor is the last record's
// sort key, so a record that is not updated while a caller pages appears exactly once; a record
// updated meanwhile moves to the end (it may appear again there) without making any other
// record be skipped or repeated. Pages are not one snapshot.
func (s *Store) List(ctx context.Context, p *oncekeystore.ListParams) (*oncekeystore.ListResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	l := &listing[*oncekeystore.Record]{op: "list", items: recordItems, cursor: p.Cursor, since: p.UpdatedSince,
		tenant: p.Tenant, status: string(p.Status), tool: p.Tool, workflowID: p.WorkflowID,
		index: func(b string) string {
			switch {
			case p.Tenant != "":
				return b + ":t:" + p.Tenant
			case p.Status == oncekeystore.StatusUnknown:
				return b + ":unk"
			}
			return b + ":all"
		}}
	out, next, err := l.read(ctx, s, p.PageSize())
	if err != nil {
		return nil, err
	}
	return &oncekeystore.ListResult{Records: out, Next: next}, nil
}

// less orders records as List returns them: (UpdatedAt, Tenant, OperationKey), byte-wise.
func less(a, b *oncekeystore.Record) bool {
	return oncekeystore.ListCursor{UpdatedAt: a.UpdatedAt, Tenant: a.Tenant, OperationKey: a.OperationKey}.Before(b)
}

// recordsAfter reads a List cursor as the sort key it resumes after.
func recordsAfter(cursor string) (sortKey, error) {
	c, err := oncekeystore.ParseListCursor(cursor)
	return sortKey{c.UpdatedAt, c.Tenant, c.OperationKey}, err
}

// read returns the page of at most limit items after the listing's cursor, merged from a stream
// per bucket, and the cursor of the next page ("" after the last).
func (l *listing[T]) read(ctx context.Context, s *Store, limit int) ([]T, string, error) {
	var after *sortKey
	if l.cursor != "" {
		k, err := l.after(l.cursor)
		if err != nil {
			return nil, "", err
		}
		after = &k
	}
	from := keysetFrom(l.tenant, after, l.since)
	for _, b := range s.bases {
		l.streams = append(l.streams, &stream[T]{key: l.index(b), base: b + l.prefix, from: from})
	}
	out, err := l.page(ctx, s, limit+1)
	if err != nil || len(out) <= limit {
		return out, "", err
	}
	return out[:limit], l.next(out[limit-1]), nil
}

func hex16(us int64) string { return fmt.Sprintf("%016x", us) }

// sortKey is where a keyset listing resumes: the time an index orders by (updated for records,
// requested for approvals), tenant and key.
type sortKey struct {
	at          time.Time
	tenant, key string
}

// keysetFrom returns the BYLEX bound where a listing starts: after the sort key after (if not
// nil), and at or after since (if not zero), whichever is later. Index members start with
// hex16(time); a tenant's index (tenant set) then holds the key only.
func keysetFrom(tenant string, after *sortKey, since time.Time) string {
	from := "-"
	var cu int64 = -1
	if after != nil {
		cu = after.at.UnixMicro()
		switch {
		case tenant == "":
			from = "(" + hex16(cu) + after.tenant + "\x00" + after.key
		case after.tenant == tenant:
			from = "(" + hex16(cu) + after.key
		case after.tenant < tenant:
			from = "[" + hex16(cu)
		default:
			from = "[" + hex16(cu+1)
		}
	}
	if !since.IsZero() {
		if s := max(0, since.UnixMicro()); s > cu {
			from = "[" + hex16(s)
		}
	}
	return from
}

// Purge implements oncekeystore.Store. It first turns records past retention into tombstones
// (status expired; result, failure, effect reference and note cleared; digests, epoch and
// windows kept), leaving pending records under a live lease to their owner, then deletes
// tombstones past their window, then deletes the decided approvals past their retention (never
// a pending one). A batch is one script per bucket that has work, sent in one
// pipeline, touching at most p.BatchSize records in all; the records come from the buckets'
// time-ordered indexes, so no script scans. After each full batch it pauses for p.Rest times
// the batch's duration, through one PurgeParams.Pacer for the run (a pause that overslept
// shortens the next). Batches counts batches that changed at least one record; p.Progress is
// called after each. On an error the counts so far are returned with it.
func (s *Store) Purge(ctx context.Context, p *oncekeystore.PurgeParams) (*oncekeystore.PurgeResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	n := p.Batch()
	// One pacer for the whole run: what a pause overslept counts against the next one.
	pace := p.Pacer()
	var res oncekeystore.PurgeResult
	for _, deleting := range []bool{false, true} {
		index := ":exp"
		if deleting {
			index = ":tomb"
		}
		left, err := s.due(ctx, index)
		if err != nil {
			return &res, err
		}
		skip := make([]int64, len(s.bases))
		for {
			which, quotas := plan(left, n)
			calls := make([]call, len(which))
			for j, i := range which {
				b, q := s.bases[i], quotas[j]
				if deleting {
					calls[j] = call{lua.Delete, []string{b + ":tomb", b + ":all", b + ":unk", b + ":exp"}, []any{b + ":r:", b + ":t:", q}}
				} else {
					calls[j] = call{lua.Tombstone, []string{b + ":exp", b + ":all", b + ":unk"}, []any{b + ":r:", b + ":t:", q, skip[i], 64}}
				}
			}
			if len(calls) == 0 {
				break
			}
			start := time.Now()
			replies, err := s.runAll(ctx, "purge", calls)
			if err != nil {
				return &res, err
			}
			var done int64
			for j, v := range replies {
				i := which[j]
				if len(v) < 2 {
					return &res, fmt.Errorf("redisstore: purge: reply of %d values", len(v))
				}
				d, _ := v[0].(int64)
				done += d
				left[i] -= d
				if deleting {
					if len(v) > 2 {
						kept, _ := v[2].(int64)
						left[i] -= kept
					}
				} else {
					sk, _ := v[1].(int64)
					skip[i] += sk
					left[i] -= sk
					if len(v) > 4 {
						u, _ := v[3].(int64)
						res.Unsettled += u
						keepOldest(&res.OldestUnsettled, v[4])
					}
				}
				if str(v[2-b2i(deleting)]) == "1" {
					left[i] = 0
				}
			}
			if done > 0 {
				if deleting {
					res.Deleted += done
				} else {
					res.Tombstoned += done
				}
				res.Batches++
				if p.Progress != nil {
					p.Progress(res)
				}
			}
			if done == int64(n) {
				if err := pace.Pause(ctx, time.Since(start)); err != nil {
					return &res, wrapErr("purge", "", err)
				}
			}
		}
	}
	if err := s.purgeApprovals(ctx, p, pace, &res); err != nil {
		return &res, err
	}
	if err := s.purgeGrants(ctx, p, pace, &res); err != nil {
		return &res, err
	}
	return &res, nil
}

// keepOldest sets *oldest to the time v (Unix microseconds as a script returns them; "" for
// none) when it is earlier, or *oldest is zero.
func keepOldest(oldest *time.Time, v any) {
	us, err := strconv.ParseInt(str(v), 10, 64)
	if err != nil {
		return
	}
	if t := time.UnixMicro(us); oldest.IsZero() || t.Before(*oldest) {
		*oldest = t
	}
}

// due returns, per bucket, how many members of the bucket's time index (index, scored by time)
// are due on the server's clock now: the plan of a purge step's batches. The scripts judge each
// entry on the server's clock again.
func (s *Store) due(ctx context.Context, index string) ([]int64, error) {
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return nil, wrapErr("purge", "", err)
	}
	pipe := s.rdb.Pipeline()
	counts := make([]*redis.IntCmd, len(s.bases))
	for i, b := range s.bases {
		counts[i] = pipe.ZCount(ctx, b+index, "-inf", strconv.FormatInt(now.UnixMicro(), 10))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrapErr("purge", "", err)
	}
	left := make([]int64, len(s.bases))
	for i, c := range counts {
		left[i] = c.Val()
	}
	return left, nil
}

// plan shares a purge batch of n among the buckets by what each has left to do (left, in the
// order of Store.bases): the buckets that get work, in order, and how much each gets.
func plan(left []int64, n int) (which []int, quotas []int64) {
	quota := int64(n)
	for i, l := range left {
		if quota == 0 {
			break
		}
		if l <= 0 {
			continue
		}
		q := min(l, quota)
		quota -= q
		which = append(which, i)
		quotas = append(quotas, q)
	}
	return which, quotas
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// forgetBatch is how many records one Forget script deletes at most.
const forgetBatch = 200

// Forget implements oncekeystore.Store: every grant of the tenant (ended first: forgetGrants), then
// every record, then every approval of the tenant, is deleted through the tenant's index in each bucket, at most 200 per script, one
// script per bucket per round trip.
func (s *Store) Forget(ctx context.Context, p *oncekeystore.ForgetParams) (*oncekeystore.ForgetResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	// The grants first: once they are gone, no approval is recorded under one, so the
	// approvals deleted below are all there are.
	grants, err := s.forgetGrants(ctx, p.Tenant)
	if err != nil {
		return &oncekeystore.ForgetResult{GrantsDeleted: grants}, err
	}
	deleted, err := s.drain(ctx, func(b string) call {
		return call{lua.Forget, []string{b + ":t:" + p.Tenant, b + ":all", b + ":unk", b + ":exp", b + ":tomb"}, []any{b + ":r:", p.Tenant, forgetBatch}}
	})
	if err != nil {
		return &oncekeystore.ForgetResult{Deleted: deleted, GrantsDeleted: grants}, err
	}
	approvals, err := s.drain(ctx, func(b string) call {
		return call{lua.ForgetApprovals, []string{b + ":apt:" + p.Tenant, b + ":apall", b + ":apexp"}, []any{b + ":ap:", p.Tenant, forgetBatch}}
	})
	return &oncekeystore.ForgetResult{Deleted: deleted, ApprovalsDeleted: approvals, GrantsDeleted: grants}, err
}

// drain runs the deleting script of mk in every bucket, in one pipeline per round, until each
// bucket's reply {deleted, "1" when nothing is left} says it is done, and returns how many it
// deleted in all (also on an error: what was deleted before it).
func (s *Store) drain(ctx context.Context, mk func(base string) call) (int64, error) {
	var deleted int64
	todo := append([]string(nil), s.bases...)
	for len(todo) > 0 {
		calls := make([]call, len(todo))
		for i, b := range todo {
			calls[i] = mk(b)
		}
		replies, err := s.runAll(ctx, "forget", calls)
		if err != nil {
			return deleted, err
		}
		var again []string
		for i, v := range replies {
			if len(v) < 2 {
				return deleted, fmt.Errorf("redisstore: forget: reply of %d values", len(v))
			}
			d, _ := v[0].(int64)
			deleted += d
			if str(v[1]) != "1" {
				again = append(again, todo[i])
			}
		}
		todo = again
	}
	return deleted, nil
}

var _ oncekeystore.SignatureStore = (*Store)(nil)

// ResolutionSignature implements oncekeystore.SignatureStore in one script: the signed statement
// the record keeps (field sig) only when it was written at the record's current epoch (sige)
// and the record is no tombstone.
func (s *Store) ResolutionSignature(ctx context.Context, p *oncekeystore.GetParams) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "resolution signature"
	v, err := s.run(ctx, op, p.OperationKey, lua.ResolutionSignature, s.recordKeys(p.Tenant, p.OperationKey, false))
	if err != nil {
		return nil, err
	}
	if str(v[0]) == "N" {
		return nil, fmt.Errorf("redisstore: %s %s: %w", op, p.OperationKey, oncekeystore.ErrNotFound)
	}
	if len(v) < 2 || str(v[1]) == "" {
		return nil, nil
	}
	return []byte(str(v[1])), nil
}
