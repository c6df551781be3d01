-- Back to migration 000008: the claim's trigger alone, on its column; a
-- transition writes its history row itself again.
ALTER TABLE flowstate_steps
    CHANGE COLUMN move_history_id claim_history_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL;

DROP TRIGGER flowstate_steps_move_history;

CREATE TRIGGER flowstate_steps_claim_history AFTER UPDATE ON flowstate_steps FOR EACH ROW
INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at, running_at) SELECT NEW.claim_history_id, NEW.id, NEW.current_attempt, 'running', NEW.updated_at, NEW.updated_at FROM DUAL WHERE NOT (NEW.claim_history_id <=> OLD.claim_history_id) ON DUPLICATE KEY UPDATE status = VALUES(status), running_at = VALUES(running_at);
