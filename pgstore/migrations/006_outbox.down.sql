DROP TABLE IF EXISTS oncekey_outbox;
