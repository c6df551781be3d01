-- Every per-step move on MySQL writes its history row by trigger, inside
-- the move's own statement (issue 31). Before this version only the
-- per-step claim did (migration 000008: it stamped `claim_history_id`),
-- and a transition, a retry or a claimer's move was a transaction of four
-- round trips: BEGIN, the guarded UPDATE, the history upsert, COMMIT.
-- MySQL has no UPDATE ... RETURNING and no writable CTE; a trigger runs
-- inside its statement, so the step's move and its history row commit
-- together, or neither does, under autocommit: one round trip.
--
-- Each per-step move's guarded UPDATE (the claim's included) stamps
-- `move_history_id` with the fresh id of the attempt's history row, and
-- this one trigger upserts that row whenever the column changes. The row a
-- move writes depends only on the status it moves to (the scaffold's
-- `StepMove::history_settles`: the status, its time stamp, its payload),
-- so the trigger branches on NEW.status, each branch the scaffold's
-- history upsert of a move to that status over the NEW row; a unit test in
-- src/mysql/sql.rs keeps them equal. One trigger, not a second beside the
-- claim's: every UPDATE of flowstate_steps (the batch claim's and the
-- batch completions', which write their history rows themselves and never
-- stamp the column) evaluates each trigger once per row.
--
-- The claim's column is renamed, not replaced, so a row keeps its stamp:
-- a step claimed before this migration (its history row written by the
-- old trigger) and moved after it gets a fresh id, which fires the upsert
-- on its attempt's row (the duplicate key), as if it had been claimed
-- after. The rename comes first: from then on a claim of an older
-- flowstate fails on the missing column (an older flowstate refuses to
-- open this schema anyway) instead of moving a step without its history
-- row while neither trigger is there.
--
-- On MySQL 8 with binary logging on, creating a trigger needs the TRIGGER
-- privilege on the table, and SUPER (or log_bin_trust_function_creators)
-- as for stored functions.
ALTER TABLE flowstate_steps
    CHANGE COLUMN claim_history_id move_history_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL;

DROP TRIGGER flowstate_steps_claim_history;

CREATE TRIGGER flowstate_steps_move_history AFTER UPDATE ON flowstate_steps FOR EACH ROW
BEGIN
IF NOT (NEW.move_history_id <=> OLD.move_history_id) THEN
IF NEW.status = 'pending' THEN
INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at) SELECT NEW.move_history_id, NEW.id, NEW.current_attempt, 'pending', NEW.updated_at FROM DUAL ON DUPLICATE KEY UPDATE status = VALUES(status);
ELSEIF NEW.status = 'scheduled' THEN
INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at, scheduled_at) SELECT NEW.move_history_id, NEW.id, NEW.current_attempt, 'scheduled', NEW.updated_at, NEW.updated_at FROM DUAL ON DUPLICATE KEY UPDATE status = VALUES(status), scheduled_at = VALUES(scheduled_at);
ELSEIF NEW.status = 'running' THEN
INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at, running_at) SELECT NEW.move_history_id, NEW.id, NEW.current_attempt, 'running', NEW.updated_at, NEW.updated_at FROM DUAL ON DUPLICATE KEY UPDATE status = VALUES(status), running_at = VALUES(running_at);
ELSEIF NEW.status = 'succeeded' THEN
INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at, succeeded_at, result) SELECT NEW.move_history_id, NEW.id, NEW.current_attempt, 'succeeded', NEW.updated_at, NEW.updated_at, NEW.result FROM DUAL ON DUPLICATE KEY UPDATE status = VALUES(status), succeeded_at = VALUES(succeeded_at), result = VALUES(result);
ELSEIF NEW.status = 'failed' THEN
INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at, failed_at, error) SELECT NEW.move_history_id, NEW.id, NEW.current_attempt, 'failed', NEW.updated_at, NEW.updated_at, NEW.error FROM DUAL ON DUPLICATE KEY UPDATE status = VALUES(status), failed_at = VALUES(failed_at), error = VALUES(error);
END IF;
END IF;
END;
