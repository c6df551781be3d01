-- The sweep that ends waits whose time has come (`wake_expired`, every
-- pass of the recovery `Sweeper`) reads them by their time. Without an
-- index its `UPDATE` read, and locked while it read, every unsettled run
-- to find the few due. MySQL has no partial index; the runs that do not
-- wait have a NULL `wake_at`, which sorts first, outside the sweep's
-- `wake_at <= now` range, so the range holds the waiting runs whose time
-- has come and nothing else.
CREATE INDEX flowstate_runs_wake_at ON flowstate_runs (wake_at);
