-- Nothing on this dialect: the json_valid checks stay, since SQLite's
-- json_valid accepts up to 1,000 levels, far above core's JSON depth
-- limit (SCHEMA.md, "JSON depth"). MariaDB's JSON columns lose their
-- json_valid check in this version.
SELECT 1;
