ALTER TABLE oncekey_grants DROP COLUMN IF EXISTS signature;
ALTER TABLE oncekey_approvals DROP COLUMN IF EXISTS signature;
ALTER TABLE oncekey_operations DROP COLUMN IF EXISTS signature_epoch, DROP COLUMN IF EXISTS signature;
