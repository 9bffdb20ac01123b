-- Messages a Transactional tool's body wrote in its transaction (pgstore.Enqueue), for the relay
-- (Store.Relay) to deliver at least once, with the operation key as the Idempotency-Key. A
-- message is pending until delivered; a failed delivery is counted and retried with backoff,
-- never dropped.
CREATE TABLE oncekey_outbox (
    tenant          text COLLATE "C" NOT NULL,
    operation_key   text COLLATE "C" NOT NULL,
    topic           text NOT NULL,
    payload         bytea NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered')),
    attempts        integer NOT NULL DEFAULT 0,
    last_error      text NOT NULL DEFAULT '',
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    PRIMARY KEY (tenant, operation_key, topic)
);
-- The relay's scan: pending messages due, oldest due first.
CREATE INDEX oncekey_outbox_due_idx ON oncekey_outbox (next_attempt_at) WHERE status = 'pending';
