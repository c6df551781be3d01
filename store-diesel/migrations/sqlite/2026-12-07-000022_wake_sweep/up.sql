-- The sweep that ends waits whose time has come (`wake_expired`) reads
-- them by their time, as on PostgreSQL (see its up.sql): before, it read
-- every unsettled run while it held the one writer. The index holds the
-- waiting runs alone (a claim clears `wake_at`).
CREATE INDEX flowstate_runs_wake_idx ON flowstate_runs (wake_at)
    WHERE wake_at IS NOT NULL;
