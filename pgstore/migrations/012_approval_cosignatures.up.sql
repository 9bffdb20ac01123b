-- Four-eyes approval (ApprovalPolicy.Signers): the signed statements of the approvals recorded
-- while a request waited for more signers (oncekeystore.Approval.Cosignatures), oldest first;
-- empty for a request that needed one signer. A new episode clears them.
ALTER TABLE oncekey_approvals ADD COLUMN cosigned bytea[] NOT NULL DEFAULT '{}';
