// Package coalesce gathers concurrent calls of one kind (a store's claims, say) into one
// request to the server: what queues while requests are in flight goes in the next one. There
// is no batching window: a call that finds fewer than Queue.Flights requests in flight is sent
// at once, alone. pgstore sends the calls of a request as one multi-row statement, redisstore
// as one pipeline. It is internal: nothing here is API.
package coalesce

import (
	"context"
	"sync"
	"sync/atomic"
)

// Call is one call waiting to go in a request: its input, and the output and error the
// request gives it.
type Call[In, Out any] struct {
	In In
	// Key identifies what the call writes: a request takes each key once, a second call for
	// the same key waits for the next request.
	Key string
	// Bytes is the call's size, counted against Queue.MaxBytes.
	Bytes int

	// Out and Err are set by Queue.Many for each call of the request, or Alone: the call is
	// then sent alone by its caller.
	Out   Out
	Err   error
	Alone bool

	ctx   context.Context
	done  chan struct{}
	taken bool             // in a request (not in the queue any more); under Queue.mu
	batch []*Call[In, Out] // when this call sends the request: the calls in it, this one first
}

// Queue gathers the calls of one kind. Set its exported fields before the first Do.
type Queue[In, Out any] struct {
	// Flights is how many requests may be in flight at once (at least 1).
	Flights int
	// MaxCalls and MaxBytes bound one request (the first call always goes).
	MaxCalls, MaxBytes int
	// One sends a call alone: a call that finds fewer than Flights requests in flight, and one
	// Many or the queue gives back (Alone).
	One func(ctx context.Context, in In) (Out, error)
	// Key returns what a call writes (Call.Key); Size its size (Call.Bytes; nil: 0). They are
	// asked only of a call that queues.
	Key  func(in In) string
	Size func(in In) int
	// Many sends two or more calls as one request and sets each call's Out and Err (or Alone).
	// An error it returns is the whole request's: if Refused says the server did nothing of it,
	// each call is sent alone; otherwise it is every call's error.
	Many    func(ctx context.Context, batch []*Call[In, Out]) error
	Refused func(err error) bool
	// Always sends every call through Many, one alone too (tests).
	Always bool

	// Requests and Calls count the requests Many sent and the calls they carried.
	Requests, Calls atomic.Int64

	mu       sync.Mutex
	inFlight int
	queue    []*Call[In, Out]
}

// Do runs the call in: alone, with One on the caller's ctx, when fewer than Flights requests
// are in flight, else in the next request. A call whose ctx ends while it is queued leaves the
// queue and returns ctx.Err(), nothing sent; one whose request is in flight returns ctx.Err()
// at once, while the request goes on for the others in it (it is canceled when every call in it
// has given up).
func (q *Queue[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	q.mu.Lock()
	if q.inFlight < q.Flights && !q.Always {
		// Alone, on the caller's goroutine: nothing allocated, no other goroutine woken, and
		// the lock taken once more, by handOff, when it returns.
		q.inFlight++
		q.mu.Unlock()
		out, err := q.One(ctx, in)
		q.handOff()
		return out, err
	}
	c := &Call[In, Out]{In: in, Key: q.Key(in), ctx: ctx, done: make(chan struct{})}
	if q.Size != nil {
		c.Bytes = q.Size(in)
	}
	if q.inFlight < q.Flights {
		q.inFlight++
		c.taken, c.batch = true, []*Call[In, Out]{c}
		close(c.done)
	} else {
		q.queue = append(q.queue, c)
	}
	q.mu.Unlock()

	select {
	case <-c.done:
	case <-ctx.Done():
		q.mu.Lock()
		if !c.taken {
			for i, w := range q.queue {
				if w == c {
					q.queue = append(q.queue[:i:i], q.queue[i+1:]...)
					break
				}
			}
			q.mu.Unlock()
			var zero Out
			return zero, ctx.Err()
		}
		leads := c.batch != nil
		q.mu.Unlock()
		if !leads {
			var zero Out
			return zero, ctx.Err()
		}
		<-c.done
	}
	if c.batch != nil {
		q.send(c.batch)
		q.handOff()
	}
	if c.Alone {
		return q.One(ctx, c.In)
	}
	return c.Out, c.Err
}

// handOff passes the turn on when a request returned: the oldest queued call sends the next
// one, with every queued call for another key (up to the bounds), or one fewer is in flight.
func (q *Queue[In, Out]) handOff() {
	q.mu.Lock()
	if len(q.queue) == 0 {
		q.inFlight--
		q.mu.Unlock()
		return
	}
	var batch, rest []*Call[In, Out]
	keys := make(map[string]bool, len(q.queue))
	bytes := 0
	for _, c := range q.queue {
		if len(batch) == q.MaxCalls || keys[c.Key] || (len(batch) > 0 && bytes+c.Bytes > q.MaxBytes) {
			rest = append(rest, c)
			continue
		}
		keys[c.Key] = true
		bytes += c.Bytes
		c.taken = true
		batch = append(batch, c)
	}
	q.queue = rest
	lead := batch[0]
	lead.batch = batch
	q.mu.Unlock()
	close(lead.done)
}

// send sends batch (its first call is the caller's) and sets every call's result, waking all
// but the first. Calls whose context has ended are left out with its error; a batch of one goes
// alone on that call's own context.
func (q *Queue[In, Out]) send(batch []*Call[In, Out]) {
	live := batch[:0:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.Err = err
			continue
		}
		live = append(live, c)
	}
	defer func() {
		for _, c := range batch[1:] {
			close(c.done)
		}
	}()
	switch {
	case len(live) == 0:
		return
	case len(live) == 1 && !q.Always:
		live[0].Alone = true
		return
	}
	// The request runs until every call in it has given up, not until the first has: the
	// others still want their answers.
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	defer cancel()
	var left atomic.Int64
	left.Store(int64(len(live)))
	for _, c := range live {
		stop := context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	q.Requests.Add(1)
	q.Calls.Add(int64(len(live)))
	err := q.Many(ctx, live)
	switch {
	case err == nil:
	case q.Refused != nil && q.Refused(err):
		for _, c := range live {
			c.Alone, c.Err = true, nil
		}
	default:
		for _, c := range live {
			c.Err = err
		}
	}
}

// Queued returns the calls waiting for the next request, or -1 when no request is in flight
// (tests).
func (q *Queue[In, Out]) Queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inFlight == 0 {
		return -1
	}
	return len(q.queue)
}
