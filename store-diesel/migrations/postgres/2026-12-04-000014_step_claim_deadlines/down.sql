DROP INDEX flowstate_steps_claimed_until_idx;
ALTER TABLE flowstate_steps
    DROP COLUMN claimed_until,
    DROP COLUMN claim_timeout_ms;
