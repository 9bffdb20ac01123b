-- Fails while Transactional records (effect 4) remain: purge or forget them first.
ALTER TABLE oncekey_operations DROP CONSTRAINT oncekey_operations_effect_check,
    ADD CONSTRAINT oncekey_operations_effect_check CHECK (effect IN (2, 3));
