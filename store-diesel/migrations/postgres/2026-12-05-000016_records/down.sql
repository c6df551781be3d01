ALTER TABLE flowstate_runs DROP COLUMN output;
