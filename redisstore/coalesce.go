package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/oncekey/oncekey/internal/coalesce"
	"github.com/oncekey/oncekey/redisstore/internal/lua"
)

// Coalescing (Options.Coalesce). Concurrent claims of one Store, and concurrent fenced writes
// (Complete, Renew, Release, MarkUnknown), go to Redis as one pipeline each: one write and one
// read on the connection for many scripts, which Redis runs one after another as it would run
// them sent apart. A call that finds fewer than coalesceFlights pipelines of its kind in flight
// is sent at once, alone, as without coalescing (internal/coalesce). Each script's reply or
// error is its own call's; a script Redis does not have yet is sent again alone (EVALSHA, then
// EVAL). A connection lost under a pipeline is each of its calls' error, as it would be alone.

// Bounds of one pipeline.
const (
	coalesceFlights  = 4
	coalesceMaxCalls = 256
	coalesceMaxBytes = 1 << 20 // the arguments of the scripts in one pipeline
)

type scriptCall = coalesce.Call[call, []any]

// coalesceQueues makes the queues of Options.Coalesce.
func (s *Store) coalesceQueues() {
	for _, q := range []**coalesce.Queue[call, []any]{&s.claims, &s.fences} {
		*q = &coalesce.Queue[call, []any]{Flights: coalesceFlights, MaxCalls: coalesceMaxCalls, MaxBytes: coalesceMaxBytes,
			One: s.runOne, Key: func(c call) string { return c.keys[0] }, Size: callSize, Many: s.pipeline}
	}
}

// runVia runs one script call: in a pipeline with others if the store coalesces its kind,
// else alone.
func (s *Store) runVia(ctx context.Context, c call) ([]any, error) {
	var q *coalesce.Queue[call, []any]
	switch c.script {
	case lua.Claim:
		q = s.claims
	case lua.Fenced:
		q = s.fences
	}
	if q == nil {
		return s.runOne(ctx, c)
	}
	return q.Do(ctx, c)
}

// callSize is the size of a script call's arguments.
func callSize(c call) int {
	size := 0
	for _, a := range c.args {
		switch v := a.(type) {
		case string:
			size += len(v)
		case []byte:
			size += len(v)
		}
	}
	return size
}

// runOne runs c alone (EVALSHA, then EVAL if the server does not have the script).
func (s *Store) runOne(ctx context.Context, c call) ([]any, error) {
	return c.script.Run(ctx, s.rdb, c.keys, c.args...).Slice()
}

// pipeline sends the scripts of batch in one pipeline (one round trip per node) and gives each
// call its script's reply or error.
func (s *Store) pipeline(ctx context.Context, batch []*scriptCall) error {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		cmds[i] = c.In.script.EvalSha(ctx, pipe, c.In.keys, c.In.args...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	for i, c := range batch {
		v, err := cmds[i].Slice()
		switch {
		case err == nil:
			c.Out = v
		case redis.HasErrorPrefix(err, "NOSCRIPT"):
			c.Alone = true
		default:
			c.Err = err
		}
	}
	return nil
}
