package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/pgstore"
)

// receiver is a fake downstream that deduplicates on the Idempotency-Key, counting deliveries
// and effects; fail makes its next deliveries fail.
type receiver struct {
	mu         sync.Mutex
	deliveries map[string]int
	effects    map[string]int
	fail       int
}

func newReceiver() *receiver {
	return &receiver{deliveries: map[string]int{}, effects: map[string]int{}}
}

func (r *receiver) deliver(_ context.Context, m *pgstore.OutboxMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries[m.IdempotencyKey()+"/"+m.Topic]++
	if r.fail > 0 {
		r.fail--
		return errors.New("smtp: 451 try again later")
	}
	r.effects[m.IdempotencyKey()+"/"+m.Topic] = 1
	return nil
}

// enqueueIn runs a Transactional call of key that writes a message, and commits it or not.
func enqueueIn(t *testing.T, s *pgstore.Store, key string, commit bool) {
	t.Helper()
	c := txClaim(t, s, key, time.Minute)
	require.True(t, c.Acquired)
	stx, err := s.BeginTx(ctxT(t), &oncekey.BeginTxParams{Tenant: "t", OperationKey: key, Epoch: c.Record.Epoch, Tool: "credit"})
	require.NoError(t, err)
	ctx := stx.Context(ctxT(t))
	require.NoError(t, pgstore.Enqueue(ctx, "confirmation", []byte(`{"to":"ada@example.com"}`)))
	if !commit {
		require.NoError(t, stx.Rollback(ctx))
		return
	}
	_, err = stx.Commit(ctxT(t), &oncekey.CompleteParams{Tenant: "t", OperationKey: key, Epoch: c.Record.Epoch, Status: oncekey.StatusApplied})
	require.NoError(t, err)
}

func TestOutboxDeliversCommittedMessagesOnly(t *testing.T) {
	_, s := setup(t)
	enqueueIn(t, s, "k1", true)
	enqueueIn(t, s, "k2", false)
	r := newReceiver()
	res, err := s.RelayOnce(ctxT(t), r.deliver, nil)
	require.NoError(t, err)
	require.Equal(t, pgstore.RelayResult{Found: 1, Delivered: 1}, res)
	require.Equal(t, map[string]int{"k1/confirmation": 1}, r.deliveries)
	res, err = s.RelayOnce(ctxT(t), r.deliver, nil)
	require.NoError(t, err)
	require.Zero(t, res.Found, "a delivered message was delivered again")
	st, err := s.OutboxStats(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Delivered)
	require.Zero(t, st.Pending)

	require.ErrorIs(t, pgstore.Enqueue(context.Background(), "x", nil), pgstore.ErrNoTx)
}

// A delivery that keeps failing is retried with backoff, shown by OutboxStats and OutboxFailing,
// and never dropped.
func TestOutboxFailingDeliveryIsVisibleAndRetried(t *testing.T) {
	_, s := setup(t)
	enqueueIn(t, s, "k1", true)
	r := newReceiver()
	r.fail = 3
	noWait := &pgstore.RelayOptions{Backoff: func(int) time.Duration { return 0 }}
	for range 3 {
		res, err := s.RelayOnce(ctxT(t), r.deliver, noWait)
		require.NoError(t, err)
		require.Equal(t, 1, res.Failed)
	}
	st, err := s.OutboxStats(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Failing)
	require.Equal(t, int64(3), st.MostAttempts)
	failing, err := s.OutboxFailing(ctxT(t), 0)
	require.NoError(t, err)
	require.Len(t, failing, 1)
	require.Equal(t, "smtp: 451 try again later", failing[0].LastError)

	// A failure puts the next attempt off by the backoff: not due now.
	enqueueIn(t, s, "k2", true)
	r.fail = 1
	later := &pgstore.RelayOptions{Backoff: func(int) time.Duration { return time.Hour }}
	res, err := s.RelayOnce(ctxT(t), r.deliver, later)
	require.NoError(t, err)
	require.Equal(t, pgstore.RelayResult{Found: 2, Delivered: 1, Failed: 1}, res)
	res, err = s.RelayOnce(ctxT(t), r.deliver, later)
	require.NoError(t, err)
	require.Zero(t, res.Found, "a message was delivered again before its backoff")
	failing, err = s.OutboxFailing(ctxT(t), 0)
	require.NoError(t, err)
	require.Len(t, failing, 1)
	require.Equal(t, "k1", failing[0].OperationKey, "the oldest due message is delivered first")
	require.Equal(t, 4, failing[0].Attempts)
	require.True(t, failing[0].NextAttemptAt.After(time.Now().Add(30*time.Minute)))
	require.Equal(t, map[string]int{"k2/confirmation": 1}, r.effects)
}

// Relays running at once never hold the same message (FOR UPDATE SKIP LOCKED): each is
// delivered once.
func TestOutboxConcurrentRelays(t *testing.T) {
	_, s := setup(t)
	for i := range 12 {
		enqueueIn(t, s, "k"+string(rune('a'+i)), true)
	}
	r := newReceiver()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				res, err := s.RelayOnce(ctxT(t), r.deliver, &pgstore.RelayOptions{Batch: 2})
				if err != nil || res.Found == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Len(t, r.deliveries, 12)
	for k, n := range r.deliveries {
		require.Equal(t, 1, n, "%s delivered %d times", k, n)
	}
}

// Forget deletes the tenant's outbox messages with its records.
func TestOutboxForget(t *testing.T) {
	pool, s := setup(t)
	enqueueIn(t, s, "k1", true)
	_, err := s.Forget(ctxT(t), &oncekey.ForgetParams{Tenant: "t"})
	require.NoError(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctxT(t), `SELECT count(*) FROM oncekey_outbox`).Scan(&n))
	require.Zero(t, n)
}
