-- One index less for every attempt's history row to enter.
--
-- `(step_id, created_at)` served nothing `UNIQUE (step_id, attempt)` does
-- not: every read of history reaches it by step (`step_history` joins a
-- run's steps to their rows and sorts the whole run's rows anyway), and a
-- step's attempts are created in attempt order. Each attempt's row still
-- paid an entry in it, one of three history index entries per attempt, on
-- the hottest insert there is.
DROP INDEX flowstate_step_history_step_created_idx;
