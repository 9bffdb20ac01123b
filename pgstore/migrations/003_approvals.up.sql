-- One row per (tenant, operation key) that asked for approval (oncekey.ApprovalPolicy). Arguments
-- are never stored: Summary is what the policy chose to show. Times are written with the
-- database clock, now().
CREATE TABLE oncekey_approvals (
    tenant        text COLLATE "C" NOT NULL,
    operation_key text COLLATE "C" NOT NULL,
    namespace     text NOT NULL DEFAULT '',
    tool          text NOT NULL,
    fingerprint   text NOT NULL,
    workflow_id   text NOT NULL DEFAULT '',
    step_id       text NOT NULL DEFAULT '',
    summary       text NOT NULL DEFAULT '',
    status        text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'timed_out')),
    -- Numbers the requests of the key: a decision is fenced by it.
    episode       bigint NOT NULL CHECK (episode >= 1),
    requested_at  timestamptz NOT NULL,
    deadline      timestamptz NOT NULL,
    -- NULL while pending.
    decided_at    timestamptz,
    decided_by    text NOT NULL DEFAULT '',
    reason        text NOT NULL DEFAULT '',
    -- End of retention, counted from the decision; NULL while pending (never purged).
    expires_at    timestamptz,
    -- Random number written by the request that asked the current episode; RequestApproval
    -- compares it in RETURNING to learn whether it asked.
    request_token bigint NOT NULL,
    PRIMARY KEY (tenant, operation_key)
);

-- ListApprovals: keyset pagination over (requested_at, tenant, operation_key); what waits for a
-- decision (`oncekey approvals`) has its own partial index.
CREATE INDEX oncekey_approvals_requested_idx
    ON oncekey_approvals (requested_at, tenant, operation_key);
CREATE INDEX oncekey_approvals_pending_idx
    ON oncekey_approvals (requested_at, tenant, operation_key) WHERE status = 'pending';
-- Purge: decided approvals past retention.
CREATE INDEX oncekey_approvals_expires_idx
    ON oncekey_approvals (expires_at) WHERE expires_at IS NOT NULL;
