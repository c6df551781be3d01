-- Nothing on this dialect: jsonb stores and reads back every depth core's
-- JSON depth limit lets through (SCHEMA.md, "JSON depth"). MariaDB's JSON
-- columns lose their json_valid check in this version.
SELECT 1;
