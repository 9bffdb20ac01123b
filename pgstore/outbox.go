package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oncekey/oncekey/oncekeystore"
)

// The outbox: a Transactional tool that must reach another system (an e-mail, a webhook) writes
// the message in its transaction (Enqueue), so the message exists exactly when the tool's other
// writes and its record's completion committed. Store.Relay delivers each message at least
// once, with an Idempotency-Key of its own (OutboxIdempotencyKey: derived from the operation key
// and the topic), and records the delivery: where the receiver deduplicates on that key, each
// message has its effect exactly once.
//
// The relay is a loop the worker runs (Relay), not a Temporal workflow: a message is created by
// a database commit, not by a workflow event, so the table is what to watch; a workflow per
// message would need its own start to be exactly once with the commit (the outbox's problem
// again), and one long-running relay workflow would poll the table from activities anyway,
// adding history and nothing else. Several relays may run (every worker can run one): each batch
// locks its messages with FOR UPDATE SKIP LOCKED, so two relays never hold the same message.

// Defaults of RelayOptions.
const (
	DefaultRelayBatch      = 10
	DefaultRelayPoll       = time.Second
	DefaultRelayMaxBackoff = 5 * time.Minute
)

// outboxMigration names the migration that creates the outbox table.
const outboxMigration = "006_outbox"

// OutboxMessage is one message the relay hands to its deliver function.
type OutboxMessage struct {
	Tenant       string
	OperationKey string
	Topic        string
	Payload      []byte
	// Attempt is this delivery's number, 1 for the first.
	Attempt int
}

// IdempotencyKey is the key a delivery sends the receiver (an Idempotency-Key header, a message
// ID): OutboxIdempotencyKey of the message's tenant, operation key and topic. It is the same at
// every delivery of the message and differs between messages (two topics of one call have two
// keys), so a receiver that deduplicates on it alone acts once per message however often the
// relay delivers.
func (m *OutboxMessage) IdempotencyKey() string {
	return OutboxIdempotencyKey(m.Tenant, m.OperationKey, m.Topic)
}

// OutboxKeyPrefix starts every outbox message's Idempotency-Key. Changing it, or the derivation
// of OutboxIdempotencyKey, makes a receiver act again on every message delivered again after the
// change: both are pinned by a test.
const OutboxKeyPrefix = "obx1_"

// OutboxIdempotencyKey returns the Idempotency-Key of the outbox message of topic written by the
// operation (tenant, operationKey): "obx1_" followed by the 64 lower-case hex digits of the
// SHA-256 of the three, each encoded as its byte length (a big-endian uint64) and its bytes, as
// the parts of an operation key are. A call writes at most one message per topic (Enqueue), so
// the topic is what tells its messages apart. A receiver or an operator can derive it from a
// record and a topic.
func OutboxIdempotencyKey(tenant, operationKey, topic string) string {
	var b []byte
	for _, p := range [...]string{tenant, operationKey, topic} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(p)))
		b = append(b, p...)
	}
	sum := sha256.Sum256(b)
	return OutboxKeyPrefix + hex.EncodeToString(sum[:])
}

// RelayOptions configure Store.Relay and Store.RelayOnce. A nil *RelayOptions or a zero field
// means the default.
type RelayOptions struct {
	// Backoff is the pause before the next delivery of a message whose attempt (1 for the
	// first) failed. Defaults to 1s doubling per attempt, at most MaxBackoff.
	Backoff func(attempt int) time.Duration
	// Batch is how many due messages one pass locks and delivers. Defaults to 10.
	Batch int
	// MaxBackoff caps the default Backoff. Defaults to 5 minutes.
	MaxBackoff time.Duration
	// Poll is the pause of Relay after a pass that found nothing due. Defaults to 1s.
	Poll time.Duration
}

