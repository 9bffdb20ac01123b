ALTER TABLE oncekey_grants DROP COLUMN IF EXISTS revocation_signature;
