-- One index less for every attempt's history row to enter: `(step_id,
-- created_at)` served nothing `UNIQUE (step_id, attempt)` does not (which
-- also serves the foreign key on `step_id`). PostgreSQL's up.sql says more.
ALTER TABLE flowstate_step_history DROP INDEX flowstate_step_history_step_created;
