ALTER TABLE flowstate_runs
    DROP INDEX flowstate_runs_settled,
    DROP COLUMN settled;
