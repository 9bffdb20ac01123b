-- oncekey.Transactional (effect 4): a tool whose writes commit with its record's completion.
ALTER TABLE oncekey_operations DROP CONSTRAINT oncekey_operations_effect_check,
    ADD CONSTRAINT oncekey_operations_effect_check CHECK (effect IN (2, 3, 4));
