DROP TRIGGER flowstate_steps_claim_history;
ALTER TABLE flowstate_steps DROP COLUMN claim_history_id;
