DROP INDEX IF EXISTS oncekey_grants_purge_idx;
DROP INDEX IF EXISTS oncekey_grants_namespace_idx;
DROP INDEX IF EXISTS oncekey_grants_active_idx;
ALTER TABLE oncekey_grants DROP COLUMN IF EXISTS purge_at;
