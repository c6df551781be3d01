-- Every attempt changes a step's `status` twice (claimed, then succeeded or
-- failed), and SQLite rewrites the entry of every index that names a column
-- an UPDATE changes. `(run_id, status)` was one, on both updates; every
-- query that reads a run's steps is served by the `run_id` prefix of
-- `flowstate_steps_run_name`, and a run has few steps, so it goes.
-- PostgreSQL drops its twin in this version (see its up.sql).
DROP INDEX flowstate_steps_run_status;
