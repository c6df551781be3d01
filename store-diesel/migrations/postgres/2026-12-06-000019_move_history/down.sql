-- Nothing to undo on this dialect.
SELECT 1;
