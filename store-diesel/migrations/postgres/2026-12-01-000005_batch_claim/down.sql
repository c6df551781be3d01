DROP INDEX IF EXISTS flowstate_steps_claimable_function_idx;
DROP INDEX IF EXISTS flowstate_steps_claimable_idx;
