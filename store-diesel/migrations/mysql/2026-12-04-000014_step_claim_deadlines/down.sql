ALTER TABLE flowstate_steps
    DROP INDEX flowstate_steps_claimed_until,
    DROP COLUMN claimed_until,
    DROP COLUMN claim_timeout_ms;
