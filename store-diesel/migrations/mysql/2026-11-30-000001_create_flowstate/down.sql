-- Drops everything up.sql made, children before the tables they reference.
DROP TABLE IF EXISTS flowstate_step_history;
DROP TABLE IF EXISTS flowstate_steps;
DROP TABLE IF EXISTS flowstate_run_state;
DROP TABLE IF EXISTS flowstate_workflow_versions;
DROP TABLE IF EXISTS flowstate_runs;
