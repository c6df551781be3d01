-- The run claim reads no sleeping run (SCHEMA.md, "The run claim reads no
-- held run"). Migration 000020 left held runs out of the claim's ranges;
-- a run asleep (`wake_at` set, waiting on nothing else) stayed in
-- `flowstate_runs_free_idx`, and every claim read past all the runs an
-- engine had put to sleep before the first it could take, since a sleep
-- ends with time, not with a write. Now:
-- - `flowstate_runs_free_idx` holds the free runs that do not sleep (a run
--   waiting on a signal or on its children stays: another row wakes it);
-- - `flowstate_runs_sleeping_idx` holds the sleeping ones by the time they
--   wake, and the claim reads its range up to the clock.
-- The claim's predicate spells both conditions as these do
-- (`sql::waits::free_sql`, `due_sql`), so the planner matches them.
DROP INDEX flowstate_runs_free_idx;
CREATE INDEX flowstate_runs_free_idx ON flowstate_runs (created_at, id)
    WHERE status IN ('running', 'suspended') AND NOT cancel_requested
      AND lease_expires_at IS NULL AND (wake_at IS NULL OR waiting_on IS NOT NULL);
CREATE INDEX flowstate_runs_sleeping_idx ON flowstate_runs (wake_at, id)
    WHERE status IN ('running', 'suspended') AND NOT cancel_requested
      AND lease_expires_at IS NULL AND wake_at IS NOT NULL AND waiting_on IS NULL;
