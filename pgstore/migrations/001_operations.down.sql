DROP TABLE IF EXISTS oncekey_operations;
