-- Approving with edited arguments and a message for the model (oncekey.ApprovalReplaced,
-- oncekey.Approval.ModelMessage, ChangesRequested, EditOf, EditedAs). A replaced approval is
-- decided: its call never runs, the edit (edited_as) runs instead under an approval of its own
-- whose edit_of names it back.
ALTER TABLE oncekey_approvals DROP CONSTRAINT oncekey_approvals_status_check,
    ADD CONSTRAINT oncekey_approvals_status_check CHECK (status IN ('pending', 'approved', 'denied', 'timed_out', 'replaced')),
    ADD COLUMN model_message     text NOT NULL DEFAULT '',
    ADD COLUMN changes_requested boolean NOT NULL DEFAULT false,
    ADD COLUMN edit_of           text NOT NULL DEFAULT '',
    ADD COLUMN edited_as         text NOT NULL DEFAULT '';
