ALTER TABLE oncekey_approvals DROP COLUMN IF EXISTS cosigned;
