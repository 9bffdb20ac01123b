-- Signed decisions (package decisionsig): the signed statement of the resolution that settled a
-- record at signature_epoch (oncekeystore.SignatureStore), of the decision on an approval
-- (oncekeystore.Approval.Signature) and of the making of a standing grant
-- (oncekeystore.Grant.Signature), as the decider sent them; NULL for a decision that was not
-- signed. Only a signed resolution, the approval and the grant statements touch them, so the
-- records' statements work on a schema before this migration.
ALTER TABLE oncekey_operations ADD COLUMN signature bytea, ADD COLUMN signature_epoch bigint;
ALTER TABLE oncekey_approvals ADD COLUMN signature bytea;
ALTER TABLE oncekey_grants ADD COLUMN signature bytea;
