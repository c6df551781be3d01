-- Run leases (see store-diesel/SCHEMA.md): who holds a run, until when on
-- the database's clock, the fencing token of the last claim, consecutive
-- failures and the last reason, and a pending cancel request.
ALTER TABLE flowstate_runs
    ADD COLUMN lease_owner      TEXT COLLATE "C",
    ADD COLUMN lease_token      BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN lease_expires_at BIGINT,
    ADD COLUMN failures         BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN failure_reason   TEXT,
    ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE;
-- The claim's scans, oldest first: unsettled runs free of a cancel request,
-- and (few) unsettled runs with one. Settled runs, most of the table in
-- time, are in neither. The cancel term also keeps the runs listing off
-- them: its status filter alone does not imply their predicates, so it
-- keeps `flowstate_runs_status_created_idx`.
CREATE INDEX flowstate_runs_claimable_idx ON flowstate_runs (created_at, id)
    WHERE status IN ('running', 'suspended') AND NOT cancel_requested;
CREATE INDEX flowstate_runs_cancel_requested_idx ON flowstate_runs (created_at, id)
    WHERE status IN ('running', 'suspended') AND cancel_requested;
