DROP INDEX IF EXISTS flowstate_steps_claimable_function;
DROP INDEX IF EXISTS flowstate_steps_claimable;
