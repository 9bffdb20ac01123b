-- One row per (tenant, operation key). Arguments are never stored: only digests, the outcome
-- and the bookkeeping of the claim protocol. Times are written with the database clock, now().
CREATE TABLE oncekey_operations (
    tenant          text COLLATE "C" NOT NULL,
    operation_key   text COLLATE "C" NOT NULL,
    tool            text NOT NULL,
    version         text NOT NULL DEFAULT '',
    fingerprint     text NOT NULL,
    workflow_id     text NOT NULL DEFAULT '',
    step_id         text NOT NULL DEFAULT '',
    -- oncekey.Effect: 2 idempotent, 3 effectful.
    effect          smallint NOT NULL CHECK (effect IN (2, 3)),
    status          text NOT NULL
                    CHECK (status IN ('pending', 'applied', 'failed', 'unknown', 'released', 'expired')),
    -- Fencing number: every write after a claim is conditional on it.
    epoch           bigint NOT NULL CHECK (epoch >= 1),
    -- End of the current claim's lease; NULL unless pending.
    lease_until     timestamptz,
    -- Random number written by the claim that last acquired the record; Claim compares it in
    -- RETURNING to learn whether it acquired.
    claim_token     bigint,
    result          bytea,
    failure         bytea,
    effect_ref      text NOT NULL DEFAULT '',
    resolved_by     text NOT NULL DEFAULT '',
    note            text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    -- End of retention: after it the record is a tombstone (status expired once purged).
    expires_at      timestamptz NOT NULL,
    -- End of the tombstone window: after it the key is free again.
    tombstone_until timestamptz NOT NULL,
    PRIMARY KEY (tenant, operation_key)
) WITH (fillfactor = 80);

-- List: keyset pagination over (updated_at, tenant, operation_key); the records waiting for
-- reconciliation (status unknown) have their own partial index. The index is partial on
-- purpose: an index led by status would be chosen by the planner for the fenced writes
-- (… AND status = 'pending'), scanning every pending entry, dead ones included, instead of
-- the primary key.
CREATE INDEX oncekey_operations_updated_idx
    ON oncekey_operations (updated_at, tenant, operation_key);
CREATE INDEX oncekey_operations_unknown_idx
    ON oncekey_operations (updated_at, tenant, operation_key) WHERE status = 'unknown';
-- Purge: records past retention that are not tombstones yet, and tombstones past their window.
CREATE INDEX oncekey_operations_expires_idx
    ON oncekey_operations (expires_at) WHERE status <> 'expired';
CREATE INDEX oncekey_operations_tombstone_idx
    ON oncekey_operations (tombstone_until);
