ALTER TABLE flowstate_step_history SET (fillfactor = 70);
DROP TRIGGER flowstate_steps_delete_history ON flowstate_steps;
DROP FUNCTION flowstate_steps_delete_history();
-- Rows whose step is gone could only come from writes outside flowstate;
-- the key cannot be restored over them.
DELETE FROM flowstate_step_history AS h
    WHERE NOT EXISTS (SELECT 1 FROM flowstate_steps AS s WHERE s.id = h.step_id);
ALTER TABLE flowstate_step_history ADD CONSTRAINT flowstate_step_history_step_id_fkey
    FOREIGN KEY (step_id) REFERENCES flowstate_steps (id) ON DELETE CASCADE;
