-- Nothing on this dialect: its history rows are updated in place (InnoDB,
-- SQLite's b-tree); PostgreSQL gets free space on its history pages in this
-- version (see its up.sql).
SELECT 1;
