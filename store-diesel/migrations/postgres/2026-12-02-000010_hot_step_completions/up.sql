-- Step completions as heap-only (HOT) updates.
--
-- Every attempt changes a step's `status` twice: the claim (pending or
-- failed -> running) and the completion (running -> succeeded or failed).
-- PostgreSQL writes an UPDATE without a single new index entry (HOT) only
-- when no column that an index names, as a key or in its predicate,
-- changes value, and the row's page has room for the new version. Until
-- this version `status` was a key of `flowstate_steps_run_status_idx` and
-- the predicate of both batch-claim indexes, so both updates of every
-- attempt wrote a new entry in the primary key, `(run_id, name)` and
-- `(run_id, status)`.
--
-- 1. `claimable` is a stored generated column: 1 for the statuses the
--    batch claim takes (BatchClaim::statuses(), as MySQL's virtual column
--    of the same name since 000005), NULL for every other. The partial
--    indexes name it instead of `status`. A success leaves it NULL, so
--    the completion changes no indexed value.
-- 2. `flowstate_steps_run_status_idx` goes: every query that reads a run's
--    steps is served by the `run_id` prefix of
--    `flowstate_steps_run_name_key`, and a run has few steps.
-- 3. New step pages keep 30% free, so the completion's version fits on the
--    page of the claim's (the claim itself is not HOT: it leaves the
--    claimable indexes).
ALTER TABLE flowstate_steps
    ADD COLUMN claimable SMALLINT
        GENERATED ALWAYS AS (CASE WHEN status IN ('pending', 'failed') THEN 1 END) STORED;
DROP INDEX flowstate_steps_claimable_function_idx;
DROP INDEX flowstate_steps_claimable_idx;
DROP INDEX flowstate_steps_run_status_idx;
CREATE INDEX flowstate_steps_claimable_idx ON flowstate_steps (created_at, id)
    WHERE claimable = 1;
CREATE INDEX flowstate_steps_claimable_function_idx ON flowstate_steps (function_name, created_at, id)
    WHERE claimable = 1;
ALTER TABLE flowstate_steps SET (fillfactor = 70);
