-- The history's writes without the per-row work that protects nothing.
--
-- 1. The foreign key from a history row to its step made every history
--    insert run the key check, a query of its own per row that finds the
--    step and locks it FOR KEY SHARE. Every history row flowstate writes
--    comes from the step row the same statement has just moved, under that
--    row's lock, so the check can never fail; on the batched claim + succeed
--    path it cost 15% of the server's instructions per step (counted with
--    callgrind on a single-user backend, 20,000 steps, batches of 256).
--    What the key did besides, deleting a step's history with the step, is
--    now done by a statement trigger on the cold path, the delete. Its
--    DELETE reads a snapshot taken after the step's delete, which waited
--    for any claim or move that held the step, so it sees the history row
--    that claim or move wrote.
-- 2. Each history row is updated once after it is written (running, then
--    succeeded or failed), and the update is heap-only when the page has
--    room for the new, larger version (it gains the result and a stamp).
--    At 70% only about a third of a page's rows found room; at 50% most
--    do (5% fewer server instructions per step, same measurement). Only
--    pages written from now on are affected.
ALTER TABLE flowstate_step_history DROP CONSTRAINT flowstate_step_history_step_id_fkey;

CREATE FUNCTION flowstate_steps_delete_history() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM flowstate_step_history AS h USING deleted_steps AS d WHERE h.step_id = d.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER flowstate_steps_delete_history
    AFTER DELETE ON flowstate_steps
    REFERENCING OLD TABLE AS deleted_steps
    FOR EACH STATEMENT EXECUTE FUNCTION flowstate_steps_delete_history();

ALTER TABLE flowstate_step_history SET (fillfactor = 50);
