package pgstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/internal/testing/testenv"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// A caller's context ends at every point of a store call: before the connection is acquired,
// while the statement is prepared, while it is sent, while its row is read, after the row and
// before the server's ReadyForQuery, and while a statement that DISCARD ALL dropped behind the
// store's back is prepared again. Each time the call fails with an error wrapping
// *oncekeystore.StoreUnavailableError and the context's error, the pooled connection is not handed
// out again half-read (the next call on the one-connection pool works), and the record is left
// where its owner can go on: a claim repeated with the same token acquires it.
//
// The points are found by recording the bytes the server sends for the same call once, cutting
// them into protocol messages, and stalling the connection's reads at each message boundary, one
// byte into it, one byte into its body and one byte before its end. The stall is a client-side
// gate on the net.Conn, so nothing here depends on timing.

// gate stalls the reads (or writes) of one connection at a chosen point: a byte offset inside
// a chosen backend message for reads, a number of bytes for writes.
type gate struct {
	mu      sync.Mutex
	conns   []*gatedConn
	target  *gatedConn
	msg     int // reads: index of the message to stall in (counted from arming); -1 never
	at      int // reads: offset in that message to stall at; -1 is its last byte
	write   int // bytes the target may still write when armed; -1 is unlimited
	stalled chan struct{}
	changed chan struct{} // closed by disarm: a stalled read or write looks at the gate again
	record  []byte        // what the target read while recording
	rec     bool

	// Reads since arming, cut into messages: the current message's index, its start, and its
	// header bytes so far (its end is known once the five header bytes are read).
	idx, pos, start int
	hdr             []byte
}

func newGate() *gate { return &gate{msg: -1, write: -1} }

func (g *gate) dial(cfg *pgxpool.Config) {
	// pgxpool pings a connection idle for more than a second when it is acquired: on a slow
	// machine that ping's two messages would be read through the gate ahead of the call's, and
	// the stall would land elsewhere in the call (or, inside a message without a body, never).
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		gc := &gatedConn{Conn: c, g: g, wake: make(chan struct{}), closed: make(chan struct{})}
		g.mu.Lock()
		g.conns = append(g.conns, gc)
		g.mu.Unlock()
		return gc, nil
	}
}

// arm makes the last connection dialed stall its reads at byte at of backend message msg
// (counted from now; -1: never) or its writes after write bytes (-1: never), and returns a
// channel closed when it stalls. The connection must be idle.
func (g *gate) arm(msg, at, write int) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.target = g.conns[len(g.conns)-1]
	g.msg, g.at, g.write = msg, at, write
	g.idx, g.pos, g.start, g.hdr = 0, 0, 0, nil
	g.stalled = make(chan struct{})
	g.changed = make(chan struct{})
	return g.stalled
}

func (g *gate) disarm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.target, g.msg, g.write = nil, -1, -1
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

// startRecording records what the last connection dialed reads until stopRecording.
func (g *gate) startRecording() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.target = g.conns[len(g.conns)-1]
	g.record, g.rec = nil, true
}

func (g *gate) stopRecording() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.target, g.rec = nil, false
	return g.record
}

