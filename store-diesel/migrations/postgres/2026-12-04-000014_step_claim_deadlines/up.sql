-- Step claims that expire (core's `step_claim`).
--
-- A claim used to hold a step for ever: a worker that died left its step
-- `running`, and nothing claimed it again. Every running step now carries
-- `claimed_until`, microseconds on the database's clock (the lease clock,
-- `src/lease_clock.rs`), set by every move to running and cleared by every
-- move away; a heartbeat extends it, and recovery fails the attempts whose
-- deadline has passed (`RecoveryStore::expire_step_claims`).
-- `claim_timeout_ms` is a step's own timeout; NULL takes the store's
-- default.
--
-- The expiry sweep walks `flowstate_steps_claimed_until_idx`, which holds
-- the running steps only, first deadline first. The cost, measured in the
-- bench: a completion clears `claimed_until`, a column this index names,
-- so it is no longer a heap-only update (migration 000010).
--
-- Steps already running when this runs get the default deadline (ten
-- minutes) from now, so a step a dead worker left before the upgrade comes
-- back too.
ALTER TABLE flowstate_steps
    ADD COLUMN claim_timeout_ms BIGINT NULL,
    ADD COLUMN claimed_until BIGINT NULL;
UPDATE flowstate_steps
    SET claimed_until = (EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::BIGINT + 600000000
    WHERE status = 'running';
CREATE INDEX flowstate_steps_claimed_until_idx ON flowstate_steps (claimed_until, id)
    WHERE claimed_until IS NOT NULL;
