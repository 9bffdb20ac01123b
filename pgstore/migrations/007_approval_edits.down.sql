DELETE FROM oncekey_approvals WHERE status = 'replaced' OR edit_of <> '';
ALTER TABLE oncekey_approvals DROP COLUMN IF EXISTS edited_as, DROP COLUMN IF EXISTS edit_of,
    DROP COLUMN IF EXISTS changes_requested, DROP COLUMN IF EXISTS model_message,
    DROP CONSTRAINT oncekey_approvals_status_check,
    ADD CONSTRAINT oncekey_approvals_status_check CHECK (status IN ('pending', 'approved', 'denied', 'timed_out'));