type gatedConn struct {
	net.Conn
	g *gate

	mu        sync.Mutex
	deadline  time.Time
	wake      chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

// allowRead returns how many of n bytes c may read now, or that it must stall. Reads are cut
// at message boundaries so that the gate can follow the messages.
func (c *gatedConn) allowRead(n int) (int, bool, [2]chan struct{}) {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.target != c || g.rec || g.msg < 0 {
		return n, false, [2]chan struct{}{}
	}
	var end int // how far the next read may go
	if len(g.hdr) < 5 {
		end = g.start + 5
	} else {
		end = g.start + 1 + int(binary.BigEndian.Uint32(g.hdr[1:]))
	}
	if g.idx == g.msg {
		at := g.at
		if at < 0 {
			if len(g.hdr) < 5 {
				at = 5 // learn the length first (a message with a body ends past its header)
			} else {
				at = end - g.start - 1
			}
		}
		if g.pos == g.start+at {
			return 0, true, [2]chan struct{}{g.stalled, g.changed}
		}
		end = min(end, g.start+at)
	}
	return min(n, end-g.pos), false, [2]chan struct{}{}
}

// readDone accounts for b, just read by the target.
func (c *gatedConn) readDone(b []byte) {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.target != c {
		return
	}
	if g.rec {
		g.record = append(g.record, b...)
		return
	}
	if g.msg < 0 {
		return
	}
	for len(b) > 0 {
		if len(g.hdr) < 5 {
			k := min(5-len(g.hdr), len(b))
			g.hdr = append(g.hdr, b[:k]...)
			g.pos += k
			b = b[k:]
		} else {
			end := g.start + 1 + int(binary.BigEndian.Uint32(g.hdr[1:]))
			k := min(end-g.pos, len(b))
			g.pos += k
			b = b[k:]
		}
		if len(g.hdr) == 5 && g.pos == g.start+1+int(binary.BigEndian.Uint32(g.hdr[1:])) {
			g.idx++
			g.start = g.pos
			g.hdr = nil
		}
	}
}

func (c *gatedConn) allowWrite(n int) (int, bool, [2]chan struct{}) {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.target != c || g.write < 0 {
		return n, false, [2]chan struct{}{}
	}
	if g.write == 0 {
		return 0, true, [2]chan struct{}{g.stalled, g.changed}
	}
	n = min(n, g.write)
	g.write -= n
	return n, false, [2]chan struct{}{}
}

// errGateMoved tells a stalled read or write that the gate was disarmed: try again.
var errGateMoved = errors.New("gate moved")

// stall closes stalled and waits until the connection's deadline passes, it is closed, or the
// gate is disarmed (errGateMoved).
func (c *gatedConn) stall(ch [2]chan struct{}) error {
	stalled, changed := ch[0], ch[1]
	c.g.mu.Lock()
	select {
	case <-stalled:
	default:
		close(stalled)
	}
	c.g.mu.Unlock()
	for {
		c.mu.Lock()
		dl, wake := c.deadline, c.wake
		c.mu.Unlock()
		var timer <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-wake:
		case <-timer:
		case <-changed:
			return errGateMoved
		case <-c.closed:
			return net.ErrClosed
		}
	}
}

func (c *gatedConn) Read(b []byte) (int, error) {
	n, stall, ch := c.allowRead(len(b))
	if stall {
		if err := c.stall(ch); !errors.Is(err, errGateMoved) {
			return 0, err
		}
		return c.Read(b)
	}
	n, err := c.Conn.Read(b[:n])
	c.readDone(b[:n])
	return n, err
}

func (c *gatedConn) Write(b []byte) (int, error) {
	n, stall, ch := c.allowWrite(len(b))
	if stall {
		if err := c.stall(ch); !errors.Is(err, errGateMoved) {
			return 0, err
		}
		return c.Write(b)
	}
	w, err := c.Conn.Write(b[:n])
	if err != nil || w == len(b) {
		return w, err
	}
	// The rest of b is past the gate: stall now (or pass it on if the gate moved meanwhile).
	more, err := c.Write(b[w:])
	return w + more, err
}

func (c *gatedConn) setDeadline(t time.Time) {
	c.mu.Lock()
	c.deadline = t
	close(c.wake)
	c.wake = make(chan struct{})
	c.mu.Unlock()
}

