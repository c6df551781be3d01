-- Nothing on this dialect: its per-step moves write the step and its
-- history row in one statement or transaction already; MySQL's history
-- rows of every per-step move are written by one trigger in this version
-- (see its up.sql).
SELECT 1;
