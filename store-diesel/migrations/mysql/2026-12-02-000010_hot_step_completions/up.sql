-- Every attempt changes a step's `status` twice (claimed, then succeeded or
-- failed), and InnoDB rewrites the entry of every secondary index whose
-- columns changed. `(run_id, status)` was one, on both updates; every query
-- that reads a run's steps is served by the `run_id` prefix of
-- `flowstate_steps_run_name` (which the foreign key uses too), and a run
-- has few steps, so it goes. PostgreSQL drops its twin in this version
-- (see its up.sql).
ALTER TABLE flowstate_steps DROP INDEX flowstate_steps_run_status;