func (c *gatedConn) SetDeadline(t time.Time) error {
	c.setDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *gatedConn) SetReadDeadline(t time.Time) error {
	c.setDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *gatedConn) SetWriteDeadline(t time.Time) error {
	c.setDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *gatedConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// stallPoint is where a read stalls: byte at (-1: the last) of the msg-th backend message.
type stallPoint struct {
	msg, at int
	name    string
}

// cutPoints returns the points to stall at in stream (backend messages): each message's first
// byte, one byte into its header, its body's first byte, and its last byte.
func cutPoints(t *testing.T, stream []byte) []stallPoint {
	t.Helper()
	var points []stallPoint
	for off, i := 0, 0; off < len(stream); i++ {
		require.GreaterOrEqual(t, len(stream)-off, 5, "truncated message at %d", off)
		typ := stream[off]
		n := int(binary.BigEndian.Uint32(stream[off+1:]))
		require.LessOrEqual(t, off+1+n, len(stream))
		ats := []int{0, 1, 5, -1}
		if n == 4 {
			ats = []int{0, 1, 4} // no body: its last byte is the header's
		}
		for _, at := range ats {
			points = append(points, stallPoint{msg: i, at: at, name: fmt.Sprintf("message %d %c at %d", i, typ, at)})
		}
		off += 1 + n
	}
	return points
}

// cancelOp is a store call made with ctx for iteration i.
type cancelOp struct {
	name string
	// prepare readies iteration i (a record for it, say); call is what is stalled; check sees
	// that its record can still be driven to an end.
	prepare func(t *testing.T, s *pgstore.Store, i int)
	call    func(ctx context.Context, s *pgstore.Store, i int) error
	check   func(t *testing.T, s *pgstore.Store, i int)
}

func cancelKey(i int) string { return fmt.Sprintf("ok1_cancel_%05d", i) }

func cancelClaim(i int) *oncekeystore.ClaimParams {
	p := claimParams(cancelKey(i), oncekeystore.Effectful)
	p.ClaimToken = int64(1000 + i)
	return p
}

var cancelOps = []cancelOp{
	{
		name: "claim",
		call: func(ctx context.Context, s *pgstore.Store, i int) error {
			_, err := s.Claim(ctx, cancelClaim(i))
			return err
		},
		check: func(t *testing.T, s *pgstore.Store, i int) {
			// Whether or not the stalled claim inserted the record, its repeat with the same
			// token owns it.
			res, err := s.Claim(ctxT(t), cancelClaim(i))
			require.NoError(t, err)
			require.True(t, res.Acquired, "the repeated claim acquires")
			require.Equal(t, int64(1), res.Record.Epoch)
			_, err = s.Complete(ctxT(t), &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: cancelKey(i), Epoch: 1,
				Status: oncekeystore.StatusApplied, Result: []byte("done")})
			require.NoError(t, err)
		},
	},
	{
		name: "complete",
		prepare: func(t *testing.T, s *pgstore.Store, i int) {
			res, err := s.Claim(ctxT(t), cancelClaim(i))
			require.NoError(t, err)
			require.True(t, res.Acquired)
		},
		call: func(ctx context.Context, s *pgstore.Store, i int) error {
			_, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: cancelKey(i), Epoch: 1,
				Status: oncekeystore.StatusApplied, Result: []byte("result")})
			return err
		},
		check: func(t *testing.T, s *pgstore.Store, i int) {
			// Either the complete landed, or the record is still pending for its owner.
			r, err := s.Get(ctxT(t), &oncekeystore.GetParams{Tenant: "acme", OperationKey: cancelKey(i)})
			require.NoError(t, err)
			switch r.Status {
			case oncekeystore.StatusApplied:
				require.Equal(t, "result", string(r.Result))
			case oncekeystore.StatusPending:
				_, err = s.Complete(ctxT(t), &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: cancelKey(i), Epoch: 1,
					Status: oncekeystore.StatusApplied, Result: []byte("result")})
				require.NoError(t, err)
			default:
				t.Fatalf("record %s after a canceled complete", r.Status)
			}
		},
	},
	{
		name: "get",
		prepare: func(t *testing.T, s *pgstore.Store, i int) {
			_, err := s.Claim(ctxT(t), cancelClaim(i))
			require.NoError(t, err)
		},
		call: func(ctx context.Context, s *pgstore.Store, i int) error {
			_, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: cancelKey(i)})
			return err
		},
		check: func(t *testing.T, s *pgstore.Store, i int) {
			r, err := s.Get(ctxT(t), &oncekeystore.GetParams{Tenant: "acme", OperationKey: cancelKey(i)})
			require.NoError(t, err)
			require.Equal(t, oncekeystore.StatusPending, r.Status)
		},
	},
}

