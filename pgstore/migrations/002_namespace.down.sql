ALTER TABLE oncekey_operations DROP COLUMN namespace;