func (o *RelayOptions) withDefaults() RelayOptions {
	var r RelayOptions
	if o != nil {
		r = *o
	}
	if r.Batch <= 0 {
		r.Batch = DefaultRelayBatch
	}
	if r.Poll <= 0 {
		r.Poll = DefaultRelayPoll
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = DefaultRelayMaxBackoff
	}
	if r.Backoff == nil {
		maxBackoff := r.MaxBackoff
		r.Backoff = func(attempt int) time.Duration {
			d := time.Second << min(max(attempt-1, 0), 20)
			return min(d, maxBackoff)
		}
	}
	return r
}

// Enqueue writes a message for topic ("" is refused) in the transaction of the Transactional
// tool whose body ctx is: it is delivered by a relay once that transaction commits, and never if
// it rolls back. A tool enqueues at most one message per topic: a second Enqueue of the same topic
// in one call fails (a unique violation, which aborts the transaction). It returns ErrNoTx outside
// a Transactional body, and the transaction's misuse errors as its other statements do.
func Enqueue(ctx context.Context, topic string, payload []byte) error {
	t, ok := ctx.Value(txKey{}).(*bodyTx)
	if !ok {
		return ErrNoTx
	}
	if strings.TrimSpace(topic) == "" {
		return errors.New("pgstore: enqueue: empty topic")
	}
	if payload == nil {
		payload = []byte{}
	}
	_, err := t.Exec(ctx, `INSERT INTO `+t.s.outboxTable+` (tenant, operation_key, topic, payload) VALUES ($1, $2, $3, $4)`,
		t.tenant, t.key, topic, payload)
	if err != nil {
		return fmt.Errorf("pgstore: enqueue %s for %s: %w", topic, t.key, err)
	}
	return nil
}

// Relay delivers the outbox's due messages with deliver until ctx is done, pausing opts.Poll
// after a pass that found nothing due, and returns ctx's error. An error of a pass (the server
// unreachable) is logged by nobody: it is returned through onError when set (may be nil) and the
// loop goes on after a poll. See RelayOnce for what one pass does.
func (s *Store) Relay(ctx context.Context, deliver func(ctx context.Context, m *OutboxMessage) error, opts *RelayOptions, onError func(error)) error {
	o := opts.withDefaults()
	for {
		res, err := s.RelayOnce(ctx, deliver, &o)
		if err != nil && onError != nil && ctx.Err() == nil {
			onError(err)
		}
		if err == nil && res.Found == o.Batch {
			continue // more may be due
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.Poll):
		}
	}
}

// RelayResult counts what one pass did.
type RelayResult struct {
	Found     int // due messages locked
	Delivered int
	Failed    int // deliveries that returned an error; their messages wait for their backoff
}

// RelayOnce is one pass of the relay: in one transaction it locks up to opts.Batch due pending
// messages (FOR UPDATE SKIP LOCKED: messages another relay holds are left to it), calls deliver
// for each (with the transaction's time left; deliver must not keep the message), and records
// each outcome: delivered, or the attempt counted, its error kept (`last_error`) and the next
// attempt put off by opts.Backoff. A message is never dropped: it stays pending, however often
// its delivery fails (OutboxStats shows the failing ones). If the pass cannot commit (the relay
// dies, the server goes away), nothing is recorded and the messages are delivered again: the
// relay delivers at least once.
func (s *Store) RelayOnce(ctx context.Context, deliver func(ctx context.Context, m *OutboxMessage) error, opts *RelayOptions) (RelayResult, error) {
	o := opts.withDefaults()
	var res RelayResult
	err := s.route.detect(ctx)
	if err == nil {
		err = pgx.BeginFunc(ctx, s.pool, func(ptx pgx.Tx) error { return s.relay(ctx, s.on(ptx), deliver, o, &res) })
	}
	if err != nil {
		return RelayResult{}, s.wrap(ctx, "relay", "", err)
	}
	return res, nil
}

