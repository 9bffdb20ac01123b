-- Standing grants (oncekey.Grant): a person approves one tool's calls ahead of time, in one
-- namespace and tenant (and, with workflow_id, one workflow), for the arguments its rule matches,
-- until expires_at or until revoked. A grant is never edited: it is revoked and another made.
-- Times are written with the database clock, now().
CREATE TABLE oncekey_grants (
    id          text COLLATE "C" PRIMARY KEY,
    namespace   text NOT NULL,
    tenant      text COLLATE "C" NOT NULL,
    tool        text NOT NULL,
    workflow_id text NOT NULL DEFAULT '',
    rule        text NOT NULL DEFAULT '',
    created_by  text NOT NULL,
    reason      text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    -- NULL while not revoked.
    revoked_at  timestamptz,
    revoked_by  text NOT NULL DEFAULT ''
);
-- The worker's lookup (the grants of a tenant's tool) and ListGrants, oldest first.
CREATE INDEX oncekey_grants_scope_idx ON oncekey_grants (tenant, tool, created_at, id);

-- The grant that approved an episode (oncekey.Approval.GrantID); '' for a person's decision.
ALTER TABLE oncekey_approvals ADD COLUMN grant_id text NOT NULL DEFAULT '';
