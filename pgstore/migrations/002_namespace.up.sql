-- The Temporal namespace of the workflow whose claim created the record: oncekey's
-- reconciliation activities act on a record only for workflows of that namespace. Records
-- written before this migration keep '' (not bound to a namespace).
ALTER TABLE oncekey_operations ADD COLUMN namespace text NOT NULL DEFAULT '';
