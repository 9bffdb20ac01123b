-- Signed revocations of standing grants (package decisionsig): the signed statement of a grant's
-- revocation (oncekeystore.Grant.RevocationSignature), as the person who revoked it sent it; NULL
-- while the grant is not revoked, or for a revocation that was not signed.
ALTER TABLE oncekey_grants ADD COLUMN revocation_signature bytea;
