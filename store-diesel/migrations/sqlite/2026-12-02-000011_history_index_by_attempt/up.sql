-- One index less for every attempt's history row to enter: `(step_id,
-- created_at)` served nothing `UNIQUE (step_id, attempt)` does not.
-- PostgreSQL's up.sql says more.
DROP INDEX flowstate_step_history_step_created;
