package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncekey/oncekey/internal/dev/benchdrive"
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore/internal/benchsql"
)

// The pgx floor: the figures' loops written straight on pgconn, the wire layer under pgx and
// so under pgstore, the way pgbench -M prepared drives libpq. Each client owns one connection
// for the whole run (no pool), the statements are prepared on it once, and every call sends
// text parameters and reads text results with a context that is never canceled: nothing of
// the store's is left (no validation, record decoding, context watching, statement timeout
// or connection pool). With -floor, benchcmd runs it in every round beside ours and pgbench:
// the best a Go client on pgx does on this machine, which splits the gap between ours and
// pgbench into the store's part and the part no client on pgx closes.

const (
	floorClaim    = "oncekey_floor_claim"
	floorComplete = "oncekey_floor_complete"
)

// floorConns takes clients connections from pool with the claim and complete statements
// prepared on each. Call release when done.
func floorConns(ctx context.Context, pool *pgxpool.Pool, clients int) (conns []*pgconn.PgConn, release func(), err error) {
	var held []*pgxpool.Conn
	release = func() {
		for _, c := range held {
			c.Conn().PgConn().Exec(context.Background(), "DEALLOCATE "+floorClaim+"; DEALLOCATE "+floorComplete).ReadAll()
			c.Release()
		}
	}
	for range clients {
		c, err := pool.Acquire(ctx)
		if err != nil {
			release()
			return nil, nil, err
		}
		held = append(held, c)
		pc := c.Conn().PgConn()
		_, err = pc.Prepare(ctx, floorClaim, benchsql.Claim("oncekey_operations"), nil)
		if err == nil {
			_, err = pc.Prepare(ctx, floorComplete, benchsql.Complete("oncekey_operations"), nil)
		}
		if err != nil {
			release()
			return nil, nil, err
		}
		conns = append(conns, pc)
	}
	return conns, release, nil
}

var (
	floorEffect    = strconv.AppendInt(nil, int64(oncekeystore.Effectful), 10)
	floorLease     = strconv.AppendInt(nil, benchdrive.Lease.Microseconds(), 10)
	floorRetention = strconv.AppendInt(nil, benchdrive.Retention.Microseconds(), 10)
	floorTombstone = strconv.AppendInt(nil, benchdrive.Tombstone.Microseconds(), 10)
)

// floorClaimSend sends the claim of key for tenant on pc, as claimParams describes it.
func floorClaimSend(ctx context.Context, pc *pgconn.PgConn, tenant string, key []byte) *pgconn.Result {
	token := strconv.AppendUint(nil, 1+randUint64()%9000000000000000000, 10)
	return pc.ExecPrepared(ctx, floorClaim, [][]byte{[]byte(tenant), key, []byte(benchdrive.Tool), []byte(benchdrive.Version),
		[]byte(benchdrive.Fingerprint), []byte(benchdrive.WorkflowID), []byte(benchdrive.StepID), floorEffect, floorLease, floorRetention, floorTombstone, token, []byte("default")},
		nil, nil).Read()
}

// floorDrive runs op from clients goroutines for d, each on a connection of its own (see
// floorConns), and returns ops per second.
func floorDrive(ctx context.Context, pool *pgxpool.Pool, clients int, d time.Duration, op func(ctx context.Context, pc *pgconn.PgConn) error) (float64, error) {
	conns, release, err := floorConns(ctx, pool, clients)
	if err != nil {
		return 0, err
	}
	defer release()
	return benchdrive.Drive(ctx, clients, d, func(ctx context.Context, client int) error { return op(ctx, conns[client]) })
}

// floorClaimComplete runs the claim_complete loop of ours on pgconn and returns claim+complete
// pairs per second.
func floorClaimComplete(ctx context.Context, pool *pgxpool.Pool, clients int, d time.Duration) (float64, error) {
	return floorDrive(ctx, pool, clients, d, floorPair)
}

// floorPair claims a new key on pc and completes it, as oursPair does through the store.
func floorPair(ctx context.Context, pc *pgconn.PgConn) error {
	key := strconv.AppendUint(nil, 1+randUint64()%9000000000000000000, 10)
	res := floorClaimSend(ctx, pc, "floor", key)
	if res.Err != nil {
		return fmt.Errorf("floor claim: %w", res.Err)
	}
	epoch := column(res, "epoch")
	if epoch == nil {
		return fmt.Errorf("floor claim of new key %s: %d rows", key, len(res.Rows))
	}
	res = pc.ExecPrepared(ctx, floorComplete, [][]byte{[]byte("floor"), key, epoch, []byte("applied"),
		[]byte(benchdrive.Result), {}, []byte(benchdrive.EffectRef)}, nil, nil).Read()
	if res.Err != nil {
		return fmt.Errorf("floor complete: %w", res.Err)
	}
	if len(res.Rows) != 1 {
		return fmt.Errorf("floor complete of %s: %d rows", key, len(res.Rows))
	}
	return nil
}

// floorReplay runs the replay loop of ours on pgconn (claims of the keys seedReplay applied)
// and returns claims per second.
func floorReplay(ctx context.Context, pool *pgxpool.Pool, clients int, d time.Duration) (float64, error) {
	return floorDrive(ctx, pool, clients, d, func(ctx context.Context, pc *pgconn.PgConn) error {
		key := strconv.AppendInt(nil, 1+int64(randUint64()%benchdrive.ReplayKeys), 10)
		res := floorClaimSend(ctx, pc, "replay", key)
		if res.Err != nil {
			return fmt.Errorf("floor replay: %w", res.Err)
		}
		if st := column(res, "status"); string(st) != string(oncekeystore.StatusApplied) {
			return fmt.Errorf("floor replay of %s found status %q", key, st)
		}
		return nil
	})
}

// column returns the named column of res's only row, or nil.
func column(res *pgconn.Result, name string) []byte {
	if len(res.Rows) != 1 {
		return nil
	}
	for i, fd := range res.FieldDescriptions {
		if fd.Name == name {
			return res.Rows[0][i]
		}
	}
	return nil
}
