package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/pgstore"
)

// The pgx floor: the claim+complete loop written straight on pgconn, the wire layer under pgx
// and so under pgstore, the way pgbench -M prepared drives libpq. Each client owns one
// connection for the whole run (no pool), the two statements are prepared on it once, and
// every call sends text parameters and reads text results with a context that can never be
// canceled: nothing of the store's is left (no validation, record decoding, context watching,
// statement timeout or connection pool). With -floor, benchcmd runs it in every round of the
// claim_complete figures beside ours and pgbench: the best a Go client on pgx does on this
// machine, so that the gap between ours and pgbench can be split into the store's part and
// the part it cannot close.

const (
	floorClaim    = "oncekey_floor_claim"
	floorComplete = "oncekey_floor_complete"
)

// floorClaimComplete runs the pgx floor loop from clients connections of pool for d and returns
// claim+complete pairs per second.
func floorClaimComplete(ctx context.Context, pool *pgxpool.Pool, clients int, d time.Duration) (float64, error) {
	conns := make([]*pgconn.PgConn, 0, clients)
	defer func() {
		for _, pc := range conns {
			pc.Exec(context.Background(), "DEALLOCATE "+floorClaim+"; DEALLOCATE "+floorComplete).ReadAll()
		}
	}()
	for range clients {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return 0, err
		}
		defer c.Release()
		pc := c.Conn().PgConn()
		if _, err := pc.Prepare(ctx, floorClaim, pgstore.ClaimSQL("oncekey_operations"), nil); err != nil {
			return 0, err
		}
		conns = append(conns, pc)
		if _, err := pc.Prepare(ctx, floorComplete, pgstore.CompleteSQL("oncekey_operations"), nil); err != nil {
			return 0, err
		}
	}
	text := func(v int64) []byte { return strconv.AppendInt(nil, v, 10) }
	effect, leaseUS := text(int64(oncekey.Effectful)), text(lease.Microseconds())
	retentionUS, tombstoneUS := text(retention.Microseconds()), text(tombstone.Microseconds())
	return drive(ctx, clients, d, func(ctx context.Context, client int) error {
		pc := conns[client]
		key := strconv.AppendUint(nil, 1+randUint64()%9000000000000000000, 10)
		token := strconv.AppendUint(nil, 1+randUint64()%9000000000000000000, 10)
		res := pc.ExecPrepared(ctx, floorClaim, [][]byte{[]byte("floor"), key, []byte(tool), []byte(version),
			[]byte(fingerprint), []byte(workflowID), []byte(stepID), effect, leaseUS, retentionUS, tombstoneUS, token},
			nil, nil).Read()
		if res.Err != nil {
			return fmt.Errorf("floor claim: %w", res.Err)
		}
		epoch := column(res, "epoch")
		if epoch == nil {
			return fmt.Errorf("floor claim of new key %s: no epoch in %d rows", key, len(res.Rows))
		}
		res = pc.ExecPrepared(ctx, floorComplete, [][]byte{[]byte("floor"), key, epoch, []byte("applied"),
			[]byte(result), {}, []byte(effectRef)}, nil, nil).Read()
		if res.Err != nil {
			return fmt.Errorf("floor complete: %w", res.Err)
		}
		if len(res.Rows) != 1 {
			return fmt.Errorf("floor complete of %s: %d rows", key, len(res.Rows))
		}
		return nil
	})
}

// column returns the named column of res's first row, or nil.
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
