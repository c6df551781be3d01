-- Nothing on this dialect: its claim writes the step and its history row
-- in one statement or transaction already; MySQL gets a trigger in this
-- version (see its up.sql).
SELECT 1;