// deadlineCtx is a context whose deadline passes when fire is called, so that a test can let a
// deadline pass at a chosen point without waiting for a clock.
type deadlineCtx struct {
	context.Context
	once sync.Once
	done chan struct{}
}

func withDeadlineFired(parent context.Context) (context.Context, context.CancelFunc) {
	c := &deadlineCtx{Context: parent, done: make(chan struct{})}
	return c, func() { c.once.Do(func() { close(c.done) }) }
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func requireCanceledUnavailable(t *testing.T, err error, want error, what string) {
	t.Helper()
	require.Error(t, err, what)
	require.ErrorIs(t, err, want, "%s: %v", what, err)
	var su *oncekeystore.StoreUnavailableError
	require.ErrorAs(t, err, &su, "%s: %v", what, err)
	require.NotErrorIs(t, err, oncekeystore.ErrLostClaim, what)
	require.NotErrorIs(t, err, oncekeystore.ErrNotFound, what)
}

func TestContextEndsAtEveryPointOfACall(t *testing.T) {
	t.Parallel()
	for _, mode := range bothPaths {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			for _, op := range cancelOps {
				t.Run(op.name, func(t *testing.T) {
					t.Parallel()
					testContextEndsAtEveryPoint(t, mode, op)
				})
			}
		})
	}
}

