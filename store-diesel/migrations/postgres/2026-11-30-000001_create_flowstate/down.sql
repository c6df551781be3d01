-- Reverts 2026-11-30-000001_create_flowstate: every table (and with them
-- their indexes and constraints), children first.
DROP TABLE IF EXISTS flowstate_workflow_versions;
DROP TABLE IF EXISTS flowstate_step_history;
DROP TABLE IF EXISTS flowstate_steps;
DROP TABLE IF EXISTS flowstate_run_state;
DROP TABLE IF EXISTS flowstate_runs;
