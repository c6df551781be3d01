-- Nothing on this dialect: MySQL has no partial index, and a prune of
-- runs reads `flowstate_runs_status_updated (status, updated_at, id)`
-- (migration 000006), one range per settled status.
SELECT 1;
