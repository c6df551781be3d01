-- The per-step claim (StepStore::claim_step) on MySQL was five round trips:
-- BEGIN, the guarded UPDATE, the history upsert, a SELECT of the claimed
-- step, COMMIT. MySQL has no UPDATE ... RETURNING and no writable CTE, so
-- the history row cannot ride in the UPDATE's own statement; a trigger can,
-- and a trigger runs inside its statement: the step's move and its history
-- row commit together, or neither does, with no transaction around them.
--
-- The claim's UPDATE stamps `claim_history_id` with the fresh id of the
-- attempt's history row, and this trigger upserts that row. Only the
-- per-step claim writes the column, so no other UPDATE fires the insert
-- (the batch claim and every transition write their history themselves).
-- The INSERT is the scaffold's claim upsert (`sql::claim_move`) over the
-- NEW row; a unit test in src/mysql/sql.rs keeps the two equal.
--
-- On MySQL 8 with binary logging on, creating a trigger needs the TRIGGER
-- privilege on the table, and SUPER (or log_bin_trust_function_creators)
-- as for stored functions.
ALTER TABLE flowstate_steps
    ADD COLUMN claim_history_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL;

CREATE TRIGGER flowstate_steps_claim_history AFTER UPDATE ON flowstate_steps FOR EACH ROW
INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at, running_at) SELECT NEW.claim_history_id, NEW.id, NEW.current_attempt, 'running', NEW.updated_at, NEW.updated_at FROM DUAL WHERE NOT (NEW.claim_history_id <=> OLD.claim_history_id) ON DUPLICATE KEY UPDATE status = VALUES(status), running_at = VALUES(running_at);
