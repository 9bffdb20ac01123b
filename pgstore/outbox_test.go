package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// receiver is a fake downstream that deduplicates on the Idempotency-Key alone, as the docs tell
// a receiver to, counting deliveries and effects (by operation key and topic, which it does not
// read for deduplication); fail makes its next deliveries fail.
type receiver struct {
	mu         sync.Mutex
	seen       map[string]bool // Idempotency-Keys acted on
	deliveries map[string]int
	effects    map[string]int
	fail       int
}

func newReceiver() *receiver {
	return &receiver{seen: map[string]bool{}, deliveries: map[string]int{}, effects: map[string]int{}}
}

func (r *receiver) deliver(_ context.Context, m *pgstore.OutboxMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries[m.OperationKey+"/"+m.Topic]++
	if r.fail > 0 {
		r.fail--
		return errors.New("smtp: 451 try again later")
	}
	if r.seen[m.IdempotencyKey()] {
		return nil // a repeat: acknowledged, not acted on
	}
	r.seen[m.IdempotencyKey()] = true
	r.effects[m.OperationKey+"/"+m.Topic]++
	return nil
}

// enqueueIn runs a Transactional call of key that writes a message for each topic (by default
// "confirmation"), and commits it or not.
func enqueueIn(t *testing.T, s *pgstore.Store, key string, commit bool, topics ...string) {
	t.Helper()
	if len(topics) == 0 {
		topics = []string{"confirmation"}
	}
	c := txClaim(t, s, key, time.Minute)
	require.True(t, c.Acquired)
	stx, err := s.BeginTx(ctxT(t), &oncekeystore.BeginTxParams{Tenant: "t", OperationKey: key, Epoch: c.Record.Epoch, Tool: "credit"})
	require.NoError(t, err)
	ctx := stx.Context(ctxT(t))
	for _, topic := range topics {
		require.NoError(t, pgstore.Enqueue(ctx, topic, []byte(`{"to":"ada@example.com"}`)))
	}
	if !commit {
		require.NoError(t, stx.Rollback(ctx))
		return
	}
	_, err = stx.Commit(ctxT(t), &oncekeystore.CompleteParams{Tenant: "t", OperationKey: key, Epoch: c.Record.Epoch, Status: oncekeystore.StatusApplied})
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

// One call's messages of two topics each have their effect at a receiver that deduplicates on
// the Idempotency-Key alone, however often the relay delivers them: each message has a key of
// its own, the same at every delivery.
func TestOutboxMessagesOfOneCallHaveTheirOwnKeys(t *testing.T) {
	pool, s := setup(t)
	enqueueIn(t, s, "k1", true, "email", "webhook")
	r := newReceiver()
	res, err := s.RelayOnce(ctxT(t), r.deliver, nil)
	require.NoError(t, err)
	require.Equal(t, pgstore.RelayResult{Found: 2, Delivered: 2}, res)
	// The relay delivers both again (as after a pass that could not record its deliveries).
	_, err = pool.Exec(ctxT(t), `UPDATE oncekey_outbox SET status = 'pending'`)
	require.NoError(t, err)
	res, err = s.RelayOnce(ctxT(t), r.deliver, nil)
	require.NoError(t, err)
	require.Equal(t, 2, res.Delivered)
	require.Equal(t, map[string]int{"k1/email": 2, "k1/webhook": 2}, r.deliveries)
	require.Equal(t, map[string]int{"k1/email": 1, "k1/webhook": 1}, r.effects, "a message was lost or acted on twice")
}

// TestOutboxIdempotencyKeyPinned pins the outbox messages' Idempotency-Key format and values.
//
// CHANGING ANY VALUE HERE IS A BREAKING CHANGE: receivers deduplicate on these keys, so a
// different derivation makes every receiver act again on each message the relay delivers again
// after an upgrade (one whose delivery was not recorded), a second e-mail or webhook. A new
// derivation needs a new prefix ("obx2_").
func TestOutboxIdempotencyKeyPinned(t *testing.T) {
	t.Parallel()
	require.Equal(t, "obx1_", pgstore.OutboxKeyPrefix)
	key := "ok1_3b0b7a1c5f2e4d6a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a"
	for _, tc := range []struct{ tenant, key, topic, want string }{
		{"acme", key, "email", "obx1_690cad52e3acf9f2a7c8289d94ad867eb18ccca2b8c0ca46b3a930d06188fac5"},
		{"acme", key, "webhook", "obx1_ef442d23a817d3c92568f7e540223c938dfc350c31728fbdfd3f2ebebd275256"},
		// Parts are length-prefixed: moving bytes from one to the next changes the key.
		{"acme", key[:10], key[10:] + "email", "obx1_fa6b127c34724c8e6b57a553f77cbe57042504c656a89f8e566e7edb26e928de"},
		{"", "", "", "obx1_9d908ecfb6b256def8b49a7c504e6c889c4b0e41fe6ce3e01863dd7b61a20aa0"},
	} {
		got := pgstore.OutboxIdempotencyKey(tc.tenant, tc.key, tc.topic)
		require.Regexp(t, `^obx1_[0-9a-f]{64}$`, got)
		m := &pgstore.OutboxMessage{Tenant: tc.tenant, OperationKey: tc.key, Topic: tc.topic}
		require.Equal(t, got, m.IdempotencyKey())
		require.Equal(t, tc.want, got, "%q %q %q", tc.tenant, tc.key, tc.topic)
	}
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
	_, err := s.Forget(ctxT(t), &oncekeystore.ForgetParams{Tenant: "t"})
	require.NoError(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctxT(t), `SELECT count(*) FROM oncekey_outbox`).Scan(&n))
	require.Zero(t, n)
}
