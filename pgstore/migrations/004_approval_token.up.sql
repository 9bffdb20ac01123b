-- The token the worker minted for the request that asked the current episode
-- (oncekey.Approval.Token): a decision must name it, and the interceptor runs a call only on an
-- approval that has one. Approvals asked before this migration keep '' (asked by the approval
-- workflow under the earlier protocol: they authorise nothing, and the next call asks anew).
ALTER TABLE oncekey_approvals ADD COLUMN token text NOT NULL DEFAULT '';
