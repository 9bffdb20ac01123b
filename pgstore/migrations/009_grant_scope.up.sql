-- Standing grants at scale: the worker's lookup reads the active grants of one scope only, and
-- Purge deletes a grant once it has ended longer than its retention ago.
--
-- purge_at is when Purge deletes the grant: its end (expires_at, or the revoke's time) plus its
-- retention (oncekey.CreateGrantParams.Retention). A grant made before this migration gets 30
-- days after its end; one written by an older oncekey, which does not set it, 120 days from its
-- creation (the longest grant, 90 days, and 30).
ALTER TABLE oncekey_grants ADD COLUMN purge_at timestamptz NOT NULL DEFAULT now() + interval '120 days';
UPDATE oncekey_grants SET purge_at = coalesce(revoked_at, expires_at) + interval '30 days';
-- The worker's lookup (ListGrants of one namespace, tenant and tool, active): the grants not
-- revoked, by expiry, so the expired ones lie outside the index range it reads.
CREATE INDEX oncekey_grants_active_idx ON oncekey_grants (namespace, tenant, tool, expires_at) WHERE revoked_at IS NULL;
-- A namespace's grants, oldest first (the inbox's grants page for every tenant).
CREATE INDEX oncekey_grants_namespace_idx ON oncekey_grants (namespace, created_at, id);
-- Purge's condition.
CREATE INDEX oncekey_grants_purge_idx ON oncekey_grants (purge_at);