// relay is RelayOnce's transaction, on tx.
func (s *Store) relay(ctx context.Context, tx querier, deliver func(ctx context.Context, m *OutboxMessage) error, o RelayOptions, res *RelayResult) error {
	rows, err := tx.Query(ctx, `SELECT tenant, operation_key, topic, payload, attempts FROM `+s.outboxTable+`
WHERE status = 'pending' AND next_attempt_at <= now() ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED`, o.Batch)
	if err != nil {
		return err
	}
	var msgs []*OutboxMessage
	for rows.Next() {
		m := new(OutboxMessage)
		if err := rows.Scan(&m.Tenant, &m.OperationKey, &m.Topic, &m.Payload, &m.Attempt); err != nil {
			rows.Close()
			return err
		}
		m.Attempt++
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	res.Found = len(msgs)
	for _, m := range msgs {
		if derr := deliverOne(ctx, deliver, m); derr != nil {
			res.Failed++
			if _, err := tx.Exec(ctx, `UPDATE `+s.outboxTable+` SET attempts = $4, last_error = $5,
    next_attempt_at = now() + $6::bigint * interval '1 microsecond'
WHERE tenant = $1 AND operation_key = $2 AND topic = $3`, m.Tenant, m.OperationKey, m.Topic, m.Attempt,
				truncate(derr.Error(), 2000), o.Backoff(m.Attempt).Microseconds()); err != nil {
				return err
			}
			continue
		}
		res.Delivered++
		if _, err := tx.Exec(ctx, `UPDATE `+s.outboxTable+` SET status = 'delivered', attempts = $4, last_error = '',
    delivered_at = now() WHERE tenant = $1 AND operation_key = $2 AND topic = $3`, m.Tenant, m.OperationKey, m.Topic, m.Attempt); err != nil {
			return err
		}
	}
	return nil
}

// deliverOne calls deliver, turning a panic into an error.
func deliverOne(ctx context.Context, deliver func(ctx context.Context, m *OutboxMessage) error, m *OutboxMessage) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("deliver panicked: %v", p)
		}
	}()
	return deliver(ctx, m)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// OutboxStats describes the outbox (Store.OutboxStats); the Store is an
// oncekeystore.OutboxInspector, which the worker's sampler reads for the outbox gauges.
type OutboxStats = oncekeystore.OutboxStats

// OutboxStats counts the outbox's messages, in one statement. Failing messages are listed by
// OutboxFailing.
func (s *Store) OutboxStats(ctx context.Context) (*OutboxStats, error) {
	var st OutboxStats
	var oldest *time.Time
	err := s.call(ctx, func(ctx context.Context) error {
		return s.db().QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'pending'),
    count(*) FILTER (WHERE status = 'pending' AND attempts > 0), count(*) FILTER (WHERE status = 'delivered'),
    min(created_at) FILTER (WHERE status = 'pending'), coalesce(max(attempts) FILTER (WHERE status = 'pending'), 0)
FROM `+s.outboxTable).Scan(&st.Pending, &st.Failing, &st.Delivered, &oldest, &st.MostAttempts)
	})
	if err != nil {
		return nil, s.wrap(ctx, "outbox stats", "", err)
	}
	if oldest != nil {
		st.OldestPending = *oldest
	}
	return &st, nil
}

// FailingMessage is a pending message whose last delivery failed.
type FailingMessage struct {
	Tenant, OperationKey, Topic string
	Attempts                    int
	LastError                   string
	NextAttemptAt               time.Time
}

// OutboxFailing returns up to limit (default 100) pending messages whose last delivery failed,
// most attempts first.
func (s *Store) OutboxFailing(ctx context.Context, limit int) ([]FailingMessage, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []FailingMessage
	err := s.call(ctx, func(ctx context.Context) error {
		rows, err := s.db().Query(ctx, `SELECT tenant, operation_key, topic, attempts, last_error, next_attempt_at FROM `+s.outboxTable+`
WHERE status = 'pending' AND attempts > 0 ORDER BY attempts DESC, next_attempt_at LIMIT $1`, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowToStructByPos[FailingMessage])
		return err
	})
	if err != nil {
		return nil, s.wrap(ctx, "outbox failing", "", err)
	}
	return out, nil
}
