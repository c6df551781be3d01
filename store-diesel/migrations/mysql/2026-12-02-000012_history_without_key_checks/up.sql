-- Nothing on this dialect: PostgreSQL's up.sql says what changed there
-- and why.
SELECT 1;
