ALTER TABLE flowstate_steps
    DROP INDEX flowstate_steps_claimable_function,
    DROP INDEX flowstate_steps_claimable,
    DROP COLUMN claimable;
