ALTER TABLE flowstate_workflow_versions DROP COLUMN status, DROP COLUMN source;
ALTER TABLE flowstate_runs DROP COLUMN output;
