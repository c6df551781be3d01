-- Drops everything up.sql created; children before parents so the drops
-- never trip a foreign key. Dropping a table drops its indexes.
DROP TABLE IF EXISTS flowstate_workflow_versions;
DROP TABLE IF EXISTS flowstate_step_history;
DROP TABLE IF EXISTS flowstate_steps;
DROP TABLE IF EXISTS flowstate_run_state;
DROP TABLE IF EXISTS flowstate_runs;