func testContextEndsAtEveryPoint(t *testing.T, mode pgx.QueryExecMode, op cancelOp) {
	g := newGate()
	pool := newPool(t, oneConn(mode, g.dial))
	s := pgstore.New(pool, nil)
	ctx := ctxWalk(t)
	i := 0
	next := func() int { i++; return i }

	// Canceled before the connection is acquired.
	{
		n := next()
		if op.prepare != nil {
			op.prepare(t, s, n)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		requireCanceledUnavailable(t, op.call(cctx, s, n), context.Canceled, "before acquire")
		op.check(t, s, n)
	}

	// fresh returns a new connection in the pool (the last one dialed). On a warm connection
	// the call has run once, so its statements are prepared; on a discarded one DISCARD ALL
	// then ran behind the store's back, so pgx lists statements the server no longer has.
	fresh := func(state string) {
		t.Helper()
		for _, c := range pool.AcquireAllIdle(ctx) {
			c.Conn().Close(ctx)
			c.Release()
		}
		require.NoError(t, pool.Ping(ctx))
		if state != "cold" {
			n := next()
			if op.prepare != nil {
				op.prepare(t, s, n)
			}
			require.NoError(t, op.call(ctx, s, n))
		}
	}
	// ready prepares iteration n on a connection in state.
	ready := func(state string, n int) {
		t.Helper()
		if op.prepare != nil {
			op.prepare(t, s, n)
		}
		if state == "discarded" {
			_, err := pool.Exec(ctx, "DISCARD ALL")
			require.NoError(t, err)
		}
	}
	for _, state := range []string{"cold", "warm", "discarded"} {
		// Record what the server sends for one call.
		fresh(state)
		n := next()
		ready(state, n)
		g.startRecording()
		require.NoError(t, op.call(ctx, s, n))
		stream := g.stopRecording()
		points := cutPoints(t, stream)
		t.Logf("%s: %d bytes, %d points", state, len(stream), len(points))

		for _, p := range points {
			for _, deadline := range []bool{false, true} {
				what := fmt.Sprintf("%s connection, read stalled at %s, deadline=%v", state, p.name, deadline)
				fresh(state)
				n := next()
				ready(state, n)
				stalled := g.arm(p.msg, p.at, -1)
				var (
					cctx   context.Context
					cancel context.CancelFunc
					want   = context.Canceled
				)
				if deadline {
					cctx, cancel = withDeadlineFired(ctx)
					want = context.DeadlineExceeded
				} else {
					cctx, cancel = context.WithCancel(ctx)
				}
				done := make(chan error, 1)
				go func() { done <- op.call(cctx, s, n) }()
				var err error
				select {
				case <-stalled:
					cancel()
					err = <-done
				case err = <-done:
					t.Fatalf("%s: the call ended without reading past the gate: %v", what, err)
				}
				cancel()
				g.disarm()
				requireCanceledUnavailable(t, err, want, what)
				// The connection the call stalled on is not handed out again half-read: the
				// next calls on the one-connection pool work.
				op.check(t, s, n)
			}
		}
	}
}

// A Complete with a large result is canceled while its Bind is being written: the write is cut
// short, the connection is dropped, and the record is still pending for its owner.
//
// pgconn closes a connection cut mid-message in the background: it sends Terminate and waits up
// to 15s for the server to hang up, which a server still reading the Bind never does (it takes
// the Terminate for Bind bytes), and the dying connection holds its pool slot meanwhile. That is
// pgx's doing, on either path; here the test ends the backend so as not to wait.
func TestContextEndsWhileALargeResultIsSent(t *testing.T) {
	t.Parallel()
	for _, mode := range bothPaths {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			g := newGate()
			pool := newPool(t, oneConn(mode, g.dial))
			// A minute, not the default 10s, for each call: writing 16 MiB twice on a loaded
			// two-core machine can take longer, and the cancel under test comes from the context.
			s := pgstore.New(pool, &pgstore.Options{StatementTimeout: time.Minute})
			ctx := ctxT(t)
			res, err := s.Claim(ctx, claimParams("ok1_large", oncekeystore.Effectful))
			require.NoError(t, err)
			big := make([]byte, pgstore.DefaultMaxResultBytes)
			for i := range big {
				big[i] = byte(i * 7)
			}
			c, err := pool.Acquire(ctx)
			require.NoError(t, err)
			pid := c.Conn().PgConn().PID()
			c.Release()
			stalled := g.arm(-1, 0, 1<<20)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := s.Complete(cctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_large", Epoch: res.Record.Epoch,
					Status: oncekeystore.StatusApplied, Result: big})
				done <- err
			}()
			select {
			case <-stalled:
				cancel()
				err = <-done
			case err = <-done:
				t.Fatalf("the complete ended without writing past the gate: %v", err)
			}
			g.disarm()
			requireCanceledUnavailable(t, err, context.Canceled, "write stalled")
			terminate(t, pid)
			r, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_large"})
			require.NoError(t, err)
			require.Equal(t, oncekeystore.StatusPending, r.Status)
			done2, err := s.Complete(ctx, &oncekeystore.CompleteParams{Tenant: "acme", OperationKey: "ok1_large", Epoch: res.Record.Epoch,
				Status: oncekeystore.StatusApplied, Result: big})
			require.NoError(t, err)
			require.Equal(t, big, done2.Result)
			got, err := s.Get(ctx, &oncekeystore.GetParams{Tenant: "acme", OperationKey: "ok1_large"})
			require.NoError(t, err)
			require.Equal(t, big, got.Result)
		})
	}
}

// terminate ends the server backend pid from a connection of its own, waiting until it has
// exited.
func terminate(t *testing.T, pid uint32) {
	t.Helper()
	conn, err := pgx.Connect(ctxT(t), testenv.DatabaseURL())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var ok bool
	require.NoError(t, conn.QueryRow(ctxT(t), `SELECT pg_terminate_backend($1, 30000)`, int32(pid)).Scan(&ok))
	require.True(t, ok, "backend %d did not exit", pid)
}
