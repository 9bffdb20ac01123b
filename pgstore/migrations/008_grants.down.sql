ALTER TABLE oncekey_approvals DROP COLUMN IF EXISTS grant_id;
DROP TABLE IF EXISTS oncekey_grants;
