-- Step claims that expire (core's `step_claim`): `claimed_until` is set on
-- every move to running (microseconds on the clock of the processes that
-- open the file: the lease clock) and cleared on every move away;
-- `claim_timeout_ms` is a step's own timeout (NULL: the store's default).
-- The expiry sweep walks the partial index of running steps, first
-- deadline first. Steps already running get the default deadline (ten
-- minutes) from now.
ALTER TABLE flowstate_steps ADD COLUMN claim_timeout_ms INTEGER;
ALTER TABLE flowstate_steps ADD COLUMN claimed_until INTEGER;
UPDATE flowstate_steps
    SET claimed_until = CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + 600000000
    WHERE status = 'running';
CREATE INDEX flowstate_steps_claimed_until_idx ON flowstate_steps (claimed_until, id)
    WHERE claimed_until IS NOT NULL;
