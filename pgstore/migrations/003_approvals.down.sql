DROP TABLE IF EXISTS oncekey_approvals;
