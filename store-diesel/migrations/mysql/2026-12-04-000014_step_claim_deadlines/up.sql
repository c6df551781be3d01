-- Step claims that expire (core's `step_claim`): `claimed_until` is set on
-- every move to running (microseconds on the database's clock,
-- `UTC_TIMESTAMP(6)`: the lease clock) and cleared on every move away;
-- `claim_timeout_ms` is a step's own timeout (NULL: the store's default).
-- MySQL has no partial index: `(claimed_until, id)` holds every step, the
-- ones not running under NULL, which sorts first and lies outside the
-- expiry sweep's `claimed_until <= now` range. Steps already running get
-- the default deadline (ten minutes) from now.
ALTER TABLE flowstate_steps
    ADD COLUMN claim_timeout_ms BIGINT NULL,
    ADD COLUMN claimed_until BIGINT NULL,
    ADD INDEX flowstate_steps_claimed_until (claimed_until, id);
UPDATE flowstate_steps
    SET claimed_until = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + 600000000
    WHERE status = 'running';
