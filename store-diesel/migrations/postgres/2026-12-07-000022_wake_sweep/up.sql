-- The sweep that ends waits whose time has come (`wake_expired`, every
-- pass of the recovery `Sweeper`) reads them by their time. It had no
-- index: `status IN ('running', 'suspended') AND wake_at <= now` read every
-- unsettled run to find the few due, so an engine with a million runs in
-- flight or asleep paid for all of them every five seconds.
--
-- A run has a `wake_at` only while it waits (a claim clears it). The free
-- sleepers are in `flowstate_runs_sleeping_idx` already (the claim's, by
-- the time they wake); this index holds every other wait: a signal's or
-- children's deadline, a sleeper with a cancel requested. The sweep reads
-- both ranges (`sql::waits::WakeSweep::Split`). Its predicate is the
-- negation of the sleeping index's terms, so no claim's pick of due
-- sleepers can use it: an index of every wait, tried first, won the
-- planner's choice for that pick on cost and would have read past the due
-- runs that wait on a signal. `wake_at` is already indexed, so no update
-- that was heap-only stops being so.
CREATE INDEX flowstate_runs_wake_idx ON flowstate_runs (wake_at)
    WHERE wake_at IS NOT NULL
      AND (waiting_on IS NOT NULL OR cancel_requested OR lease_expires_at IS NOT NULL);
